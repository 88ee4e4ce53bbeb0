"""Where Sayso caches files, and writing them safely; shared by the engine and the app."""

from __future__ import annotations

import fcntl
import os
import stat
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sayso.engine.errors import SaysoError

SPECIAL_FILES = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a pipe (FIFO)", stat.S_IFCHR: "a character device",
                 stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}
"""What a path that is not a regular file is, by its ``stat`` type, in the words of an error."""


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/sayso``, else ``~/.cache/sayso``: files that can be fetched or made again."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "sayso"


def check_output(path: Path) -> None:
    """Raise SaysoError unless ``path`` is a regular file or nothing yet. A file renamed over a device, a
    pipe, a socket or a folder's name replaces it: ``/dev/null`` or ``/dev/full`` gone for the whole
    machine when the user is root."""
    try:
        mode = path.stat().st_mode
    except OSError:  # nothing there (or a folder above that isn't one): the write says what is wrong
        return
    if not stat.S_ISREG(mode):
        kind = SPECIAL_FILES.get(stat.S_IFMT(mode), "a special file")
        raise SaysoError(f"{path} is {kind}, not a file: Sayso writes only a new file or over a regular one. "
                         "Give the path of a file to write.")


@contextmanager
def atomic_output(path: Path, mode: int | None = None) -> Iterator[Path]:
    """A temporary file beside ``path`` to write in the ``with`` block, renamed over ``path`` when the block
    ends, removed when it raises: a reader (another start, a crash half-way) sees the old file or the new
    one, never part of one. ``path`` must be a regular file or nothing yet (``check_output``). ``mode``:
    the file's permissions, set before anything is in it (None: the process's default).

    The temporary file stays locked (``flock``) while it is written, so that the temporary files of
    ``path`` that a killed writer left (no lock on them) are told from one in use and removed here."""
    check_output(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_parts(path)
    part = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if mode is not None:
            os.fchmod(fd, mode)  # the umask may take bits away; these are what was asked
        yield part
        check_output(path)  # a special file put there meanwhile is not replaced either
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)


def _remove_abandoned_parts(path: Path) -> None:
    """Remove the temporary files of ``path`` that no writer holds: what a killed writer left."""
    for part in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            fd = os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # gone meanwhile, or a link: not ours to remove
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                part.unlink(missing_ok=True)
        except BlockingIOError:  # a writer at work
            pass
        finally:
            os.close(fd)


def write_text_atomically(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` through ``atomic_output``."""
    with atomic_output(path, mode) as part, open(part, "w", encoding="utf-8") as file:
        file.write(text)


def checksum(data: bytes) -> str:
    """16 hex digits that change when ``data`` does, to name a cache file after what it was made
    from. zlib's CRC-32 and Adler-32 rather than hashlib's SHA-256: hashlib loads OpenSSL (memory and
    time on every start; docs/PERFORMANCE.md: cache names without hashlib) and these names need no
    defence against forgery."""
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"
