"""The correctness gate (DESIGN.md "Correct"): a deployed variant's outputs against the reference model's."""
