"""Where Sayso caches files, and writing them safely; shared by the engine and the app."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/sayso``, else ``~/.cache/sayso``: files that can be fetched or made again."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "sayso"


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader (another start, a crash half-way) sees the old file
    or the new one, never part of one: a temporary file beside it, then ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    part.write_text(text, encoding="utf-8")
    os.replace(part, path)
