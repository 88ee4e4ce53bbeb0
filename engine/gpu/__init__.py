"""The wgpu backend: ``Device`` owns the GPU, ``Kernels`` compiles WGSL, ``DispatchRecorder`` records
dispatches, ``GpuOps`` offers the model-facing operations.

Importing this package does nothing. ``load_backend`` imports wgpu's native backend, on the C
declarations compiled into the cache (``engine.gpu.wgpu_ffi``: 0.2-0.4 s off every start after the
first) while wgpu-native creates its instance on another thread (``engine.gpu.instance``), before any
module that imports wgpu; naming ``engine.gpu.Device`` or ``engine.gpu.GpuOps`` calls it first. An
engine loads the backend and opens the device first and imports ``GpuOps`` and its kernels' modules
while the driver starts it (``engine.backend``).
"""


def load_backend() -> None:
    """Import wgpu-py's native backend, once (``engine.gpu.native.load_backend``)."""
    from sayso.engine.files import cache_dir
    from sayso.engine.gpu import native

    native.load_backend(cache_dir() / "wgpu")


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
