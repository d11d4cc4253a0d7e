"""A local tokenizer: the folder holding a model's `tokenizer.json` (what Hugging Face's `save_pretrained` writes),
read through files/document.py's capped reader. Never a hub name: a tokenizer is not downloaded (a name that is not a
folder is refused with the fix), so a run measures the same prompts offline and on every host.

    read_tokenizer(folder, error) -> tokenizers.Tokenizer
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from recommender.errors import InputError
from recommender.files.document import read_text

KIND = "tokenizer file"
FILE = "tokenizer.json"
MAX_BYTES = 64 * 1024 * 1024  # the largest tokenizer.json of today's open models is about 17 MB
_HINT = (
    "Give a folder holding the model's tokenizer.json (tokenizer.save_pretrained(folder) writes it), or leave "
    "payload.generation.tokenizer out for the packaged bert-uncased tokenizer; a tokenizer is never downloaded."
)


def read_tokenizer(folder: str | Path, error: type[InputError] = InputError) -> Any:
    """The tokenizer saved in `folder` (its tokenizer.json), without truncation or padding, or `error` naming the
    folder and the fix."""
    folder = Path(folder)
    if not folder.is_dir():
        raise error(
            f"{folder}: is not a folder (a tokenizer is read from a local folder, never a hub name)", hint=_HINT
        )
    path = folder / FILE
    if not path.is_file():
        raise error(f"{folder}: holds no {FILE}", hint=_HINT)
    stat = path.stat()
    try:
        return _parsed(str(path), stat.st_mtime_ns, stat.st_size)
    except InputError as exc:
        raise error(exc.message, hint=exc.hint) from None


@lru_cache(maxsize=4)
def _parsed(path: str, _mtime: int, _size: int) -> Any:
    """The tokenizer of one tokenizer.json, read once per version of the file."""
    from tokenizers import Tokenizer

    text = read_text(path, KIND, limit=MAX_BYTES, hint=_HINT)
    try:
        tokenizer = Tokenizer.from_str(text)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # tokenizers raises an Exception for a file it cannot read, a Rust panic for some
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise InputError(f"{path}: is not a tokenizer the tokenizers library reads ({reason})", hint=_HINT) from None
    tokenizer.no_truncation()  # counts are of whole prompts: a saved truncation (MiniLM's 128) would cut them
    tokenizer.no_padding()
    return tokenizer
