"""The GPU the tests run on: its WebGPU implementation and whether its adapter is a software one."""

from __future__ import annotations

import pytest

from sayso.engine.gpu import webgpu

wgpu_native_only = pytest.mark.skipif(webgpu.is_dawn(), reason="wgpu-native's own paths, which a session on Dawn "
                                      "doesn't load: CI's wgpu-native run takes them")


def software_gpu() -> bool:
    """Whether the GPU tests run on a software adapter (lavapipe in CI): tests that transcribe many clips
    take a few short ones there and the whole set on a real GPU. Asked at collection, before any device
    is opened."""
    from sayso.engine.gpu.device import is_software, pick_adapter

    return is_software(pick_adapter().info)
