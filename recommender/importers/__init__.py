"""Converters from other tools' job definitions into recommender experiment files."""
