"""Sayso's engine: models, backends and audio, with no Qt.

This package is the engine's face: what the app may use is importable from ``sayso.engine`` itself
(``__all__``), and the app imports nothing else of it (tests/test_import_rules.py). Each name is
imported from its module on first use (PEP 562), so ``import sayso.engine`` loads no numpy, no wgpu
and no model code: a command that never transcribes never pays for them. ``models`` (the model store)
and ``tools`` (the developer tools the command line runs) are the face's two modules.

ONNX Runtime (the Moonshine converter reads the ORT files of Moonshine's packages with it) ships
Microsoft's telemetry client on Linux too: on import it writes a device id under ~/.cache/Microsoft
and a session file in the temp folder, and soon after it looks up mobile.events.data.microsoft.com
to send events. What people dictate stays on their computer, and so does the fact that they use
Sayso: its own switch turns it off, set here because this package is imported before anything that
imports onnxruntime. For the same reason a missing runtime folder is replaced here, before wgpu loads
(``_private_runtime_dir``).
"""

import getpass
import importlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

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


def lazy_face(package: str, face: dict[str, tuple[str, ...]], modules: tuple[str, ...] = ()) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package`` that imports each name of ``face`` (module ->
    names) from its module, and each of ``modules`` under its last name, when it is asked for. Nothing
    is kept: a name patched in its module is the one the face gives."""
    where = {name: module for module, names in face.items() for name in names}
    whole = {module.rpartition(".")[2]: module for module in modules}

    def __getattr__(name: str) -> Any:
        if name in whole:
            return importlib.import_module(whole[name])
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(where[name]), name)

    return __getattr__


_FACE = {
    "sayso.engine.engine": ("Engine",),
    "sayso.engine.stream": ("FEED_SECONDS", "StreamSession"),
    "sayso.engine.transcript": ("Transcript",),
    "sayso.engine.backend": ("Fallback",),
    "sayso.engine.vad": ("PAUSE_SECONDS",),
    "sayso.engine.errors": ("AudioError", "DeviceOpenError", "GpuError", "Interrupted", "ModelFileError",
                            "NonFiniteOutput", "SaysoError"),
    "sayso.engine.audio": ("MEDIA_SUFFIXES", "SAMPLE_RATE", "duration", "load_audio", "save_wav"),
    "sayso.engine.formats": ("render",),
    "sayso.engine.files": ("SPECIAL_FILES", "check_output", "checksum", "write_text_atomically"),
    "sayso.engine.catalogue": ("CATALOG", "CPU_SIZE", "DEFAULT_MODEL", "FAMILY_NAMES", "PYPI_SOURCES"),
    "sayso.engine.models": ("data_dir",),
    "sayso.engine.gpu.device": ("ADAPTER_ENV", "Device"),
    "sayso.engine.gpu": ("GpuOps",),
}
"""Module -> the names the face takes from it; the imports under ``TYPE_CHECKING`` below say the same
for analysers (a test holds the two to each other)."""

_MODULES = ("sayso.engine.models", "sayso.engine.tools")
"""The face's modules: the model store, and the developer tools."""

__all__ = [*(module.rpartition(".")[2] for module in _MODULES), *(name for names in _FACE.values() for name in names)]
__getattr__ = lazy_face(__name__, _FACE, _MODULES)

if TYPE_CHECKING:
    from sayso.engine.engine import Engine
    from sayso.engine.stream import FEED_SECONDS, StreamSession
    from sayso.engine.transcript import Transcript
    from sayso.engine.backend import Fallback
    from sayso.engine.vad import PAUSE_SECONDS
    from sayso.engine.errors import (AudioError, DeviceOpenError, GpuError, Interrupted, ModelFileError,
                                     NonFiniteOutput, SaysoError)
    from sayso.engine.audio import MEDIA_SUFFIXES, SAMPLE_RATE, duration, load_audio, save_wav
    from sayso.engine.formats import render
    from sayso.engine.files import SPECIAL_FILES, check_output, checksum, write_text_atomically
    from sayso.engine.catalogue import CATALOG, CPU_SIZE, DEFAULT_MODEL, FAMILY_NAMES, PYPI_SOURCES
    from sayso.engine.models import data_dir
    from sayso.engine.gpu.device import ADAPTER_ENV, Device
    from sayso.engine.gpu import GpuOps
