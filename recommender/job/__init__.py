"""The job (docs/design.md "The pipeline"): what `recommender run` does, from a validated spec to stored runs.

pipeline.py   the job: lease, plan, the search's ask/tell loop, one candidate at a time or several at once
schedule.py   which candidates may run together (max_parallel) and the pool that runs them
protocol.py   the measurement protocol's fingerprint: the key that decides reuse
"""
