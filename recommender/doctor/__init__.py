"""What this host has and what an experiment needs from it, as checks with the fix in one line: `recommender doctor
[FILE]` prints them, and `run` calls the same preflights (targets/, hardware.py) and engine checks before any server
starts."""
