"""Where Sayso caches files, and writing them safely; shared by the engine and the app."""

from __future__ import annotations

import os
import zlib
from pathlib import Path


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/sayso``, else ``~/.cache/sayso``: files that can be fetched or made again."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "sayso"


def write_text_atomically(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` so that a reader (another start, a crash half-way) sees the old file
    or the new one, never part of one: a temporary file beside it, then ``os.replace``. ``mode``: the
    file's permissions, set before any text is in it (None: the process's default)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666 if mode is None else mode)
    if mode is not None:
        os.fchmod(fd, mode)  # the umask, or a file a crash left, may give other bits; these are what was asked
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(part, path)


def checksum(data: bytes) -> str:
    """16 hex digits that change when ``data`` does, to name a cache file after what it was made
    from. zlib's CRC-32 and Adler-32 rather than hashlib's SHA-256: hashlib loads OpenSSL (3 MB and
    3 ms of every start) and these names need no defence against forgery."""
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"
