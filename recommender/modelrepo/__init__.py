"""Model repository: export a model once per optimization, then write one Triton model repository per candidate."""
