"""The user's files: reading what a user names (document.py; a trace of request times: trace.py), writing outputs
without clobbering (destination.py), and where recommender keeps its own working files (paths.py)."""
