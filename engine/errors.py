"""The engine's exceptions. Each message says what is wrong and what the user can do about it."""

from __future__ import annotations



class SaysoError(Exception):
    """Base of every error the engine raises on purpose; the CLI and app show ``str(error)`` as is."""


class ModelFileError(SaysoError):
    """A model file is missing, truncated, corrupt, or of a kind we don't support."""

    def __init__(self, path, problem: str, hint: str = "Download or convert the model again."):
        self.path = str(path)
        self.problem = problem
        self.hint = hint
        super().__init__(f"{self.path}: {problem}. {hint}".strip())


class NonFiniteOutput(SaysoError):
    """A model computed numbers that aren't finite (NaN or infinity) from finite audio: its weights are
    damaged. Raised by a family's decoder; the engine names the model file (``ModelFileError``)."""

    def __init__(self, what: str):
        super().__init__(f"The model's {what} are not finite numbers.")
        self.what = what


def require_finite(array, what: str):
    """``array`` (numpy) when every number in it is finite; else NonFiniteOutput naming ``what``."""
    import numpy as np  # here, so that what imports the errors (``sayso --toggle`` among them) needn't load numpy

    if not np.isfinite(array).all():
        raise NonFiniteOutput(what)
    return array


class AudioError(SaysoError):
    """An audio file can't be read or decoded."""

    def __init__(self, path, problem: str, hint: str = "Check that it is an audio or video file and not damaged."):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}. {hint}".strip())


class GpuError(SaysoError):
    """The GPU failed: no adapter, a validation error, device loss, out of memory, a cancelled submission."""


class DeviceOpenError(GpuError):
    """The GPU's adapter is there but its device would not open (``engine.gpu.Device`` opens it on a
    thread of its own, so this comes from the first use that waits for it)."""


class Interrupted(Exception):
    """A pass was abandoned because its result no longer mattered (a stream session's newer audio made
    it stale); raised by ``check_interrupt``. Not an error: nothing is shown to the user."""


def check_interrupt(interrupt) -> None:
    """Raise ``Interrupted`` if ``interrupt`` (a ``threading.Event`` or None) is set."""
    if interrupt is not None and interrupt.is_set():
        raise Interrupted()
