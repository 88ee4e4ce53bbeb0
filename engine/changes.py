"""A file that changes while it is read (cut short by a copy over it, rewritten, replaced) is an error,
never a partial read taken for the whole: the model file's rule (``engine.gguf.reader``) and the audio's
(``engine.audio``)."""

from __future__ import annotations

import os


def identity(info: os.stat_result) -> tuple[int, ...]:
    """What tells a file apart from a changed or another one at its path: device, inode, size, time of change."""
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def changed_problem(size: int, now: int) -> str:
    """What to say of a file that changed after it was opened at ``size`` bytes and is ``now`` bytes long
    (the sizes said where they differ)."""
    sizes = f" (it was {size} bytes, is {now} now)" if now != size else ""
    return f"changed while it was being read{sizes}"
