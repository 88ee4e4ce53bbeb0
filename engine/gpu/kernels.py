"""The kernel registry: compiles the WGSL files in ``shaders/`` into compute pipelines, once each.

A pipeline is named by (shader file, entry point, override constants). Override constants are how
one WGSL source serves several variants (workgroup size, weight type, epilogue) without string
templating, so naga validates the same text that the tests exercise.
"""

from __future__ import annotations

import os
from pathlib import Path

import wgpu

from engine.errors import GpuError
from engine.gpu.device import Device

SHADERS_ENV = "SAYSO_SHADERS"


def shaders_dir() -> Path:
    """Where the WGSL lives: ``$SAYSO_SHADERS``, else ``shaders/`` at the repository (or bundle) root."""
    if os.environ.get(SHADERS_ENV):
        return Path(os.environ[SHADERS_ENV])
    return Path(__file__).resolve().parents[2] / "shaders"


class Kernels:
    """Compiled shader modules and pipelines of one device, cached by name."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.modules: dict[str, wgpu.GPUShaderModule] = {}
        self.pipelines: dict[tuple, wgpu.GPUComputePipeline] = {}

    def module(self, file: str) -> wgpu.GPUShaderModule:
        if file not in self.modules:
            path = shaders_dir() / file
            try:
                source = path.read_text()
            except OSError as error:
                raise GpuError(f"Shader {path} is missing ({error.strerror}). Reinstall Sayso.") from None
            try:
                self.modules[file] = self.device.device.create_shader_module(code=source, label=file)
            except wgpu.GPUError as error:
                raise GpuError(f"Shader {file} does not compile on {self.device.info['device']}: {error}") from None
        return self.modules[file]

    def pipeline(self, file: str, entry: str = "main", **constants: float) -> wgpu.GPUComputePipeline:
        """The pipeline for ``entry`` in ``shaders/<file>`` with the given override constants."""
        key = (file, entry, tuple(sorted(constants.items())))
        pipeline = self.pipelines.get(key)
        if pipeline is None:
            compute = {"module": self.module(file), "entry_point": entry}
            if constants:
                compute["constants"] = {name: float(value) for name, value in constants.items()}
            try:
                label = f"{file}:{entry}" + "".join(f" {name}={value:g}" for name, value in sorted(constants.items()))
                pipeline = self.device.device.create_compute_pipeline(layout="auto", compute=compute, label=label)
            except wgpu.GPUError as error:
                raise GpuError(f"Kernel {file}:{entry} {constants} fails to build: {error}") from None
            self.pipelines[key] = pipeline
        return pipeline
