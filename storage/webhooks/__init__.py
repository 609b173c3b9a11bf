"""Webhooks: endpoints, an outbox written with the events, deliveries and their attempts."""
