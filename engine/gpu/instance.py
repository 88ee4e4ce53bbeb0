"""wgpu-native's instance, created on a thread of its own while wgpu-py's Python modules import.

Creating the instance starts the GPU's driver: the Vulkan instance is the longest step of a model's
load after the device itself. wgpu-py creates it at the first adapter request, after its imports,
which the engine's load then waited for. Here it
starts as soon as the library is loaded with the compiled C declarations (``engine.gpu.wgpu_ffi``),
in C, without the GIL, while the imports go on; ``engine.gpu.native.adopt_instance`` hands it to
wgpu-py before anything asks wgpu-py for one, only where it knows the installed wgpu-py
(tests/engine/gpu/test_core.py checks that wgpu-py uses the one made here).

The instance looks at wgpu's "primary" backends only (Vulkan, Metal, DX12), not OpenGL: our kernels
need what those offer, and probing OpenGL/EGL lengthened every start.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from concurrent.futures import Future
from pathlib import Path

from sayso.engine.background import in_background

log = logging.getLogger(__name__)

PRIMARY_BACKENDS = 1 | 4 | 8 | 32
"""``WGPUInstanceBackend_Primary`` of wgpu.h (Vulkan, Metal, DX12, browser WebGPU). It and the flag
below are ``static const`` there, which cffi's compiled declarations don't carry."""
NO_FLAGS = 0
"""``WGPUInstanceFlag_Empty``, not wgpu-py's ``Default``: a release build's default is
``ValidationIndirectCall``, for which every device builds compute pipelines that check indirect
dispatches and draws as it is created, and our kernels make none."""

_started: Future | None = None
_lib = None  # the library as ``start`` loaded it: kept, as dropping it would unload it (dlclose)


def wgpu_resources() -> Path:
    """wgpu-py's folder of the native library and its headers, found without importing wgpu-py."""
    spec = importlib.util.find_spec("wgpu")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("wgpu is not installed")
    return Path(spec.submodule_search_locations[0]) / "resources"


def _library() -> Path | None:
    """The wgpu-native library that wgpu-py will load, where that is its own release build (the
    default); None where an environment variable picks another, for wgpu-py to create its own."""
    if os.environ.get("WGPU_LIB_PATH", "").strip() or os.environ.get("WGPU_DEBUG", "").strip() == "1":
        return None
    name = {"win32": "wgpu_native-release.dll", "darwin": "libwgpu_native-release.dylib"}.get(
        sys.platform, "libwgpu_native-release.so")
    path = wgpu_resources() / name
    return path if path.exists() else None


def start(ffi) -> None:
    """Begin creating the instance on a thread, through ``ffi`` (the FFI that wgpu-py will use, so
    that the handle is of its type). A failure is ``made_ahead``'s to handle: wgpu-py creates one instead."""
    global _started
    library = _library()
    if _started is not None or library is None:
        return

    def create():
        global _lib
        lib = _lib = ffi.dlopen(str(library))
        extras = ffi.new("WGPUInstanceExtras *")
        extras.chain.sType = lib.WGPUSType_InstanceExtras
        extras.backends = PRIMARY_BACKENDS
        extras.flags = NO_FLAGS
        descriptor = ffi.new("WGPUInstanceDescriptor *")
        descriptor.nextInChain = ffi.cast("WGPUChainedStruct *", extras)
        return lib.wgpuCreateInstance(descriptor)

    _started = in_background(create, "wgpu-instance")


def made_ahead():
    """The instance ``start`` created (waiting for it), or None where none was started or creating it
    failed (a warning: wgpu-py creates one instead)."""
    if _started is None:
        return None
    try:
        return _started.result()
    except Exception as error:  # noqa: BLE001
        log.warning("Creating the GPU instance ahead failed (%s); wgpu creates it.", error)
        return None
