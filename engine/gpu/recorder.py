"""Records dispatches into one command encoder and submits them together.

Why a recorder: a decoder step is ~100 small dispatches. Encoding them into one compute pass and
submitting once per read-back keeps the Python and driver cost per dispatch to a few microseconds.

Two caches make a repeated sequence of calls (the next decoder step, the next window) free of new
GPU objects:

* Parameters. Every dispatch's small parameter block (sizes, offsets, alpha) goes to slot ``i`` of
  one uniform arena, where ``i`` is the dispatch's index in its submission; the blocks are written
  with a single ``write_buffer`` at submit time.
* Bind groups, cached per dispatch index: if dispatch ``i`` uses the same pipeline and buffers as
  dispatch ``i`` of an earlier submission, its bind group is reused. Buffers come from a pool that
  hands them out in the same order for the same sequence of calls, so this hits in steady state.

Every submission ends with a one-thread dispatch that writes its serial number into a mark buffer.
A read-back copies the mark along with the data: if the driver dropped or cancelled the submission,
the mark is stale and we raise instead of returning old contents.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import wgpu

from engine.errors import GpuError
from engine.gpu.device import Device
from engine.gpu.kernels import Kernels

SLOT = 256  # minUniformBufferOffsetAlignment on every adapter we target
SLOTS = 4096  # dispatches per submission before the recorder submits on its own


def pack_params(values: Sequence[int | float]) -> bytes:
    """Pack scalars for a WGSL ``struct`` of 4-byte fields: ints as i32/u32, floats as f32."""
    out = bytearray()
    for value in values:
        if isinstance(value, (bool, int, np.integer)):
            out += struct.pack("<i" if value < 0 else "<I", int(value))
        else:
            out += struct.pack("<f", float(value))
    if len(out) > SLOT:
        raise ValueError(f"parameter block of {len(out)} bytes exceeds {SLOT}")
    return bytes(out)


def grid(n_groups: int, max_per_dim: int = 65535) -> tuple[int, int, int]:
    """Spread ``n_groups`` workgroups over x and y so no dimension passes the 65535 limit.

    Kernels recover the linear group index as ``wid.x + wid.y * num_workgroups.x`` and must ignore
    indices past their count (the last row of the grid may be partly empty).
    """
    n_groups = max(1, n_groups)
    if n_groups <= max_per_dim:
        return (n_groups, 1, 1)
    y = -(-n_groups // max_per_dim)
    return (-(-n_groups // y), y, 1)


class Recorder:
    """Encodes dispatches for one device; ``submit`` sends them, ``read`` fetches a buffer's bytes."""

    def __init__(self, device: Device, kernels: Kernels) -> None:
        self.device = device
        self.kernels = kernels
        self.arena = device.buffer(SLOT * SLOTS, wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST, "params")
        self.params = bytearray(SLOT * SLOTS)
        self.mark = device.buffer(16, label="submission-mark")
        self.bind_groups: dict[int, tuple] = {}  # index -> (pipeline, buffer ids, bind group, buffers)
        self.serial = 0
        self.stats = {"dispatches": 0, "bind_groups_created": 0, "submissions": 0}
        self._staging: dict[int, wgpu.GPUBuffer] = {}
        self._begin()

    def _begin(self) -> None:
        self.encoder = self.device.device.create_command_encoder()
        self.compute = self.encoder.begin_compute_pass()
        self.count = 0

    def dispatch(
        self,
        pipeline: wgpu.GPUComputePipeline,
        buffers: Sequence[wgpu.GPUBuffer],
        params: Sequence[int | float],
        groups: tuple[int, int, int],
    ) -> None:
        """Record one dispatch. Binding 0 is the parameter block, bindings 1.. the buffers in order."""
        if self.count == SLOTS - 1:  # keep the last slot for the mark
            self.submit()
        index = self.count
        block = pack_params(params)
        self.params[index * SLOT : index * SLOT + len(block)] = block
        key = tuple(id(b) for b in buffers)
        cached = self.bind_groups.get(index)
        if cached is not None and cached[0] is pipeline and cached[1] == key:
            bind_group = cached[2]
        else:
            entries = [{"binding": 0, "resource": {"buffer": self.arena, "offset": index * SLOT, "size": SLOT}}]
            entries += [{"binding": i + 1, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(buffers)]
            # Keep the buffers alive with the bind group: ids are only unique among live objects.
            try:
                bind_group = self.device.device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries)
            except wgpu.GPUError as error:
                raise self.device.failure(f"binding buffers for {pipeline.label}", error) from None
            self.bind_groups[index] = (pipeline, key, bind_group, tuple(buffers))
            self.stats["bind_groups_created"] += 1
        self.compute.set_pipeline(pipeline)
        self.compute.set_bind_group(0, bind_group)
        self.compute.dispatch_workgroups(*groups)
        self.count += 1
        self.stats["dispatches"] += 1

    def submit(self) -> None:
        """Send what was recorded (if anything), ending with the submission mark."""
        if self.count == 0:
            return
        self.serial += 1
        self.dispatch(self.kernels.pipeline("mark.wgsl"), [self.mark], [self.serial], (1, 1, 1))
        self.compute.end()
        try:
            self.device.queue.write_buffer(self.arena, 0, memoryview(self.params)[: self.count * SLOT])
            self.device.queue.submit([self.encoder.finish()])
        except wgpu.GPUError as error:
            self._begin()
            raise self.device.failure("submitting work", error) from None
        self.stats["submissions"] += 1
        self.device.check()
        self._begin()

    def _staging_buffer(self, nbytes: int) -> wgpu.GPUBuffer:
        size = max(256, 1 << (nbytes - 1).bit_length())
        buf = self._staging.get(size)
        if buf is None:
            buf = self.device.buffer(size, wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST, "staging")
            self._staging[size] = buf
        return buf

    def read(self, buffer: wgpu.GPUBuffer, nbytes: int) -> bytes:
        """Submit pending work and return the first ``nbytes`` of ``buffer``, checking the mark."""
        self.submit()
        padded = (nbytes + 3) // 4 * 4
        staging = self._staging_buffer(padded + 16)
        try:
            encoder = self.device.device.create_command_encoder()
            if padded:
                encoder.copy_buffer_to_buffer(buffer, 0, staging, 0, padded)
            encoder.copy_buffer_to_buffer(self.mark, 0, staging, padded, 16)
            self.device.queue.submit([encoder.finish()])
            staging.map_sync(wgpu.MapMode.READ, 0, padded + 16)
            data = staging.read_mapped(0, padded + 16, copy=True)
            staging.unmap()
        except Exception as error:  # noqa: BLE001 - mapping fails with several types on device loss
            self.device.check()
            raise self.device.failure("reading results back", error) from None
        self.device.check()
        mark = int(np.frombuffer(data, np.uint32, 1, padded)[0])
        if mark != self.serial:
            raise GpuError(
                f"The GPU driver dropped a submission (mark {mark}, expected {self.serial}); the results are stale. "
                "This happens after a driver reset or timeout: retry, or use --device cpu."
            )
        return bytes(data[:nbytes])
