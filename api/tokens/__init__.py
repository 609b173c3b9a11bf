"""Tokens and sign-in: who may call the service, and how a browser signs in.

:mod:`~api.tokens.use_cases` issues, lists and revokes API tokens (each a named
principal with one role; the secret shown once); :mod:`~api.tokens.routes`
(``/v1/tokens``), :mod:`~api.tokens.cli` (``sre-judge tokens``) and
:mod:`~api.tokens.pages` (the workbench's sign-in and sign-out) present them. Resolving
a token or a session on each request is every feature's concern and stays at the edges
(:mod:`api.http.auth`, :mod:`api.web.sessions`); the token table in :mod:`storage.tokens`.
"""
