"""The user's files: reading what a user names (document.py), writing outputs without clobbering (destination.py),
and where recommender keeps its own working files (paths.py)."""
