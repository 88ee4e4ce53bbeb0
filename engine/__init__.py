"""Sayso's engine: models, backends and audio, with no Qt.

ONNX Runtime (the Moonshine converter reads the ORT files of Moonshine's packages with it) ships
Microsoft's telemetry client on Linux too: on import it writes a device id under ~/.cache/Microsoft
and a session file in the temp folder, and soon after it looks up mobile.events.data.microsoft.com
to send events. What people dictate stays on their computer, and so does the fact that they use
Sayso: its own switch turns it off, set here because this package is imported before anything that
imports onnxruntime. For the same reason a missing runtime folder is replaced here, before wgpu loads
(``_private_runtime_dir``).
"""

import getpass
import os
import stat
import sys
import tempfile

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


def _private_runtime_dir() -> None:
    """Where the session has no runtime folder (a console, a service, ssh), point ``XDG_RUNTIME_DIR`` at a
    private one of the user's, the folder Qt falls back to, before anything loads wgpu: its OpenGL probe
    (EGL, through libwayland) prints "error: XDG_RUNTIME_DIR is invalid" twice otherwise, on every
    command."""
    if sys.platform != "linux" or os.path.isdir(os.environ.get("XDG_RUNTIME_DIR") or "relative"):
        return
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this user id
        user = str(os.getuid())
    folder = os.path.join(tempfile.gettempdir(), f"runtime-{user}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return
    status = os.lstat(folder)
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid() or status.st_mode & 0o077:
        folder = tempfile.mkdtemp(prefix="sayso-runtime-")  # another's, or open to others: one of its own
    os.environ["XDG_RUNTIME_DIR"] = folder


_private_runtime_dir()
