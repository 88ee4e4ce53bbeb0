"""The wgpu backend: ``Device`` owns the GPU, ``Kernels`` compiles WGSL, ``Recorder`` records
dispatches, ``GpuOps`` offers the model-facing operations."""

from engine.gpu.device import Device
from engine.gpu.ops import GpuOps

__all__ = ["Device", "GpuOps"]
