"""The suite's fixtures (one GPU backend per session, the numpy oracle, the models the tests share) and
its hooks (the ``test_data`` mark: a test that needs a file from ``$SAYSO_TEST_DATA`` says so, see
``support.data``). What the tests share besides fixtures is the ``support`` package.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# wgpu's GL probe complains on stderr without a private runtime dir.
if not os.environ.get("XDG_RUNTIME_DIR"):
    runtime = Path(tempfile.gettempdir()) / f"sayso-runtime-{os.getuid()}"
    runtime.mkdir(mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)

# The WebGPU implementation (SAYSO_WEBGPU) is chosen before any test module imports wgpu, which fixes it.
import sayso.engine.gpu  # noqa: E402, F401
from support.data import TINY_EN_GGUF, needs_clips, require, shipped  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "test_data(*files): files the test reads from $SAYSO_TEST_DATA")


def pytest_collection_modifyitems(items):
    """A test parametrized with a ``clip`` the repository doesn't ship needs it from the test data."""
    for item in items:
        clip = getattr(getattr(item, "callspec", None), "params", {}).get("clip")
        if isinstance(clip, str) and clip.endswith((".wav", ".mp3")) and not shipped(clip):
            item.add_marker(needs_clips(clip))


def pytest_runtest_setup(item):
    for mark in item.iter_markers("test_data"):
        require(*mark.args)


@pytest.fixture(scope="module")
def engine():
    """Whisper tiny.en on the numpy backend, one for each test module that asks (a module may make its own)."""
    from sayso.engine.engine import Engine

    engine = Engine(TINY_EN_GGUF, device="cpu")
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def gpu_ops():
    """The wgpu backend on whatever adapter this machine has (lavapipe in CI, the H200 there)."""
    from sayso.engine.gpu import GpuOps

    ops = GpuOps()
    print(f"\nGPU adapter: {ops.describe()}")
    return ops


@pytest.fixture(scope="session")
def cpu_ops():
    """The numpy backend as plain numpy (no ONNX Runtime kernels): the oracle of the kernel tests."""
    from sayso.engine.cpu.ops import NumpyOps

    return NumpyOps(fast=False)


@pytest.fixture(scope="session")
def portable_ops(gpu_ops):
    """A second wgpu backend on the same device, with the fast tier forced off (``SAYSO_FAST=0``): what
    a fast kernel is compared with."""
    from sayso.engine.gpu import GpuOps
    from sayso.engine.gpu.fast import FAST_ENV

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(FAST_ENV, "0")
        ops = GpuOps(gpu_ops.device)
        ops.fast.probe()
    return ops


@pytest.fixture(scope="session")
def moonshine_ort(tmp_path_factory):
    """Moonshine tiny and base as their PyPI packages ship them (ONNX Runtime files), fetched once."""
    from sayso.engine.convert.moonshine_pypi import fetch_moonshine_ort

    folder = tmp_path_factory.mktemp("moonshine-ort")
    return {name: fetch_moonshine_ort(name, folder / name) for name in ("moonshine-tiny", "moonshine-base")}


@pytest.fixture(scope="session")
def moonshine_q8(moonshine_tiny, moonshine_ort, tmp_path_factory):
    """Moonshine tiny and base as Q8_0 GGUF files (variant -> path), converted once from their PyPI packages'
    files: tiny is ``moonshine_tiny``'s."""
    from sayso.engine.convert import convert

    base = convert(moonshine_ort["moonshine-base"], tmp_path_factory.mktemp("moonshine-q8") / "moonshine-base.gguf", "q8_0")
    return {"moonshine-tiny": moonshine_tiny, "moonshine-base": base}


@pytest.fixture(scope="session")
def moonshine_tiny(moonshine_ort, tmp_path_factory):
    """Moonshine tiny as a Q8_0 GGUF, converted from its PyPI package's files."""
    from sayso.engine.convert import convert

    return convert(moonshine_ort["moonshine-tiny"], tmp_path_factory.mktemp("moonshine") / "moonshine-tiny.gguf", "q8_0")
