"""The kernel registry: compiles the WGSL files in ``shaders/`` into compute pipelines, once each.

A pipeline is named by (shader module, entry point, override constants); a module is a file of
``shaders/`` or several joined (``module_source``). Override constants are how
one WGSL source serves several variants (workgroup size, weight type, epilogue) without string
templating, so naga validates the same text that the tests exercise. Its layout is its entry point's
declaration (``engine.gpu.entry_points``): the parameters at binding 0, then every storage buffer the
declaration names, read-only or not as the WGSL declares it, whether or not the entry point reads it, so
that the recorder binds a dispatch's buffers by the declaration alone.

A start builds in the background what the last starts used: the registry lists every pipeline it
builds in a file (``known``, one per adapter, version of the shaders and model file), and the next
registry on that adapter for that model builds the listed ones on worker threads as soon as it is
made, while the model's weights upload. wgpu-native compiles without holding the GIL, so they build
in parallel, and the first transcription finds them ready or nearly (it waits for one still building).
The GPU driver keeps its own cache of compiled shaders on disk (NVIDIA's, Mesa's), which makes each
build cheaper again from the second start on; wgpu-py 0.32 offers no pipeline cache of its own.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import logging
import os
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import wgpu

from sayso.engine.errors import GpuError
from sayso.engine.files import checksum, write_text_atomically
from sayso.engine.gpu import native, webgpu
from sayso.engine.gpu.device import Device
from sayso.engine.gpu.entry_points import BY_NAME

STORAGE = re.compile(r"@binding\(\d+\)\s*var<storage,\s*(read|read_write)>\s*(\w+)")
"""A storage buffer's declaration in WGSL: its access mode and its name."""

BUILD_THREADS = 8

log = logging.getLogger(__name__)


def shaders_dir() -> Path:
    """Where the WGSL lives: the package ``sayso.shaders`` (the repository's ``shaders/``), as installed."""
    return Path(importlib.resources.files("sayso.shaders"))


def module_source(module: str) -> str:
    """The WGSL of ``module``: a file of ``shaders/``, or several joined by ``+`` (``reduce_subgroup.wgsl+
    norm.wgsl``: kernels after the helpers they call, which another module takes from another file)."""
    return "\n".join((shaders_dir() / file).read_text() for file in module.split("+"))


@functools.cache
def writable_storage(module: str) -> dict[str, bool]:
    """Each storage buffer of ``module`` by name -> whether its WGSL declares it ``read_write``; read once
    per module, for all of its entry points' layouts."""
    source = re.sub(r"//[^\n]*", "", module_source(module))
    return {name: access == "read_write" for access, name in STORAGE.findall(source)}


def known_pipelines_file(device: Device, folder: Path, model: Path | None = None) -> Path:
    """``folder/<implementation>-<adapter>-<hash of the shaders>[-<hash of the model file's name and
    size>].json``: a list that only this WebGPU implementation on this adapter and this version of the
    WGSL read, so a listed pipeline always still exists and compiles (Dawn's subgroup-matrix kernels
    are not wgpu-native's to build). With ``model``, one list per model file: a start builds ahead what that model used,
    not the union of what every model run on the adapter used, whose pipelines each hold host memory
    and are built on the threads the weights' upload needs too."""
    shaders = b"".join(path.name.encode() + b"\0" + path.read_bytes() for path in sorted(shaders_dir().glob("*.wgsl")))
    adapter = re.sub(r"[^A-Za-z0-9]+", "-", f"{device.webgpu.implementation} {device.info['device']}").strip("-").lower()
    name = f"{adapter}-{checksum(shaders)}"
    if model is not None:
        try:
            size = model.stat().st_size
        except OSError:  # the load that follows says what is wrong with the file
            size = 0
        name += f"-{checksum(f'{model.name}:{size}'.encode())}"
    return folder / f"{name}.json"


class Kernels:
    """Compiled shader modules and pipelines of one device, cached by name; with ``known`` (see
    ``known_pipelines_file``) the pipelines built are listed there and built ahead at the next start."""

    def __init__(self, device: Device, known: Path | None = None) -> None:
        self.device = device
        self.known = known
        self.checks = native.shader_checks()
        self.modules: dict[str, wgpu.GPUShaderModule] = {}
        self.pipelines: dict[tuple, wgpu.GPUComputePipeline] = {}
        self.building: dict[tuple, Future] = {}  # pipelines that worker threads are building
        self.by_call: dict[tuple, wgpu.GPUComputePipeline] = {}  # (file, entry, *constants as passed) ->
        self.layouts: dict[tuple[str, str], wgpu.GPUPipelineLayout] = {}  # (file, entry) ->
        self.lock = threading.Lock()  # the dicts above, between the caller and the workers
        if known is not None:
            self._build_ahead(self._read_known())

    def module(self, file: str) -> wgpu.GPUShaderModule:
        with self.lock:
            if file not in self.modules:
                self.modules[file] = self._compile_module(file)
            return self.modules[file]

    def _compile_module(self, file: str) -> wgpu.GPUShaderModule:
        try:
            source = module_source(file)
        except OSError as error:
            raise GpuError(f"Shader {error.filename} is missing ({error.strerror}). Reinstall Sayso.") from None
        try:
            return native.create_shader_module(self.device.device, webgpu.wgsl_source(source), file, self.checks)
        except wgpu.GPUError as error:
            raise GpuError(f"Shader {file} does not compile on {self.device.info['device']}: {error}") from None

    def pipeline(self, file: str, entry: str = "main", **constants: float) -> wgpu.GPUComputePipeline:
        """The pipeline for ``entry`` in ``shaders/<file>`` with the given override constants."""
        # Every dispatch asks: look it up as called (a caller names its constants in one order)
        # before making the canonical, sorted key.
        call = (file, entry, *constants.items())
        pipeline = self.by_call.get(call)
        if pipeline is None:
            pipeline = self.by_call[call] = self._pipeline((file, entry, tuple(sorted(constants.items()))))
        return pipeline

    def _pipeline(self, key: tuple) -> wgpu.GPUComputePipeline:
        pipeline = self.pipelines.get(key)
        if pipeline is not None:
            return pipeline
        with self.lock:
            building = self.building.get(key)
        if building is not None:
            return building.result()
        pipeline = self._build(key)
        self._list_known()
        return pipeline

    def _build(self, key: tuple) -> wgpu.GPUComputePipeline:
        file, entry, constants = key
        compute = {"module": self.module(file), "entry_point": entry}
        if constants:
            compute["constants"] = {name: float(value) for name, value in constants}
        label = f"{file}:{entry}" + "".join(f" {name}={value:g}" for name, value in constants)
        try:
            layout = self._layout(file, entry)
            pipeline = self.device.device.create_compute_pipeline(layout=layout, compute=compute, label=label)
        except wgpu.GPUError as error:  # a lost device is said as for any call
            raise self.device.failure(f"building kernel {label}", error,
                                      f"Kernel {file}:{entry} {dict(constants)} fails to build: {error}") from None
        with self.lock:
            self.pipelines[key] = pipeline
            self.building.pop(key, None)
        return pipeline

    def _layout(self, file: str, entry: str) -> wgpu.GPUPipelineLayout:
        """The pipeline layout of ``entry`` in module ``file`` as ``engine.gpu.entry_points`` declares it."""
        with self.lock:
            layout = self.layouts.get((file, entry))
        if layout is not None:
            return layout
        declared = BY_NAME.get((file, entry))
        if declared is None:
            raise ValueError(f"{file}:{entry} is not declared in engine.gpu.entry_points")
        writable = writable_storage(file)
        compute = wgpu.ShaderStage.COMPUTE
        entries = [{"binding": 0, "visibility": compute, "buffer": {"type": wgpu.BufferBindingType.uniform}}]
        entries += [{"binding": number, "visibility": compute,
                     "buffer": {"type": wgpu.BufferBindingType.storage if writable[name]
                                else wgpu.BufferBindingType.read_only_storage}}
                    for number, name in enumerate(declared.bindings, start=1)]
        device = self.device.device
        layout = device.create_pipeline_layout(bind_group_layouts=[device.create_bind_group_layout(entries=entries)])
        with self.lock:
            return self.layouts.setdefault((file, entry), layout)

    def _build_ahead(self, keys: list[tuple]) -> None:
        """Start building ``keys`` on worker threads; ``pipeline`` waits for one that isn't done."""
        if not keys:
            return
        workers = ThreadPoolExecutor(max_workers=min(BUILD_THREADS, os.cpu_count() or 1), thread_name_prefix="kernels")
        with self.lock:
            for key in keys:
                if key not in self.pipelines and key not in self.building:
                    self.building[key] = workers.submit(self._build, key)
        workers.shutdown(wait=False)  # the threads end when the queue is empty

    def _read_known(self) -> list[tuple]:
        try:
            listed = json.loads(self.known.read_text())
            keys = [(file, entry, tuple((name, value) for name, value in constants)) for file, entry, constants in listed]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, TypeError) as error:  # unreadable or not our format: built as needed
            log.warning("Ignoring the list of kernels in %s (%s).", self.known, error)
            return []
        features = set(self.device.features)  # a list from elsewhere never builds what this device can't
        return [key for key in keys if key[:2] in BY_NAME and set(BY_NAME[key[:2]].needs) <= features]

    def _list_known(self) -> None:
        """Write every pipeline built or building to ``known`` (atomically: another start may read it)."""
        if self.known is None:
            return
        with self.lock:
            keys = sorted(self.pipelines.keys() | self.building.keys(), key=repr)
        try:
            listed = [[file, entry, [list(c) for c in constants]] for file, entry, constants in keys]
            write_text_atomically(self.known, json.dumps(listed))
        except OSError as error:  # a read-only cache: every start builds as it goes
            log.warning("Could not list the kernels built in %s (%s).", self.known, error)
