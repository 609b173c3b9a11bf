"""Webhooks: admins register endpoints that receive signed events, delivered from an outbox.

``use_cases`` registers, lists and redelivers; ``queries`` reads and writes endpoints,
deliveries and attempts (and leases one send); ``outbox`` writes a delivery per
subscribed endpoint in the transaction of each audited event it announces (a subscriber
of the database's audit); ``target`` checks where a request may go and pins it there;
``delivery`` is the loop that sends, one lane per endpoint, with retries and a circuit
breaker; ``routes`` are the HTTP controllers. The tables are in
:mod:`storage.webhooks`. Only the app wiring imports this package: the runtime and the
command line's store subscribe the outbox, the runtime starts the delivery loop, the
route list serves the routes.
"""
