"""Webhooks' tables: endpoints, the outbox of deliveries, their attempts (the feature is
:mod:`api.webhooks`)."""
