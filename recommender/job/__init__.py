"""The job (docs/design.md "The pipeline"): what `recommender run` does, from a validated spec to stored runs.

pipeline.py       the job: lease, plan, the search's ask/tell loop, one candidate at a time or several at once
context.py        what the job builds once: the frozen run context, its placements (targets), options, work items
candidate_run.py  one candidate: reuse check, admission, build, deploy, correctness gate, load -> RunOutcome
schedule.py       which candidates may run together (max_parallel) and the pool that runs them
protocol.py       the measurement protocol's fingerprint: the key that decides reuse
"""
