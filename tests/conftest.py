"""Fixtures and helpers shared by the whole suite: the shared data folder and its reference words, one GPU
backend per session, Qt signal waits, transcribe.cpp's tokens and dumped tensors."""

from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path

import numpy as np
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


def software_gpu() -> bool:
    """Whether the GPU tests run on a software adapter (lavapipe in CI): tests that transcribe many clips
    take a few short ones there and the whole set on a real GPU. Asked at collection, before any device
    is opened."""
    from engine.gpu.device import is_software, pick_adapter

    return is_software(pick_adapter().info)


@pytest.fixture(scope="session")
def gpu_ops():
    """The wgpu backend on whatever adapter this machine has (lavapipe in CI, the H200 there)."""
    from engine.gpu import GpuOps

    ops = GpuOps()
    print(f"\nGPU adapter: {ops.describe()}")
    return ops


@pytest.fixture(scope="session")
def cpu_ops():
    """The numpy backend as plain numpy (no ONNX Runtime kernels): the oracle of the kernel tests."""
    from engine.cpu.ops import NumpyOps

    return NumpyOps(fast=False)


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


def words(text: str) -> str:
    """The words of ``text``, normalised as word error rates count them (``engine.wer``), in one string:
    transcripts compared word for word, whatever their punctuation and case."""
    from engine.wer import normalize

    return " ".join(normalize(text))


def wait_for(signal, condition=lambda *args: True, timeout_ms: int = 300_000) -> tuple:
    """Run the Qt event loop until ``signal`` fires with arguments that satisfy ``condition``; returns
    those arguments, or fails the test after ``timeout_ms``."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop, got = QEventLoop(), []

    def fired(*args):
        if condition(*args) and not got:
            got.append(args)
            loop.quit()

    signal.connect(fired)
    QTimer.singleShot(timeout_ms, loop.quit)
    loop.exec()
    signal.disconnect(fired)
    assert got, f"no signal within {timeout_ms} ms"
    return got[0]


def reference_words(file: str) -> str:
    """``words`` of ``file``'s reference transcript in ``AUDIO/transcripts.tsv``."""
    with open(AUDIO / "transcripts.tsv", encoding="utf-8") as table:
        return next(words(row["reference"]) for row in csv.DictReader(table, delimiter="\t") if row["file"] == file)


JFK_WORDS = reference_words("jfk.wav")  # what every model here hears in jfk.wav


def reference_tokens(path, pcm) -> tuple[list[tuple[int, int]], str]:
    """transcribe.cpp's token ids with their start times (ms), and its text, for a model file and audio."""
    import transcribe_cpp

    result = transcribe_cpp.Model(str(path)).session().run(pcm)
    return [(t.id, t.t0_ms) for t in result.tokens], result.text


ROOT = Path(__file__).resolve().parents[1]


def cli_env(data_dir, **env: str) -> dict[str, str]:
    """The environment a ``sayso`` command runs in under test: its own data folder, no desktop session."""
    environment = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    environment.update(SAYSO_DATA_DIR=str(data_dir), QT_QPA_PLATFORM="offscreen", **env)
    return environment


def reference_dumps(model_path, pcm, folder) -> tuple[dict[str, np.ndarray], list[tuple[int, int]]]:
    """transcribe.cpp's dumped tensors (name -> array) and its tokens (id, start ms) for ``pcm``."""
    from engine.accuracy import transcribe_cpp_run

    dumps, tokens, _ = transcribe_cpp_run(model_path, pcm, folder)
    return dumps, tokens
