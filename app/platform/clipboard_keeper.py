"""The clipboard outlives Sayso: a selection set through data control lasts only as long as the process
that serves it, so when Sayso quits while the clipboard is its own (the user's contents, put back after
a paste), it hands them to a keeper. That is Sayso started again as a small process in a session of its
own (``sayso --keep-clipboard``, not a user's command): it sets the contents as the clipboard, serves
every type until another client takes the clipboard or the compositor goes, then exits, as wl-copy does
for one type. The contents reach it on its standard input, never on its command line, which any local
user can read. It imports neither Qt nor numpy, so it starts in a moment.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import BinaryIO

from sayso.app.platform.data_control import Contents, DataControlClipboard, DataControlUnavailable

KEEP_CLIPBOARD = "--keep-clipboard"
TAKE_OVER_S = 5.0  # the time a keeper gets to start and set the clipboard


def hand_over(contents: Contents) -> None:
    """Start a keeper of ``contents`` (not empty): it sets them as the clipboard in a moment, which ends
    the caller's selection, and goes on after the caller has quit. OSError when it can't be started."""
    frozen = getattr(sys, "frozen", False)  # the packaged app is one executable, which takes no ``-m``
    command = [sys.executable, *([] if frozen else ["-m", "sayso"]), KEEP_CLIPBOARD]
    # In the root folder: a keeper may last for hours, and a folder it stood in could not be unmounted.
    keeper = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd="/",
                              start_new_session=True)  # fmt: skip
    with keeper.stdin:
        _write(keeper.stdin, contents)


def keep() -> int:
    """The keeper's work: the contents on standard input set as the clipboard and served until it is
    the clipboard no more; 1 when they came incomplete or can't be set."""
    clipboard = DataControlClipboard()
    try:
        selection = clipboard.put(_read(sys.stdin.buffer)).result(timeout=TAKE_OVER_S)
    except (ValueError, DataControlUnavailable, TimeoutError) as error:
        print(f"sayso: the clipboard can't be kept ({error or 'no answer'})", file=sys.stderr)
        return 1
    selection.replaced.wait()
    clipboard.close()
    return 0


def _write(stream: BinaryIO, contents: Contents) -> None:
    """A line of JSON that lists each type and its length, then the types' bytes one after the other."""
    stream.write(json.dumps([[mime_type, len(data)] for mime_type, data in contents.items()]).encode() + b"\n")
    for data in contents.values():
        stream.write(data)


def _read(stream: BinaryIO) -> Contents:
    """The contents as ``_write`` wrote them; ValueError when they are empty or cut short (the process
    that wrote them ended first): a clipboard kept in part, or cleared, would not be the user's."""
    sizes = dict(json.loads(stream.readline()))
    contents = {mime_type: stream.read(size) for mime_type, size in sizes.items()}
    if not contents or any(len(data) != sizes[mime_type] for mime_type, data in contents.items()):
        raise ValueError("the contents came incomplete")
    return contents
