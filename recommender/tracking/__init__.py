"""Where results go besides recommender's own store: experiment trackers (MLflow)."""
