"""Serving targets (docs/design.md "Targets"): where a candidate is deployed.

    registry.py   target name -> Target class (`get_target`, `target_for`)
    base.py       the Target protocol; deployment.py: the lifecycle every deployment shares
    local, docker, sagemaker, remote: one module per target, holding only what differs

Importing the package imports nothing else: the Locust child reads `targets.kserve` without the cloud clients.
"""
