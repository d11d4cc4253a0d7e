"""Measuring one deployed candidate: load runs cut into windows with server figures, decided into a headline.

repeats.py      the fixed protocol: `repeats` load runs of the whole traffic plan
load_search.py  adaptive search's load search per candidate, and the final repeats at the level it found
"""
