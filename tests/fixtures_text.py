"""Text shared by several test files: the tiny random-weights bert of the CLI tests, and a Python-backend repository."""

from __future__ import annotations

from pathlib import Path

# model and payload of the tiny bert every end-to-end test serves (a format template: braces are doubled)
TINY_BERT_YAML = """model:
  source: bert
  architecture: {{layers: 1, hidden: 32, heads: 2, intermediate: 64}}
payload:
  sequence_length: 16
"""


def python_backend_repository(root: Path, model: str) -> Path:
    """A minimal Triton repository (config.pbtxt and a version folder) for packaging tests; nothing serves it."""
    (root / model / "1").mkdir(parents=True)
    (root / model / "config.pbtxt").write_text(f'name: "{model}"\nbackend: "python"\nmax_batch_size: 8\n')
    (root / model / "1" / "model.py").write_text("# python backend model\n")
    return root
