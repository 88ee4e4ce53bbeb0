"""Fixtures shared by the whole suite: the shared data folder and one GPU backend per session."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# The checkout's sibling ../shared; SAYSO_SHARED points elsewhere (the GPU machine gets a copy).
SHARED = Path(os.environ.get("SAYSO_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
AUDIO = SHARED / "audio"
REFERENCE_GGUF = SHARED / "models" / "whisper-tiny.en.transcribe-cpp.gguf"

# wgpu's GL probe complains on stderr without a private runtime dir.
if not os.environ.get("XDG_RUNTIME_DIR"):
    runtime = Path(tempfile.gettempdir()) / f"sayso-runtime-{os.getuid()}"
    runtime.mkdir(mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)


@pytest.fixture(scope="session")
def gpu_ops():
    """The wgpu backend on whatever adapter this machine has (lavapipe in CI, the H200 there)."""
    from engine.gpu import GpuOps

    ops = GpuOps()
    print(f"\nGPU adapter: {ops.describe()}")
    return ops


@pytest.fixture(scope="session")
def cpu_ops():
    """The numpy backend: the oracle of the kernel tests."""
    from engine.cpu.ops import NumpyOps

    return NumpyOps()


@pytest.fixture(scope="session")
def moonshine_ort(tmp_path_factory):
    """Moonshine tiny and base as their PyPI packages ship them (ONNX Runtime files), fetched once."""
    from engine.convert.moonshine_pypi import fetch_moonshine_ort

    folder = tmp_path_factory.mktemp("moonshine-ort")
    return {name: fetch_moonshine_ort(name, folder / name) for name in ("moonshine-tiny", "moonshine-base")}


@pytest.fixture(scope="session")
def moonshine_tiny(moonshine_ort, tmp_path_factory):
    """Moonshine tiny as a Q8_0 GGUF, converted from its PyPI package's files."""
    from engine.convert import convert

    return convert(moonshine_ort["moonshine-tiny"], tmp_path_factory.mktemp("moonshine") / "moonshine-tiny.gguf", "q8_0")


def reference_tokens(path, pcm) -> tuple[list[tuple[int, int]], str]:
    """transcribe.cpp's token ids with their start times (ms), and its text, for a model file and audio."""
    import transcribe_cpp

    result = transcribe_cpp.Model(str(path)).session().run(pcm)
    return [(t.id, t.t0_ms) for t in result.tokens], result.text
