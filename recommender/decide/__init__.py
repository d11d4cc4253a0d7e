"""Decide: pure functions over stored measurements (ranking, cost, prices, autoscaling, budget, recommendation).

Nothing here imports the store: callers read results and hand them in (see recommender/review.py).
"""
