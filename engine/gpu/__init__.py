"""The wgpu backend: ``Device`` owns the GPU, ``Kernels`` compiles WGSL, ``Recorder`` records
dispatches, ``GpuOps`` offers the model-facing operations.

wgpu's native backend is imported here, before any module of this package, on the C declarations
compiled into the cache (``engine.gpu.wgpu_ffi``: 0.2-0.4 s off every start after the first),
while wgpu-native creates its instance on another thread (``engine.gpu.instance``). ``GpuOps`` and
its kernels' modules are imported when first named (``engine.gpu.GpuOps``): an engine opens the
device first and imports them while the driver starts it (``engine.backend``).
"""

from sayso.engine.files import cache_dir
from sayso.engine.gpu.wgpu_ffi import import_backend

import_backend(cache_dir() / "wgpu")

from sayso.engine.gpu.device import Device  # noqa: E402 - after the backend's import above


def __getattr__(name: str):
    if name == "GpuOps":
        from sayso.engine.gpu.ops import GpuOps

        return GpuOps
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Device", "GpuOps"]
