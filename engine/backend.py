"""Picks the compute backend: the GPU through wgpu, or numpy on the CPU, and holds the one rule for
leaving the GPU (``Fallback``).

``auto`` takes the GPU when there is a real one. A software adapter (lavapipe, llvmpipe) is correct but
runs a GEMM far slower than numpy on the same cores (docs/PERFORMANCE.md: software adapters), so
``auto`` prefers numpy there and says so in the log; ``--device gpu`` still forces it (that is how the
kernel tests run in CI).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from sayso.engine.errors import GpuError, SaysoError
from sayso.engine.ops import Backend

log = logging.getLogger(__name__)

DeviceChoice = Literal["auto", "gpu", "cpu"]


def import_gpu_backend(device: DeviceChoice, part: Literal["device", "ops"]) -> None:
    """Import part of the GPU backend now, unless ``device`` is the CPU: ``"device"`` (wgpu and
    ``Device``), or ``"ops"`` (the kernels' modules). ``Engine`` imports the first on its own thread
    before ``make_ops`` opens the device on another, and the second while the driver starts the device:
    imports are Python work that shares the GIL with the model file's header, so each is done where nothing
    else waits for the GIL, which lets the device start sooner and take less after (docs/PERFORMANCE.md:
    load steps). A failed import is left for ``make_ops``, which meets it again and handles it."""
    if device == "cpu":
        return
    try:
        if part == "device":  # wgpu itself first, on this thread: two threads importing it at once fail
            from sayso.engine.gpu import load_backend

            load_backend()
            importlib.import_module("sayso.engine.gpu.device")
        else:
            importlib.import_module("sayso.engine.gpu.ops")
    except Exception:  # noqa: BLE001 - make_ops's own import raises it again, where it is handled
        pass


def make_ops(device: DeviceChoice = "auto", model: Path | None = None) -> Backend:
    """Open the backend for ``device``, to run ``model`` (a GPU builds ahead the kernels that file used
    at its last start); ``auto`` falls back to numpy with a log line saying why. A GPU
    backend's device may still be opening (``engine.gpu.Device``): a device that won't open raises
    ``DeviceOpenError`` where it is first used, loading the model (``Engine`` falls back there)."""
    if device not in ("auto", "gpu", "cpu"):
        raise SaysoError(f"Unknown device {device!r}: use auto, gpu or cpu.")
    if device == "cpu":
        return numpy_fallback("--device cpu was asked for")
    from sayso.engine.files import cache_dir
    from sayso.engine.gpu import Device

    try:
        gpu = Device()
        from sayso.engine.gpu import GpuOps  # imported meanwhile by the caller, if it could (Engine does)

        ops = GpuOps(gpu, kernels_dir=cache_dir() / "kernels", model=model)
    except GpuError as error:
        if device == "gpu":
            raise
        return numpy_fallback(f"no usable GPU ({error})")
    if device == "auto" and ops.device.is_cpu:
        name = ops.device.info["device"]
        ops.device.close()
        return numpy_fallback(f"the only adapter, {name}, is a software renderer, slower than numpy")
    log.info("Using the GPU: %s", ops.describe())
    return ops


class Fallback:
    """The rule for a GPU that fails (no adapter, a device that won't open, a lost device, out of
    memory: ``GpuError``) while an engine loads or works: the engine moves to the CPU backend, loads its
    model there and runs the same work again, where the device is ``auto`` or someone listens for the
    move (``on_fallback``, told why: the app reports it); with ``gpu`` and no listener (``--device
    gpu``: the GPU or nothing) the error is raised. The engines that share one ``Fallback`` (the
    app's, for one loaded model) open on the CPU once one of them has moved: ``device`` says which to open."""

    def __init__(self, device: DeviceChoice, on_fallback: Callable[[str], None] | None = None) -> None:
        self.allowed = device == "auto" or (device == "gpu" and on_fallback is not None)
        self.on_fallback = on_fallback
        self.failure: str | None = None  # why the GPU was left, once it was
        self._device = device

    @property
    def device(self) -> DeviceChoice:
        return "cpu" if self.failure is not None else self._device

    def cpu_ops(self, error: GpuError) -> Backend:
        """The numpy backend after ``error``, or ``error`` raised where the rule keeps the GPU."""
        if not self.allowed:
            raise error
        self.failure = str(error)
        message = f"{error} Sayso now transcribes on the CPU until it restarts."
        if self.on_fallback is not None:
            self.on_fallback(message)
        return numpy_fallback(f"the GPU failed ({error})")


def numpy_fallback(reason: str) -> Backend:
    """The numpy backend, with a log line that says why the GPU isn't used."""
    from sayso.engine.cpu.ops import NumpyOps

    log.warning("Using the CPU backend (numpy): %s.", reason)
    return NumpyOps()
