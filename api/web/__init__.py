"""The adjudicator's workbench: server-rendered pages beside the JSON API (``/v1``).

``WorkbenchPlugin`` wires the pages, their templates and static assets, the
Content-Security-Policy of every HTML answer and the offline API documentation page.
"""

from api.web.plugin import WorkbenchPlugin, offline_docs

__all__ = ["WorkbenchPlugin", "offline_docs"]
