"""The HTTP edge's own routes: health and readiness, and the rubrics. The features' routes
live in their folders; :func:`api.app.route_handlers` lists everything the app serves."""
