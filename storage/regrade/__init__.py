"""storage/regrade."""
