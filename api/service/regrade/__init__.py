"""api/service/regrade."""
