"""What every GPU kernel method shares: tensors in and out, weights, read-back, dispatch."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.gpu.device import Device
from engine.gpu.kernels import Kernels
from engine.gpu.recorder import Recorder
from engine.gpu.tensors import BufferPool, GpuTensor, GpuWeight, upload_weight
from engine.ops import Ops, WeightSource


class GpuOpsBase(Ops):
    """Owns the device's kernel registry, recorder and buffer pool; kernel mixins build on it."""

    name = "gpu"

    def __init__(self, device: Device | None = None) -> None:
        self.device = device or Device()
        self.kernels = Kernels(self.device)
        self.recorder = Recorder(self.device, self.kernels)
        self.pool = BufferPool(self.device)

    def describe(self) -> str:
        return self.device.describe()

    # ---- tensors --------------------------------------------------------------------------------

    def empty(self, shape: Sequence[int], dtype=np.float32) -> GpuTensor:
        """A pooled tensor with undefined contents, for a kernel to write."""
        return GpuTensor(self.pool, tuple(shape), dtype)

    def tensor(self, array: np.ndarray) -> GpuTensor:
        array = np.ascontiguousarray(array, dtype=np.float32)
        out = self.empty(array.shape)
        if array.size:
            self.device.queue.write_buffer(out.buffer, 0, array)
        return out

    def ids(self, ids: np.ndarray) -> GpuTensor:
        ids = np.ascontiguousarray(ids, dtype=np.uint32).reshape(-1)
        out = self.empty(ids.shape, np.uint32)
        if ids.size:
            self.device.queue.write_buffer(out.buffer, 0, ids)
        return out

    def weight(self, source: WeightSource) -> GpuWeight:
        return upload_weight(self.device, source)

    def read(self, x: GpuTensor) -> np.ndarray:
        data = self.recorder.read(x.buffer, x.nbytes)
        return np.frombuffer(data, dtype=x.dtype).reshape(x.shape).copy()

    def flush(self) -> None:
        self.recorder.submit()

    # ---- dispatch -------------------------------------------------------------------------------

    def run(
        self,
        file: str,
        buffers: Sequence,
        params: Sequence[int | float],
        groups: tuple[int, int, int],
        entry: str = "main",
        **constants: float,
    ) -> None:
        """Record ``entry`` of ``shaders/<file>`` over ``buffers`` (tensors, weights' buffers or raw
        wgpu buffers, bound at 1.. in order) with ``params`` in the uniform at binding 0."""
        raw = [b.buffer if isinstance(b, GpuTensor) else b for b in buffers]
        self.recorder.dispatch(self.kernels.pipeline(file, entry, **constants), raw, params, groups)
