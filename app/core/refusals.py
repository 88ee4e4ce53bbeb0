"""What to tell the user when the operating system refuses: one line for the CLI and the app alike."""

from __future__ import annotations

import errno

_WRITABLE = "Check the folder's permissions, or point SAYSO_DATA_DIR at a folder you can write."
_FULL = "The disk is full: free some space and try again."
HINTS = {
    errno.EACCES: _WRITABLE,
    errno.EPERM: _WRITABLE,
    errno.EROFS: "The disk is read-only: point SAYSO_DATA_DIR at a writable folder.",
    errno.ENOSPC: _FULL,
    errno.EFBIG: _FULL,  # a file past what the disk (or a limit on this process) allows: full for this file
    errno.EDQUOT: "Your disk quota is used up: free some space and try again.",
}


REFUSED_WRITES = (errno.EACCES, errno.EPERM, errno.EROFS)


def environment_error(error: OSError, elsewhere: str | None = None) -> str:
    """One line for an operating system's refusal: what failed, on which file, and what to do.
    ``elsewhere``: what to do instead of the data folder's hint when a write the user placed was
    refused (``sayso transcribe -o``'s folder, ``sayso convert``'s output)."""
    where = f" ({error.filename})" if error.filename else ""
    if elsewhere and error.errno in REFUSED_WRITES:
        return f"{error.strerror or error}{where}. {elsewhere}"
    hint = HINTS.get(error.errno, "Check the file and folder named, and try again.")
    return f"{error.strerror or error}{where}. {hint}"
