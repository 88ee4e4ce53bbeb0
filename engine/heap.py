"""How the C heap treats the engine's large temporary arrays (glibc's malloc, on Linux).

glibc gives a block larger than its mmap threshold (128 KB to start with) a mapping of its own and
unmaps it when it is freed, and gives the top of its heap back to the system past its trim threshold
(also 128 KB). Arrays of a few MB that every call makes and frees, as the voice activity detector's
batched encoder does, are then fresh memory on every call: thousands of page faults a call, a
measurable part of a short transcription (docs/PERFORMANCE.md: glibc heap thresholds). glibc raises
both thresholds by itself once a mapped block is freed, to that block's size, so whether it does
would depend on what a load happens to free. They are set here on purpose, to sizes that hold a
30-second piece's arrays.
"""

from __future__ import annotations

import ctypes

MMAP_THRESHOLD = 32 << 20
"""Blocks up to this size come from the heap, and are reused there after they are freed."""
TRIM_THRESHOLD = 64 << 20
"""Free memory at the heap's top that is kept rather than given back to the system."""

_M_TRIM_THRESHOLD = -1  # mallopt's parameters, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3


def keep_large_blocks() -> None:
    """Set glibc's thresholds (``MMAP_THRESHOLD``, ``TRIM_THRESHOLD``) for this process; nothing
    where the C library is another (macOS, Windows, musl: they manage large blocks their own way)."""
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols: its C library among them
    except (OSError, TypeError):  # Windows: no such handle
        return
    if not hasattr(libc, "gnu_get_libc_version"):
        return
    libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
