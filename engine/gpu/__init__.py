"""The wgpu backend: ``Device`` owns the GPU, ``Kernels`` compiles WGSL, ``DispatchRecorder`` records
dispatches, ``GpuOps`` offers the model-facing operations.

Importing this package chooses the WebGPU implementation that ``import wgpu`` gives from then on
(``engine.gpu.webgpu``: Dawn or wgpu-native), so it comes before any module that imports wgpu; it
imports wgpu itself only in ``load_backend`` (``engine.gpu.native``'s): on wgpu-native, on the C
declarations compiled into the cache (``engine.gpu.wgpu_ffi``; docs/PERFORMANCE.md: wgpu's C
declarations compiled once) while wgpu-native creates its instance on another thread
(``engine.gpu.instance``). Naming ``engine.gpu.Device`` or ``engine.gpu.GpuOps`` calls it first. An
engine loads the backend and opens the device first and imports ``GpuOps`` and its kernels' modules
while the driver starts it (``engine.backend``).
"""

from sayso.engine.errors import GpuError
from sayso.engine.gpu import native
from sayso.engine.gpu.native import load_backend

try:
    native.choose()
except GpuError:
    pass  # raised again where the device is opened (``load_backend``), whose callers say it


def __getattr__(name: str):
    if name == "Device":
        load_backend()
        from sayso.engine.gpu.device import Device

        return Device
    if name == "GpuOps":
        load_backend()
        from sayso.engine.gpu.ops import GpuOps

        return GpuOps
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Device", "GpuOps"]
