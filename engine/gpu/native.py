"""Everything the GPU layer takes from wgpu-py beyond its public API, in one module.

Three paths are faster through wgpu-native's C functions than through wgpu-py's methods, which wrap
each call in an error capture, and one is not offered by wgpu-py at all:

* a compute pass's ``set_pipeline`` / ``set_bind_group`` / ``dispatch_workgroups`` (``PassCalls``:
  a decoder step records ~70 dispatches, so their Python cost is a step's);
* a read-back that waits for its own submission only (``submit_for_index``, ``PendingRead``);
* shader modules made with fewer of naga's runtime checks (``create_shader_module``);
* the instance created ahead, while wgpu-py's modules import (``engine.gpu.instance``, handed over
  by ``adopt_instance``), on C declarations compiled once (``engine.gpu.wgpu_ffi``, which
  ``load_backend`` uses only here: it leans on how wgpu-py's ``_ffi`` module makes its FFI).

They use wgpu-py's internals: the ``_internal`` handles of its objects, ``ffi`` and ``lib`` of
``wgpu.backends.wgpu_native._api``, ``_helpers._the_instance`` and how its ``_ffi`` module makes its
FFI. ``NATIVE`` says whether the installed wgpu-py is a version they were written for (pyproject.toml
pins one); with any other, every caller takes wgpu-py's public API instead, slower but the same
results, and nothing here reaches into wgpu-py. ``SAYSO_WGPU_PUBLIC=1`` forces that path (tests).

Nothing happens at import: wgpu-py itself is imported by ``load_backend``, which ``engine.gpu``'s
``Device`` and ``GpuOps`` call first. ``choose`` makes the choice of ``engine.gpu.webgpu`` this module's:
on Dawn, the public API throughout.
"""

from __future__ import annotations

import itertools
import os
import threading
from importlib import metadata

from sayso.engine.errors import GpuError
from sayso.engine.files import cache_dir
from sayso.engine.gpu import instance, webgpu

BACKEND = "wgpu.backends.wgpu_native"
NATIVE_VERSIONS = ("0.32.",)
"""wgpu-py versions whose internals this module was written against (each a version prefix)."""
PUBLIC_ENV = "SAYSO_WGPU_PUBLIC"
SHADER_CHECKS_ENV = "SAYSO_SHADER_CHECKS"
BOUNDS_CHECKS = 1  # WGPUShaderRuntimeChecks_BoundsChecks: every storage index clamped or checked
LOOP_BOUNDING = 2  # WGPUShaderRuntimeChecks_ForceLoopBounding: a 64-bit counter that ends every loop
ALL_CHECKS = BOUNDS_CHECKS | LOOP_BOUNDING  # what wgpu-py's create_shader_module asks for
DEFAULT_CHECKS = BOUNDS_CHECKS
"""Bounds checks stay, so an index past a buffer reads zeros rather than another buffer; loop bounding
goes: every loop of our kernels ends by its own bounds, and the counter it adds keeps drivers from
unrolling inner loops (docs/PERFORMANCE.md: loop bounding)."""


def _native() -> bool:
    if os.environ.get(PUBLIC_ENV, "").strip() == "1":
        return False
    try:
        version = metadata.version("wgpu")
    except metadata.PackageNotFoundError:
        return False
    return version.startswith(NATIVE_VERSIONS)


NATIVE = _native()
"""Whether the C paths are used (read once: a process takes one path throughout)."""


def use_public_api() -> None:
    """Take wgpu-py's public API throughout: where ``wgpu`` is another implementation of it (Dawn,
    ``engine.gpu.webgpu``), before the backend is loaded."""
    global NATIVE
    if _loaded and NATIVE:
        raise RuntimeError("wgpu-native's backend is loaded already: choose the API before")
    NATIVE = False


def choose() -> None:
    """Choose the WebGPU implementation (``engine.gpu.webgpu``, once a process); on Dawn take the public
    API, as the C paths are wgpu-native's. Raises ``GpuError`` where the one asked for can't be had."""
    if webgpu.choose().implementation == webgpu.DAWN:
        use_public_api()


_loaded = False
_loading = threading.Lock()  # a second thread waits for the first's import: two at once fail


def load_backend() -> None:
    """Import the chosen implementation's backend, once: on the compiled C declarations kept in the
    cache, with the instance created ahead, where ``NATIVE``; as wgpu-py imports itself otherwise."""
    global _loaded
    choose()
    with _loading:
        if _loaded:
            return
        if NATIVE:
            from sayso.engine.gpu.wgpu_ffi import import_backend

            import_backend(cache_dir() / "wgpu")
        else:  # under Dawn (``engine.gpu.webgpu``) the name is Dawn's backend
            import importlib

            importlib.import_module(BACKEND)
        _loaded = True


def _api():
    from wgpu.backends.wgpu_native import _api

    return _api


def shader_checks() -> int:
    """naga's runtime checks that shader modules are made with: ``SAYSO_SHADER_CHECKS`` (a sum of
    ``BOUNDS_CHECKS`` and ``LOOP_BOUNDING``) where set, otherwise ``DEFAULT_CHECKS``."""
    value = os.environ.get(SHADER_CHECKS_ENV, "").strip()
    if not value:
        return DEFAULT_CHECKS
    try:
        checks = int(value)
    except ValueError:
        checks = -1
    if not 0 <= checks <= ALL_CHECKS:
        raise GpuError(f"{SHADER_CHECKS_ENV}={value!r} is not one of 0 to {ALL_CHECKS}: {BOUNDS_CHECKS} keeps "
                       f"bounds checks (the default), {LOOP_BOUNDING} loop bounding, {ALL_CHECKS} both.")
    return checks


def create_shader_module(device, code: str, label: str, checks: int):
    """A WGSL module made with naga's runtime ``checks`` only: wgpu-native's
    ``wgpuDeviceCreateShaderModuleTrusted``, which wgpu-py does not wrap. With every check (or off the
    native path) it is wgpu-py's ``create_shader_module``. Loop bounding wraps every loop in a 64-bit
    counter, which can keep a driver from unrolling a kernel's inner loops; bounds checks guard each
    storage access. Raises ``GpuError`` if the module is not made."""
    if checks == ALL_CHECKS or not NATIVE:
        return device.create_shader_module(code=code, label=label)
    api = _api()
    source = api.new_struct_p("WGPUShaderSourceWGSL *", code=api.to_c_string_view(code))
    source[0].chain.next = api.ffi.NULL
    source[0].chain.sType = api.lib.WGPUSType_ShaderSourceWGSL
    chain = api.ffi.cast("WGPUChainedStruct *", source)
    descriptor = api.new_struct_p("WGPUShaderModuleDescriptor *", nextInChain=chain, label=api.to_c_string_view(label))
    module = api.lib.wgpuDeviceCreateShaderModuleTrusted(device._internal, descriptor, checks)
    if module == api.ffi.NULL:
        raise GpuError(f"Shader {label} was not made (runtime checks {checks}).")
    return api.GPUShaderModule(label, module, device)


def handle(obj):
    """wgpu-native's handle of a wgpu-py object (a buffer, device, queue, pass, pipeline...)."""
    return obj._internal


class PassCalls:
    """A compute pass's three recording calls, bound to one pass: ``set_pipeline(pipeline)``,
    ``set_bind_group(bind_group)`` (group 0, no dynamic offsets) and ``dispatch(x, y, z)``."""

    def __init__(self, compute_pass) -> None:
        if NATIVE:
            api = _api()
            lib, null, pass_handle = api.lib, api.ffi.NULL, compute_pass._internal
            set_pipeline, set_bind_group = lib.wgpuComputePassEncoderSetPipeline, lib.wgpuComputePassEncoderSetBindGroup
            dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups
            self.set_pipeline = lambda pipeline: set_pipeline(pass_handle, pipeline._internal)
            self.set_bind_group = lambda bind_group: set_bind_group(pass_handle, 0, bind_group._internal, 0, null)
            self.dispatch = lambda x, y, z: dispatch(pass_handle, x, y, z)
        else:
            self.set_pipeline = compute_pass.set_pipeline
            self.set_bind_group = lambda bind_group: compute_pass.set_bind_group(0, bind_group)
            self.dispatch = compute_pass.dispatch_workgroups


def submit_for_index(queue, command_buffer) -> int:
    """Submit one command buffer and return its submission index (0 on the public path, which has
    none: a wait there is for all work submitted)."""
    if not NATIVE:
        queue.submit([command_buffer])
        return 0
    api = _api()
    handles = api.ffi.new("WGPUCommandBuffer[1]", [command_buffer._internal])
    return int(api.lib.wgpuQueueSubmitForIndex(queue._internal, 1, handles))


class PendingRead:
    """The first ``nbytes`` of ``staging`` once submission ``index`` has run; ``result`` waits (once).
    ``for_writing``: map it as a ``MAP_WRITE`` buffer is mapped (it has no ``MAP_READ``; the contents of
    a write mapping are the buffer's as the GPU left them, ``Device.write_mapped_reads``).

    Why not wgpu-py's ``map_async``: it leaves the waiting to a thread that polls the device until it
    is idle, so a read returned only once every submission made before it was looked at. A decoder
    submits its next batch of steps before it looks at the last one's tokens
    (``engine.whisper.decode.sample_greedy``): that read then waited for the batch behind it too, the
    GPU stood idle while Python replayed the next one, and a window's last read waited for a batch run
    in vain. Natively the buffer is mapped with a callback of our own and the wait is
    ``wgpuDevicePoll`` on the one submission's index; wgpu-py's object of the staging buffer never sees
    the mapping, which begins and ends here. The public path is ``map_sync``: a wait for all work.
    """

    def __init__(self, device, staging, nbytes: int, index: int, for_writing: bool = False) -> None:
        self.device, self.staging, self.nbytes, self.for_writing = device, staging, nbytes, for_writing
        if not NATIVE:
            return
        api = _api()
        self.index = api.ffi.new("WGPUSubmissionIndex *", index)
        self.key = next(_keys)
        _waiting.add(self.key)
        info = api.ffi.new("WGPUBufferMapCallbackInfo *", {
            "mode": api.lib.WGPUCallbackMode_AllowProcessEvents,
            "callback": _mapped_callback(),
            "userdata1": api.ffi.cast("void *", self.key),
        })
        mode = api.lib.WGPUMapMode_Write if for_writing else api.lib.WGPUMapMode_Read
        api.lib.wgpuBufferMapAsync(staging._internal, mode, 0, nbytes, info[0])

    def result(self) -> bytes:
        """Wait for the mapping, copy the bytes out and unmap. Raises ``GpuError`` if the mapping failed
        (a lost device)."""
        if not NATIVE:
            import wgpu

            self.staging.map_sync(wgpu.MapMode.READ, 0, self.nbytes)
            try:
                return bytes(self.staging.read_mapped(0, self.nbytes))
            finally:
                self.staging.unmap()
        api = _api()
        lib = api.lib
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
        data = bytes(api.ffi.buffer(pointer, self.nbytes))
        lib.wgpuBufferUnmap(self.staging._internal)
        return data

    def __del__(self) -> None:
        if NATIVE:
            _waiting.discard(self.key)
            _statuses.pop(self.key, None)


POLLS = 100
"""Blocking polls before a mapping that hasn't completed is an error. A blocking poll returns when
the submission is done (or the driver gives up on it after seconds), so one is the normal case."""

_waiting: set[int] = set()  # keys of the mappings someone may still ask for
_statuses: dict[int, int] = {}  # key -> WGPUMapAsyncStatus of those that completed
_keys = itertools.count(1)
_callback = None


def _mapped_callback():
    """The C callback of every native mapping, made at the first (it needs wgpu-py's FFI)."""
    global _callback
    if _callback is None:
        ffi = _api().ffi

        @ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
        def mapped(status, _message, key, _unused) -> None:
            # Runs inside a device poll, on whichever thread polls: set and dict operations are atomic
            # under the GIL. A read dropped unasked (a decoder's batch run in vain) leaves nothing behind.
            key = int(ffi.cast("uintptr_t", key))
            if key in _waiting:
                _statuses[key] = status

        _callback = mapped
    return _callback


def has_instance() -> bool:
    """Whether wgpu-py holds an instance already (the process keeps one)."""
    from wgpu.backends.wgpu_native import _helpers

    return _helpers._the_instance is not None


def adopt_instance() -> None:
    """Make the instance created ahead (``engine.gpu.instance``) wgpu-py's (waiting for it), before the
    first adapter request; without one, have wgpu-py create its own, with the same backends and flags."""
    if webgpu.is_dawn():  # Dawn's instance was made with its toggles when it was chosen
        return
    from wgpu.backends.wgpu_native.extras import set_instance_extras

    if NATIVE:  # where wgpu-py's internals aren't known, it makes its own
        if has_instance():  # an earlier Device's: the process keeps one
            return
        made = instance.made_ahead()
        if made is not None and _take_instance(made):
            return
    set_instance_extras(backends=["Primary"], flags=["Empty"])


def _take_instance(handle) -> bool:
    """Make ``handle`` (a ``WGPUInstance`` made through wgpu-py's FFI) wgpu-py's instance, unless it is
    NULL; whether it was taken."""
    from wgpu.backends.wgpu_native import _helpers

    if handle == _helpers.ffi.NULL:
        return False
    _helpers._the_instance = handle
    return True
