"""The one object that owns the wgpu adapter and device.

Everything GPU-side goes through a ``Device``: buffers, pipelines, submissions. It also turns wgpu's
asynchronous failures into Python exceptions: validation errors that wgpu only logs, device loss,
and submissions the driver dropped (see ``DispatchRecorder`` for the mark that detects those).
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future

import wgpu

from sayso.engine.background import in_background
from sayso.engine.errors import DeviceOpenError, GpuError
from sayso.engine.gpu import native, webgpu

log = logging.getLogger(__name__)

ADAPTER_ENV = "SAYSO_ADAPTER"
"""Overrides the adapter choice: a substring of the adapter's name (``llvmpipe``, ``NVIDIA``) or its
index in ``wgpu.gpu.enumerate_adapters_sync()``."""

WANTED_FEATURES = ("shader-f16", "subgroup", "subgroup-matrix", "immediates", "timestamp-query", "pipeline-cache",
                   "mappable-primary-buffers")
"""Optional features we ask for where the adapter offers them, by our names (``engine.gpu.webgpu``
gives each implementation's): the fast kernel tier's, and wgpu-native's ``mappable-primary-buffers``,
which lets a ``MAP_WRITE`` buffer be copied into, so that small reads need no ``MAP_READ`` buffer
(``engine.gpu.recorder.SMALL_READ`` says why)."""


class _ErrorTrap(logging.Handler):
    """Catches errors that wgpu-py logs instead of raising (uncaptured errors, device loss).

    wgpu-native reports them through a callback that can't raise into the call that caused them, so
    wgpu-py logs them on the ``wgpu`` logger. We keep the first one and raise it at the next call.
    """

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)  # creates ``self.lock``, the handler's own RLock
        self.message: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        # ``Handler.handle`` already holds ``self.lock`` here. It must stay that re-entrant lock: with
        # a plain Lock of our own under the same name, handle() and emit() both took it and the
        # first error wgpu logged (a lost device) deadlocked the thread that triggered it.
        if self.message is None:
            self.message = record.getMessage()

    def take(self) -> str | None:
        with self.lock:
            message, self.message = self.message, None
            return message


def pick_adapter() -> wgpu.GPUAdapter:
    """The adapter Sayso uses: the high-performance one, or the one ``SAYSO_ADAPTER`` names. The
    instance made ahead (``engine.gpu.instance``) becomes wgpu-py's first: there is one a process."""
    native.load_backend()
    native.adopt_instance()
    wanted = os.environ.get(ADAPTER_ENV, "").strip()
    try:
        if not wanted:
            return wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        adapters = wgpu.gpu.enumerate_adapters_sync()
    except RuntimeError as error:  # wgpu raises a plain RuntimeError when there is no adapter
        reason = " ".join(str(error).split())  # on one line: wgpu's message spans several
        raise GpuError(
            f"No GPU adapter found ({reason}). Install a Vulkan driver (mesa-vulkan-drivers on Debian/Ubuntu) "
            "or run with --device cpu."
        ) from None
    if wanted.isdigit() and int(wanted) < len(adapters):
        return adapters[int(wanted)]
    for adapter in adapters:
        if wanted.lower() in adapter.info["device"].lower():
            return adapter
    names = ", ".join(f"{i}: {a.info['device']}" for i, a in enumerate(adapters)) or "none"
    raise GpuError(f"{ADAPTER_ENV}={wanted!r} matches no adapter (available: {names}). Unset it or pick one of those.")


def is_software(info: dict) -> bool:
    """Whether an adapter's ``info`` names a software one (lavapipe, llvmpipe, WARP): correct, but
    slower than numpy."""
    return info["adapter_type"].lower() == "cpu" or "llvmpipe" in info["device"].lower()


def tells_of_loss(message: str | Exception) -> bool:
    """Whether a wgpu error (or a GpuError made from one) says the device was lost: neither implementation
    gives the loss a type of its own, so its text is all there is."""
    return "lost" in str(message).lower()


class Device:
    """Owns the wgpu adapter and device, and says what they are in one line (``describe``).

    The adapter is picked while this is made, so what it is (``info``, ``features``, ``limits``,
    ``is_cpu``) is known at once; the device opens on a thread of its own (the driver's work, a good
    part of a load), and ``device`` and ``queue`` wait for it. A model's loader runs its Python in
    that time (``engine.gpu.tensors.ModelUpload``) rather than wait for it.
    """

    def __init__(self) -> None:
        self.adapter = pick_adapter()
        self.info = self.adapter.info
        self.webgpu = webgpu.choose()
        self.features = sorted(f for f in WANTED_FEATURES if webgpu.feature_name(f) in self.adapter.features)
        limits = self.adapter.limits
        # Ask for the adapter's own maxima: the defaults (128 MiB bindings, 16 KiB shared memory)
        # are below what large weight matrices and tiled kernels need on real GPUs. What is asked
        # for is what the device has once open: the only limits read, so they are known before.
        self.limits = {
            name: limits[name]
            for name in (
                "max-storage-buffer-binding-size",
                "max-buffer-size",
                "max-compute-workgroup-storage-size",
                "max-compute-invocations-per-workgroup",
                "max-compute-workgroup-size-x",
                "max-compute-workgroup-size-y",
                "max-storage-buffers-per-shader-stage",
                "max-compute-workgroups-per-dimension",
                "max-immediate-size",
            )
            if name in limits
        }
        self.trap = _ErrorTrap()
        logging.getLogger("wgpu").addHandler(self.trap)
        self._opened: wgpu.GPUDevice | None = None
        self._opening: Future[wgpu.GPUDevice] = in_background(self._open, "gpu-device")

    def _open(self) -> wgpu.GPUDevice:
        try:
            return webgpu.request_device(self.adapter, [webgpu.feature_name(f) for f in self.features], self.limits)
        except Exception as error:  # noqa: BLE001 - wgpu raises several unrelated types here
            reason = " ".join(str(error).split())  # on one line: wgpu's message spans several
            raise DeviceOpenError(f"Could not open the GPU device {self.info['device']!r} ({reason}). "
                                  "Update its driver or run with --device cpu.") from None

    @property
    def device(self) -> wgpu.GPUDevice:
        """The wgpu device, once open (raises ``DeviceOpenError`` if it could not be)."""
        if self._opened is None:
            self._opened = self._opening.result()
        return self._opened

    @property
    def queue(self) -> wgpu.GPUQueue:
        return self.device.queue

    def opened(self) -> Device:
        """This device, once open (raises ``DeviceOpenError`` if it could not be)."""
        self.device  # noqa: B018 - waits for it
        return self

    @property
    def is_cpu(self) -> bool:
        """True for software adapters (lavapipe, llvmpipe, WARP): correct, but slower than numpy."""
        return is_software(self.info)

    @property
    def write_mapped_reads(self) -> bool:
        """Whether a read-back may copy into a ``MAP_WRITE`` buffer and map that (``SMALL_READ``)."""
        return native.NATIVE and "mappable-primary-buffers" in self.features

    @property
    def max_binding(self) -> int:
        return self.limits["max-storage-buffer-binding-size"]

    def describe(self) -> str:
        """One line: WebGPU implementation and backend, adapter name, adapter type, features, and why
        this implementation (e.g. for logs and ``sayso doctor``)."""
        features = ",".join(self.features) or "none"
        return (f"{self.webgpu.implementation} {self.info['backend_type']} | {self.info['device']} | "
                f"{self.info['adapter_type']} | features: {features} | chosen: {self.webgpu.why}")

    def check(self) -> None:
        """Raise the first error wgpu reported since the last check (validation error, device lost)."""
        message = self.trap.take()
        if message is None:
            return
        # wgpu-py logs every device's loss on one logger without naming the device, so a loss may be
        # another Device's (one closed, or lost, in another engine). Ours is lost only if it can no
        # longer create a buffer: wgpu-core refuses that at once with "Parent device is lost".
        if tells_of_loss(message) and self._still_alive():
            return
        raise self.failure("running recorded work", RuntimeError(message))

    def _still_alive(self) -> bool:
        try:
            self.device.create_buffer(size=16, usage=wgpu.BufferUsage.COPY_DST, label="alive-probe").destroy()
        except Exception:  # noqa: BLE001 - wgpu raises GPUValidationError or RuntimeError here
            return False
        return True

    def failure(self, what: str, error: Exception, otherwise: str | None = None) -> GpuError:
        """A GpuError for a failed wgpu call, saying plainly when the cause is a lost device; else
        ``otherwise`` where the caller knows what the failure means, or the error as wgpu gave it.
        The failed call's frames are dropped from ``error``, which the GpuError keeps as its context:
        wgpudawn's hold the call's data (a memoryview and a cffi buffer exporting it) in a cycle with
        the error, and the garbage collector, tearing the memoryview down first, crashed the process."""
        error.__traceback__ = None
        text = str(error).strip()
        if tells_of_loss(text):
            return GpuError(
                f"The GPU device {self.info['device']!r} was lost while {what} (driver reset, crash or "
                "unplugged GPU). Restart the transcription; if it happens again use --device cpu."
            )
        return GpuError(otherwise or f"GPU error on {self.info['device']!r} while {what}: {text}")

    def buffer(self, nbytes: int, usage: int | None = None, label: str = "", mapped: bool = False) -> wgpu.GPUBuffer:
        """A storage buffer of at least ``nbytes`` (rounded up to 16 so empty tensors still bind);
        ``mapped``: mapped at creation, zeros, to be written and unmapped before any use."""
        if usage is None:
            usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        size = max(16, (nbytes + 15) // 16 * 16)
        if size > self.limits["max-buffer-size"]:
            raise GpuError(
                f"A {size / 2**20:.0f} MiB buffer ({label or 'tensor'}) exceeds the adapter's limit of "
                f"{self.limits['max-buffer-size'] / 2**20:.0f} MiB. Use a smaller model or --device cpu."
            )
        device = self.device  # waits for it to open: a DeviceOpenError is not an allocation's
        try:
            return device.create_buffer(size=size, usage=usage, label=label, mapped_at_creation=mapped)
        except Exception as error:  # noqa: BLE001
            raise self.failure("allocating memory", error, f"Could not allocate {size / 2**20:.1f} MiB on the GPU "
                               f"({error}). Close other GPU apps or use --device cpu.") from None

    def close(self) -> None:
        logging.getLogger("wgpu").removeHandler(self.trap)
        try:
            device = self.device
        except DeviceOpenError:
            return  # nothing was opened
        device.destroy()
