"""The model manager against a real HTTP server on 127.0.0.1 that answers like the Hugging Face hub.

The server (``e2e.fake_hub``) serves the bytes the way the hub and its CDN do; huggingface_hub 2.4 is the
client, unmodified.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from huggingface_hub import constants, hf_hub_download

from e2e.fake_hub import CHUNK, COMMIT, fake_hub, gguf_bytes  # noqa: F401 - fixtures
from sayso.engine import hub, models
from sayso.engine.download import DownloadCancelled
from sayso.engine.errors import ModelFileError, SaysoError
from sayso.engine.gguf.reader import ModelFile
from support.data import ROOT


def sha256(data: bytes | Path) -> str:
    return hashlib.sha256(data.read_bytes() if isinstance(data, Path) else data).hexdigest()


def sayso(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sayso", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def test_pull_reports_progress_and_lands_in_the_hub_cache(fake_hub, gguf_bytes, tmp_path):
    steps: list[tuple[float, str]] = []
    path = hub.pull("moonshine-tiny", progress=lambda f, m: steps.append((f, m)))

    model = hub.CATALOG["moonshine-tiny"]
    snapshot = tmp_path / "hub-cache" / "models--handy-computer--moonshine-tiny-gguf" / "snapshots" / COMMIT
    assert path == snapshot / "moonshine-tiny-Q8_0.gguf" and path.is_symlink()
    assert sha256(path) == sha256(gguf_bytes)
    assert path.resolve().name == sha256(gguf_bytes)  # the blob is named by its sha256, as the hub names it
    assert (path.parents[2] / "refs" / "main").read_text() == COMMIT
    assert ModelFile(path).architecture == "whisper"
    fractions = [f for f, _ in steps]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and steps[-1][1] == "Downloaded moonshine-tiny"
    assert any("Downloading moonshine-tiny" in m for _, m in steps)
    assert fake_hub.gets() == [("GET", f"/blobs/{sha256(gguf_bytes)}", None)]
    assert not list(path.parents[2].glob("blobs/*.incomplete"))

    weights = ModelFile(path).tensor("weights")
    weights.read(0, weights.shape[0])  # the checksums recorded at the download hold
    opened, blob = ModelFile(path), path.resolve()
    middle = opened._data_offset + opened._tensors["weights"].offset + opened._tensors["weights"].nbytes // 2
    data = bytearray(gguf_bytes)
    data[middle] ^= 0x01  # a bit flipped on the disk since
    blob.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="tensor 'weights' isn't what was written"):
        ModelFile(path).tensor("weights").read(0, weights.shape[0])
    blob.write_bytes(gguf_bytes)

    assert hub.pull("moonshine-tiny") == path  # already there: nothing fetched again
    assert len(fake_hub.gets()) == 1
    assert models.resolve("moonshine-tiny") == path
    assert [(m.name, m.path, m.size, m.source) for m in models.installed()] == [
        ("moonshine-tiny", path, len(gguf_bytes), model.repo_id)
    ]


def test_rm_deletes_the_revision_through_the_cache_api(fake_hub, gguf_bytes):
    path = hub.pull("moonshine-tiny")
    blob = path.resolve()
    assert [m.name for m in models.remove("moonshine-tiny")] == ["moonshine-tiny"]
    assert not path.exists() and not blob.exists() and hub.cached(hub.CATALOG["moonshine-tiny"]) is None
    assert models.installed() == []
    with pytest.raises(SaysoError, match="No model called 'moonshine-tiny' is installed"):
        models.remove("moonshine-tiny")
    # A published model with no PyPI source is never downloaded behind the user's back.
    with pytest.raises(SaysoError, match="isn't downloaded yet: run `sayso models pull parakeet-v3`"):
        models.resolve("parakeet-v3")


def test_a_dropped_connection_is_resumed_with_a_range_request(fake_hub, gguf_bytes):
    fake_hub.drop_after = CHUNK + 4096
    path = hub.pull("moonshine-tiny")
    assert sha256(path) == sha256(gguf_bytes)
    ranges = [r[2] for r in fake_hub.gets()]
    assert ranges == [None, f"bytes={CHUNK}-"]  # the first chunk was kept; only the rest was fetched again


def test_a_killed_pull_continues_where_it_stopped(fake_hub, gguf_bytes, tmp_path):
    """`sayso models pull` is killed (SIGKILL) mid-transfer; the next pull asks only for the missing bytes."""
    fake_hub.stall_after = CHUNK + 4096
    process = sayso("models", "pull", "moonshine-tiny")
    blobs = tmp_path / "hub-cache" / "models--handy-computer--moonshine-tiny-gguf" / "blobs"
    deadline = time.monotonic() + 60
    while not any(p.stat().st_size >= CHUNK for p in blobs.glob("*.incomplete")):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    fake_hub.stall_after = None
    fake_hub.release.set()

    path = hub.pull("moonshine-tiny")
    assert sha256(path) == sha256(gguf_bytes)
    assert fake_hub.gets()[-1][2] == f"bytes={CHUNK}-"
    assert not list(blobs.glob("*.incomplete"))


def test_a_cancelled_pull_keeps_its_part_for_the_next_one(fake_hub, gguf_bytes):
    cancel = threading.Event()
    with pytest.raises(DownloadCancelled, match="again to continue"):
        hub.pull("moonshine-tiny", progress=lambda f, m: f > 0.3 and cancel.set(), cancel=cancel)
    assert hub.cached(hub.CATALOG["moonshine-tiny"]) is None
    path = hub.pull("moonshine-tiny")
    assert sha256(path) == sha256(gguf_bytes)
    assert fake_hub.gets()[-1][2] == f"bytes={CHUNK}-"


def test_a_damaged_download_is_deleted_and_reported(fake_hub, gguf_bytes, tmp_path):
    fake_hub.corrupt = True
    with pytest.raises(SaysoError, match="download of moonshine-tiny is damaged .* and was deleted"):
        hub.pull("moonshine-tiny")
    repo = tmp_path / "hub-cache" / "models--handy-computer--moonshine-tiny-gguf"
    assert list((repo / "blobs").iterdir()) == [] and not (repo / "snapshots").exists()
    fake_hub.corrupt = False
    assert sha256(hub.pull("moonshine-tiny")) == sha256(gguf_bytes)


def test_a_pull_that_would_fill_the_disk_is_refused_before_it_starts(fake_hub, tmp_path):
    (tmp_path / "hub-cache").mkdir()
    free = shutil.disk_usage(tmp_path / "hub-cache").free
    with pytest.raises(SaysoError, match=r"Not enough disk space for moonshine-tiny: it needs 26 MB .* should stay free"):
        hub.pull("moonshine-tiny", min_free=free)
    assert fake_hub.gets() == []


def test_an_unreachable_server_says_so(fake_hub, monkeypatch):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", closed)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", closed + "/{repo_id}/resolve/{revision}/{filename}")
    with pytest.raises(SaysoError, match=f"Can't reach the model server at {closed} .*use a local model"):
        hub.pull("moonshine-tiny")


def test_unknown_and_unpublished_names(fake_hub):
    with pytest.raises(SaysoError, match="No published model is called 'whisper-huge'. Models you can pull: whisper-tiny.en"):
        hub.pull("whisper-huge")
    with pytest.raises(SaysoError, match="has no whisper-base-Q8_0.gguf in handy-computer/whisper-base-gguf"):
        hub.pull("whisper-base")  # the fake hub doesn't hold it


def test_a_file_fetched_by_the_hubs_own_api_is_found(fake_hub, gguf_bytes, tmp_path):
    model = hub.CATALOG["whisper-tiny.en"]
    path = Path(hf_hub_download(model.repo_id, model.filename, cache_dir=tmp_path / "hub-cache", endpoint=fake_hub.url))
    assert models.resolve("whisper-tiny.en") == path  # the hub's file, not a conversion from PyPI
    assert [m.name for m in models.installed()] == ["whisper-tiny.en"]

    listing = sayso("models", "list")
    out, err = listing.communicate(timeout=120)
    assert listing.returncode == 0, err
    row = next(line for line in out.splitlines() if line.startswith("whisper-tiny.en"))
    assert str(path) in row and "26 MB" in row
    assert "moonshine-tiny" in out.split("Available")[1]  # published, not yet pulled


def test_cli_models_pull_list_rm(fake_hub, gguf_bytes, capsys):
    from sayso.app.cli import main

    assert main(["models", "pull", "moonshine-tiny"]) == 0
    out = capsys.readouterr().out
    assert "moonshine-tiny" in out and "models--handy-computer--moonshine-tiny-gguf" in out
    assert main(["models", "list"]) == 0
    installed, available = capsys.readouterr().out.split("Available")
    assert "moonshine-tiny" in installed and "moonshine-tiny" not in available
    assert re.search(r"parakeet-v3 .*740 MB.*25 European languages", available)
    assert main(["models", "rm", "moonshine-tiny"]) == 0
    assert "Removed moonshine-tiny" in capsys.readouterr().out
    assert main(["models", "rm", "moonshine-tiny"]) == 1
    assert "No model called 'moonshine-tiny' is installed" in capsys.readouterr().err
