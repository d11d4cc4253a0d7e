"""The correctness gate (docs/design.md "Correct"): a deployed variant's outputs against the reference model's."""
