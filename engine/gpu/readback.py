"""Reading a buffer back as soon as the copy of it has run, not once all work sent since has.

wgpu-py's ``map_async`` leaves the waiting to a thread that polls the device until it is idle, so a
read returned only after every submission made before it was looked at. A decoder submits its next
batch of steps before it looks at the last one's tokens (``engine.whisper.decode.sample_greedy``):
that read then waited for the batch behind it too, the GPU stood idle while Python replayed the
next one, and a window's last read waited for a batch run in vain. Here the copy is sent with
wgpu-native's ``wgpuQueueSubmitForIndex``, the buffer is mapped with a callback of our own, and the
wait is ``wgpuDevicePoll`` on that one submission's index. The C calls are those wgpu-py makes
(wgpu is pinned in pyproject.toml); the staging buffer's wgpu-py object never sees the mapping,
which begins and ends here.

A staging buffer is mapped for reading (``MAP_READ``) or, for small reads, for writing (see
``Recorder.read_later``): the contents of a write mapping are the buffer's contents as the GPU left
them, and such a buffer lives in memory that doesn't count as the process's own.
"""

from __future__ import annotations

import itertools

import wgpu
from wgpu.backends.wgpu_native._api import ffi, lib

from sayso.engine.errors import GpuError

POLLS = 100
"""Blocking polls before a mapping that hasn't completed is an error. A blocking poll returns when
the submission is done (or the driver gives up on it after seconds), so one is the normal case."""

_waiting: set[int] = set()  # keys of the mappings someone may still ask for
_statuses: dict[int, int] = {}  # key -> WGPUMapAsyncStatus of those that completed
_keys = itertools.count(1)


@ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
def _mapped(status, _message, key, _unused) -> None:
    # Runs inside a device poll, on whichever thread polls: set and dict operations are atomic under
    # the GIL. A read dropped unasked (a decoder's batch run in vain) leaves nothing behind.
    key = int(ffi.cast("uintptr_t", key))
    if key in _waiting:
        _statuses[key] = status


class PendingRead:
    """The first ``nbytes`` of ``staging`` once the submission ``index`` has run; ``result`` waits.
    ``for_writing``: map it as a ``MAP_WRITE`` buffer is mapped (it has no ``MAP_READ``)."""

    def __init__(self, device: wgpu.GPUDevice, staging: wgpu.GPUBuffer, nbytes: int, index: int,
                 for_writing: bool = False) -> None:
        self.device, self.staging, self.nbytes, self.for_writing = device, staging, nbytes, for_writing
        self.index = ffi.new("WGPUSubmissionIndex *", index)
        self.key = next(_keys)
        _waiting.add(self.key)
        info = ffi.new("WGPUBufferMapCallbackInfo *", {
            "mode": lib.WGPUCallbackMode_AllowProcessEvents,
            "callback": _mapped,
            "userdata1": ffi.cast("void *", self.key),
        })
        mode = lib.WGPUMapMode_Write if for_writing else lib.WGPUMapMode_Read
        lib.wgpuBufferMapAsync(staging._internal, mode, 0, nbytes, info[0])

    def result(self) -> bytes:
        """Wait for the mapping, copy the bytes out and unmap (once). Raises ``GpuError`` if the
        mapping failed (a lost device)."""
        for _ in range(POLLS):
            if self.key in _statuses:
                break
            lib.wgpuDevicePoll(self.device._internal, True, self.index)
        _waiting.discard(self.key)
        status = _statuses.pop(self.key, None)
        if status != lib.WGPUMapAsyncStatus_Success:
            raise GpuError(f"mapping a buffer for reading failed (status {status})")
        mapped_range = lib.wgpuBufferGetMappedRange if self.for_writing else lib.wgpuBufferGetConstMappedRange
        pointer = mapped_range(self.staging._internal, 0, self.nbytes)
        data = bytes(ffi.buffer(pointer, self.nbytes))
        lib.wgpuBufferUnmap(self.staging._internal)
        return data

    def __del__(self) -> None:
        _waiting.discard(self.key)
        _statuses.pop(self.key, None)


def submit_for_index(queue: wgpu.GPUQueue, command_buffer: wgpu.GPUCommandBuffer) -> int:
    """Submit one command buffer, as ``queue.submit`` does, and return its submission index."""
    handles = ffi.new("WGPUCommandBuffer[1]", [command_buffer._internal])
    return int(lib.wgpuQueueSubmitForIndex(queue._internal, 1, handles))
