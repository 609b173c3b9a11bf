"""api/service/reports."""
