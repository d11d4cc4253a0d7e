"""recommender: benchmark model-serving configurations and recommend one to deploy."""

__version__ = "0.1.0"
