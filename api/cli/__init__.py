"""api/cli."""
