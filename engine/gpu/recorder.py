"""Records dispatches into one command encoder and submits them together.

Why a recorder: a decoder step is ~100 small dispatches. Encoding them into one compute pass and
submitting once per read-back keeps the Python and driver cost per dispatch to a few microseconds.

Two caches make a repeated sequence of calls (the next decoder step, the next window) free of new
GPU objects:

* Parameters. Every dispatch's small parameter block (sizes, offsets, alpha) goes to slot ``i`` of
  one uniform arena, where ``i`` is the dispatch's index in its submission; the blocks are written
  with a single ``write_buffer`` at submit time.
* Bind groups, cached by (dispatch index, pipeline, buffers): if dispatch ``i`` uses the same
  pipeline and buffers as dispatch ``i`` of any earlier submission, its bind group is reused.
  Buffers come from a pool that hands them out in the same order for the same sequence of calls,
  so this hits in steady state, also when several kinds of submission (encoder, prefill, batches
  of decoder steps) take turns at the same indices. A bind group holds its buffers' GPU memory,
  so when a buffer is garbage collected its bind groups are dropped from the cache.

Recording is on the hot path (a decoder step is ~70 dispatches), so ``dispatch`` packs parameters
with the entry point's declared ``struct.Struct`` (``engine.gpu.entry_points``), skips
``set_pipeline`` when the pipeline is the one already set, and calls wgpu-native's C functions for the pass directly
(``engine.gpu.native.PassCalls``): wgpu-py's methods wrap each call in an error capture (and allocate an
offsets array for ``set_bind_group``), most of the Python cost of a dispatch. An error in those calls
still reaches the device's error trap and is raised by ``Device.check`` when the submission is sent.

Every submission ends with a one-thread dispatch that writes its serial number into a mark buffer.
A read-back copies the mark along with the data: if the driver dropped or cancelled the submission,
the mark is stale and we raise instead of returning old contents.

A third cache takes the Python out of a decoder's steps: ``Replay`` (``Ops.repeatable``) records a batch
of steps while noting each dispatch's pipeline, bind group and workgroups; once two batches in a
row were the same dispatches with the same parameters (positions on the GPU make them so), later
batches are those C calls again, without the model's Python (~0.1 of the cost per dispatch).

``time_kernels`` installs an ``engine.gpu.profile.DispatchTimer``: until ``stop_timing``, each dispatch
gets a timestamped pass of its own (profiling only; a normal run keeps one pass per submission).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial

import numpy as np
import wgpu

from sayso.engine.errors import GpuError
from sayso.engine.gpu.device import Device
from sayso.engine.gpu.entry_points import MARK, EntryPoint
from sayso.engine.gpu.kernels import Kernels
from sayso.engine.gpu.profile import CAPACITY, DispatchTimer
from sayso.engine.gpu.native import PassCalls, PendingRead, submit_for_index

SLOT = 256  # minUniformBufferOffsetAlignment on every adapter we target
SLOTS = 4096  # dispatches per submission before the recorder submits on its own
BIND_GROUPS = 4 * SLOTS  # cached bind groups; the oldest is dropped beyond this
SMALL_READ = 4096
"""Reads of at most this many bytes (the mark included) go through a write-mapped staging buffer
where the device allows one (``Device.write_mapped_reads``), larger ones through ``MAP_READ``.

Why: wgpu-native gives every ``MAP_READ`` buffer memory from a large block of pinned host memory that it
keeps for the process's life (wgpu's ``MemoryHints::Performance``, which its C API can't change): the first
read-back adds the whole block to the resident size. A ``MAP_WRITE`` buffer gets memory the host sees and the GPU
writes fast, on a discrete GPU its own memory through the PCIe BAR, which is not the process's. Reading it
back is slow per byte (docs/PERFORMANCE.md: small read-backs), so it serves the reads a decoder makes, a
selection of tokens or one number."""


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


@dataclass(eq=False)
class Recording:
    """The dispatches recorded from dispatch index ``start`` of a submission on: each one's pipeline,
    bind group and workgroups, and (once ended) their parameter blocks. ``whole`` turns False if the
    submission was sent in between: what was recorded then can't be played back as one run."""

    start: int
    dispatches: list[tuple[wgpu.GPUComputePipeline, wgpu.GPUBindGroup, tuple[int, int, int]]] = field(
        default_factory=list)
    params: bytes = b""
    whole: bool = True

    def same_as(self, other: Recording | None) -> bool:
        return (other is not None and self.whole and other.whole and self.start == other.start
                and self.params == other.params and self.dispatches == other.dispatches)


class DispatchRecorder:
    """Encodes dispatches for one device; ``submit`` sends them, ``read`` fetches a buffer's bytes."""

    def __init__(self, device: Device, kernels: Kernels) -> None:
        self.device = device
        self.kernels = kernels
        self.arena = device.buffer(SLOT * SLOTS, wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST, "params")
        self.params = bytearray(SLOT * SLOTS)
        self.mark = device.buffer(16, label="submission-mark")
        # (index, id(pipeline), *ids of buffers) -> bind group. An id is only unique while its object
        # lives: a buffer's entries go when it is collected (``_forget``), before its id can return.
        self.bind_groups: dict[tuple[int, ...], wgpu.GPUBindGroup] = {}
        self._watched: dict[int, tuple[weakref.ref, list[tuple[int, ...]]]] = {}  # buffer id -> (ref, keys)
        self.serial = 0
        self.stats = {"dispatches": 0, "bind_groups_created": 0, "submissions": 0, "replayed": 0}
        self._staging: dict[tuple[int, bool], list[wgpu.GPUBuffer]] = {}  # (size, for writing) -> free ones
        self.timer: DispatchTimer | None = None
        self.limit = SLOTS  # dispatches per submission
        self.recording: Recording | None = None  # where ``dispatch`` notes what it records, if anywhere
        self._begin()

    def time_kernels(self) -> DispatchTimer:
        """Time every dispatch recorded from now on, per kernel (see ``engine.gpu.profile``)."""
        self.submit()
        self.timer, self.limit = DispatchTimer(self.device), CAPACITY
        return self.timer

    def stop_timing(self) -> None:
        self.submit()
        self.timer, self.limit = None, SLOTS

    def _begin(self) -> None:
        self.encoder = self.device.device.create_command_encoder()
        self.compute = self.encoder.begin_compute_pass()
        self.calls = PassCalls(self.compute)
        self.pipeline: wgpu.GPUComputePipeline | None = None  # the one set in this pass
        self.count = 0

    @cached_property
    def mark_pipeline(self) -> wgpu.GPUComputePipeline:
        """The submission mark's kernel, asked for at the first dispatch rather than at start: a start
        builds the last start's pipelines on worker threads (``Kernels``), and waiting for this one
        held up the load by its place in their queue."""
        return self.kernels.pipeline(MARK.file, MARK.entry)

    def dispatch(
        self,
        pipeline: wgpu.GPUComputePipeline,
        entry_point: EntryPoint,
        buffers: Sequence[wgpu.GPUBuffer],
        params: Sequence[int | float],
        groups: tuple[int, int, int],
    ) -> None:
        """Record one dispatch of ``pipeline``, built from ``entry_point``: binding 0 is the parameter
        block, packed as the entry point declares it, bindings 1.. the buffers in order."""
        if self.count == self.limit - 1 and pipeline is not self.mark_pipeline:  # the last slot is the mark's
            self.submit()
        if self.timer is not None:
            self._timed_pass(pipeline.label)
        index = self.count
        entry_point.pack_into(self.params, index * SLOT, params)
        key = (index, id(pipeline), *map(id, buffers))  # pipelines live as long as the Kernels
        bind_group = self.bind_groups.get(key)
        if bind_group is None:
            bind_group = self._bind_group(index, pipeline, buffers)
            self._remember(key, bind_group, buffers)
        if pipeline is not self.pipeline:
            self.calls.set_pipeline(pipeline)
            self.pipeline = pipeline
        self.calls.set_bind_group(bind_group)
        self.calls.dispatch(*groups)
        self.count += 1
        self.stats["dispatches"] += 1
        if self.recording is not None:
            self.recording.dispatches.append((pipeline, bind_group, groups))

    def record(self, calls: Callable[[], None]) -> Recording:
        """Run ``calls``, which record dispatches, and return what they recorded."""
        recording = self.recording = Recording(self.count)
        try:
            calls()
        finally:
            self.recording = None
        recording.whole = recording.whole and self.timer is None
        if recording.whole:
            recording.params = bytes(self.params[recording.start * SLOT : self.count * SLOT])
        return recording

    def replay(self, recording: Recording) -> bool:
        """Record ``recording``'s dispatches again, as they were (False, recording nothing, unless the
        submission under way is at the dispatch index where they started, which their bind groups'
        parameter slots need, and they fit in it)."""
        start, end = recording.start, recording.start + len(recording.dispatches)
        if self.count != start or end >= self.limit or self.timer is not None:
            return False
        self.params[start * SLOT : end * SLOT] = recording.params
        set_pipeline, set_bind_group, dispatch = self.calls.set_pipeline, self.calls.set_bind_group, self.calls.dispatch
        current = self.pipeline
        for pipeline, bind_group, (x, y, z) in recording.dispatches:
            if pipeline is not current:
                set_pipeline(pipeline)
                current = pipeline
            set_bind_group(bind_group)
            dispatch(x, y, z)
        self.pipeline = current
        self.count = end
        self.stats["dispatches"] += end - start
        self.stats["replayed"] += end - start
        return True

    def _timed_pass(self, label: str) -> None:
        """End the pass under way and begin a timestamped one for the next dispatch."""
        self.compute.end()
        self.compute = self.timer.begin_pass(self.encoder, label)
        self.calls = PassCalls(self.compute)
        self.pipeline = None  # a new pass has no pipeline set

    def _bind_group(
        self, index: int, pipeline: wgpu.GPUComputePipeline, buffers: Sequence[wgpu.GPUBuffer]
    ) -> wgpu.GPUBindGroup:
        entries = [{"binding": 0, "resource": {"buffer": self.arena, "offset": index * SLOT, "size": SLOT}}]
        entries += [
            {"binding": i + 1, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(buffers)
        ]
        try:
            return self.device.device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries)
        except wgpu.GPUError as error:
            raise self.device.failure(f"binding buffers for {pipeline.label}", error) from None

    def _remember(self, key: tuple[int, ...], bind_group: wgpu.GPUBindGroup, buffers: Sequence[wgpu.GPUBuffer]) -> None:
        if len(self.bind_groups) >= BIND_GROUPS:
            del self.bind_groups[next(iter(self.bind_groups))]  # the oldest
        self.bind_groups[key] = bind_group
        for buffer in buffers:
            watch = self._watched.get(id(buffer))
            if watch is None:
                watch = (weakref.ref(buffer, partial(self._forget, id(buffer))), [])
                self._watched[id(buffer)] = watch
            watch[1].append(key)
        self.stats["bind_groups_created"] += 1

    def _forget(self, buffer_id: int, _ref: weakref.ref) -> None:
        """A watched buffer was collected: drop the bind groups that hold on to its memory."""
        for key in self._watched.pop(buffer_id)[1]:
            self.bind_groups.pop(key, None)

    def submit(self) -> None:
        """Send what was recorded (if anything), ending with the submission mark."""
        if self.count == 0:
            return
        if self.recording is not None:
            self.recording.whole = False
        self.serial += 1
        self.dispatch(self.mark_pipeline, MARK, [self.mark], [self.serial], (1, 1, 1))
        self.compute.end()
        if self.timer is not None:
            self.timer.resolve(self.encoder)
        try:
            self.device.queue.write_buffer(self.arena, 0, memoryview(self.params)[: self.count * SLOT])
            self.device.queue.submit([self.encoder.finish()])
        except wgpu.GPUError as error:
            self._begin()
            raise self.device.failure("submitting work", error) from None
        self.stats["submissions"] += 1
        self.device.check()
        if self.timer is not None:
            self.timer.collect()
        self._begin()

    def _staging_buffer(self, nbytes: int) -> tuple[wgpu.GPUBuffer, bool]:
        """A mappable buffer of at least ``nbytes`` that no read in flight holds (``_give_back`` it),
        and whether it is to be mapped for writing (see ``SMALL_READ``)."""
        size = max(256, 1 << (nbytes - 1).bit_length())
        for_writing = nbytes <= SMALL_READ and self.device.write_mapped_reads
        free = self._staging.setdefault((size, for_writing), [])
        if free:
            return free.pop(), for_writing
        usage = wgpu.BufferUsage.MAP_WRITE if for_writing else wgpu.BufferUsage.MAP_READ
        return self.device.buffer(size, usage | wgpu.BufferUsage.COPY_DST, "staging"), for_writing

    def _give_back(self, staging: wgpu.GPUBuffer, for_writing: bool) -> None:
        self._staging[(staging.size, for_writing)].append(staging)

    def read(self, buffer: wgpu.GPUBuffer, nbytes: int, start: int = 0) -> bytes:
        """Submit pending work and return ``nbytes`` of ``buffer`` from byte ``start``, checking the mark."""
        return self.read_later(buffer, nbytes, start)()

    def read_later(self, buffer: wgpu.GPUBuffer, nbytes: int, start: int = 0) -> Callable[[], bytes]:
        """Submit pending work and a copy of ``nbytes`` of ``buffer`` from byte ``start`` (a multiple
        of 4) as they will be once it has run; return a function that waits for the copy and gives
        its bytes, checking the mark.

        The host can record (and submit) more work before calling it, which the GPU runs meanwhile:
        a decoder records its next batch of steps while the last one runs. The copy is taken in
        queue order, so the buffer may be overwritten by work recorded after this call.
        """
        self.submit()
        serial = self.serial
        padded = (nbytes + 3) // 4 * 4
        staging, for_writing = self._staging_buffer(padded + 16)
        try:
            encoder = self.device.device.create_command_encoder()
            if padded:
                encoder.copy_buffer_to_buffer(buffer, start, staging, 0, padded)
            encoder.copy_buffer_to_buffer(self.mark, 0, staging, padded, 16)
            index = submit_for_index(self.device.queue, encoder.finish())
            pending = PendingRead(self.device.device, staging, padded + 16, index, for_writing)
        except Exception as error:  # noqa: BLE001 - these fail with several types on device loss
            self.device.check()
            raise self.device.failure("reading results back", error) from None

        def result() -> bytes:
            try:
                data = pending.result()
            except Exception as error:  # noqa: BLE001 - mapping fails with several types on device loss
                self.device.check()
                raise self.device.failure("reading results back", error) from None
            self._give_back(staging, for_writing)
            self.device.check()
            mark = int(np.frombuffer(data, np.uint32, 1, padded)[0])
            if mark != serial:
                raise GpuError(
                    f"The GPU driver dropped a submission (mark {mark}, expected {serial}); the results are stale. "
                    "This happens after a driver reset or timeout: retry, or use --device cpu."
                )
            return data[:nbytes]

        return result


class Replay:
    """``Ops.repeatable`` on the GPU: calls ``record`` (which records dispatches) until two calls in a
    row recorded the same ones, then replays the last instead of calling it. Sameness is checked,
    not assumed: dispatch for dispatch the same pipeline, bind group (so the same buffers) and
    workgroups, and the same parameter bytes."""

    def __init__(self, recorder: DispatchRecorder, record: Callable[[], None]) -> None:
        self.recorder = recorder
        self.record = record
        self.last: Recording | None = None
        self.repeats = False  # whether the last two calls recorded the same dispatches

    def __call__(self) -> None:
        if self.repeats and self.recorder.replay(self.last):
            return
        recording = self.recorder.record(self.record)
        self.repeats = recording.same_as(self.last)
        self.last = recording
