"""api/service."""
