"""api/http."""
