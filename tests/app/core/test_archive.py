"""`sayso transcribe DIR -o OUTDIR`: a folder of files transcribed into a folder, resumably (``app.core.archive``)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from support.cli import cli_env
from support.data import AUDIO, ROOT, TINY_EN_GGUF, skip_or_fail
from support.texts import JFK_WORDS, words
from sayso.app.core.archive import MANIFEST_NAME, Manifest, archive_files
from sayso.engine.audio import load_audio, save_wav
from sayso.engine.errors import SaysoError


def archive(folder: Path) -> dict[str, Path]:
    """Good clips, two with one name and different extensions, a nested folder with a short clip, random
    bytes named .wav, an empty .wav, and a link to a clip: the good inputs by their outputs' names."""
    (folder / "nested").mkdir(parents=True)
    shutil.copy(AUDIO / "jfk.wav", folder / "jfk.wav")
    shutil.copy(AUDIO / "jfk.mp3", folder / "jfk.mp3")
    save_wav(folder / "nested" / "short.wav", load_audio(AUDIO / "jfk.wav")[: 16000 * 4])
    # Noise FFmpeg can't probe as any format, the same bytes every run: fresh random bytes look like some
    # format to FFmpeg's probe about one time in a hundred ("has no audio track", "Decoder not found").
    (folder / "nested" / "broken.wav").write_bytes(np.random.default_rng(0).bytes(4000))
    (folder / "nested" / "empty.wav").write_bytes(b"")
    (folder / "nested" / "link.wav").symlink_to(folder / "jfk.wav")
    (folder / "nested" / "notes.txt").write_text("not audio, not an input")
    return {"jfk.mp3.txt": folder / "jfk.mp3", "jfk.wav.txt": folder / "jfk.wav",
            "nested/short.wav.txt": folder / "nested" / "short.wav"}


def transcribe(folder: Path, out: Path, data: Path, *options: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "sayso", "transcribe", str(folder), "-o", str(out), "--recursive",
               "--model", str(TINY_EN_GGUF), "--device", "cpu", *options]
    return subprocess.Popen(command, cwd=ROOT, env=cli_env(data), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(run: subprocess.Popen) -> tuple[int, str]:
    _, stderr = run.communicate(timeout=120)
    return run.returncode, stderr


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / MANIFEST_NAME).read_text().splitlines()]


def outputs(out: Path) -> dict[str, str]:
    """The transcripts under ``out`` by their path in it; not the manifest, nor a temporary file a kill left."""
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def test_a_run_killed_half_way_resumes_and_bad_files_fail_without_stopping_it(tmp_path):
    folder, out, data = tmp_path / "archive", tmp_path / "out", tmp_path / "data"
    good = archive(folder)

    killed = transcribe(folder, out, data)
    manifest = out / MANIFEST_NAME
    deadline = time.monotonic() + 90
    while not (manifest.exists() and '"done"' in manifest.read_text()) and killed.poll() is None:
        assert time.monotonic() < deadline, "no file was done in 90 s"
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    status, _ = finish(killed)
    assert status == -signal.SIGKILL, "the run ended before it could be killed half-way"
    first = sum(r["status"] == "done" for r in records(out))
    assert 1 <= first < len(good)

    done_first = {r["output"] for r in records(out) if r["status"] == "done"}
    for name in set(good) - done_first:  # what a write cut by the kill would leave beside its output
        stale = out / Path(name).parent / f".{Path(name).name}.4242.tmp"
        stale.parent.mkdir(parents=True, exist_ok=True)
        stale.write_text("half a transcript")
    status, stderr = finish(transcribe(folder, out, data))
    assert status == 1, stderr  # because of the bad files
    assert not list(out.rglob("*.tmp"))  # redone, with nothing left half written
    done = Counter(r["input"]["path"] for r in records(out) if r["status"] == "done")
    assert done == {str(path.resolve()): 1 for path in good.values()}, "a good file transcribed twice, or never"
    assert f"sayso: {len(good) - first} transcribed, {first} skipped (done before), 2 failed" in stderr
    failures = {r["input"]["path"]: r["error"] for r in records(out) if r["status"] == "failed"}
    assert "isn't audio or video" in failures[str((folder / "nested" / "broken.wav").resolve())]
    assert "is empty (0 bytes)" in failures[str((folder / "nested" / "empty.wav").resolve())]
    assert f"failed: {folder / 'nested' / 'broken.wav'}: isn't audio or video" in stderr

    whole = tmp_path / "whole"  # in one run, windows of several files encoded together: the same outputs and records
    status, _ = finish(transcribe(folder, whole, data, "--batch", "3"))
    assert status == 1
    assert outputs(out) == outputs(whole) and set(outputs(out)) == set(good)
    assert {r["input"]["path"]: r for r in records(whole)} == {r["input"]["path"]: r for r in records(out)}
    assert words(outputs(out)["jfk.wav.txt"]) == JFK_WORDS

    status, stderr = finish(transcribe(folder, out, data, "--format", "srt"))
    assert status == 1
    assert "sayso: 3 transcribed, 0 skipped (done before), 2 failed" in stderr, "the options changed: all again"
    assert {name for name in outputs(out) if name.endswith(".srt")} == {f"{name[:-4]}.srt" for name in good}


def test_a_run_on_ray_writes_what_a_local_run_writes_and_a_local_rerun_skips_it(tmp_path):
    """``--ray local``: two CPU workers in a Ray instance that the command starts and stops."""
    if importlib.util.find_spec("ray") is None:
        skip_or_fail("needs Ray: pip install -e '.[cluster]'")
    folder, local, on_ray, data = tmp_path / "archive", tmp_path / "local", tmp_path / "ray", tmp_path / "data"
    good = archive(folder)
    status, _ = finish(transcribe(folder, local, data))
    assert status == 1

    status, stderr = finish(transcribe(folder, on_ray, data, "--ray", "local", "--ray-workers", "2"))
    assert status == 1, stderr  # because of the bad files
    assert "sayso: 3 transcribed, 0 skipped (done before), 2 failed" in stderr
    assert outputs(on_ray) == outputs(local) and set(outputs(on_ray)) == set(good)
    done = Counter(r["input"]["path"] for r in records(on_ray) if r["status"] == "done")
    assert done == {str(path.resolve()): 1 for path in good.values()}, "a good file transcribed twice, or never"
    failures = {r["input"]["path"]: r["error"] for r in records(on_ray) if r["status"] == "failed"}
    assert "isn't audio or video" in failures[str((folder / "nested" / "broken.wav").resolve())]
    assert "is empty (0 bytes)" in failures[str((folder / "nested" / "empty.wav").resolve())]

    status, stderr = finish(transcribe(folder, on_ray, data))
    assert status == 1
    assert "sayso: 0 transcribed, 3 skipped (done before), 2 failed" in stderr, "one manifest, whoever wrote it"


def test_folders_contribute_media_files_and_a_file_reached_twice_is_one_input(tmp_path):
    folder = tmp_path / "archive"
    archive(folder)
    found = archive_files([folder, folder / "jfk.wav", folder / "nested" / "link.wav"], "txt", recursive=False)
    assert [(f.path.name, str(f.output)) for f in found] == [("jfk.mp3", "jfk.mp3.txt"), ("jfk.wav", "jfk.wav.txt")]
    nested = archive_files([folder], "vtt", recursive=True)
    assert [str(f.output) for f in nested] == ["jfk.mp3.vtt", "jfk.wav.vtt", "nested/broken.wav.vtt",
                                               "nested/empty.wav.vtt", "nested/short.wav.vtt"]


def test_two_inputs_with_one_output_are_refused_before_anything_runs(tmp_path):
    for folder in (tmp_path / "a", tmp_path / "b"):
        folder.mkdir()
        shutil.copy(AUDIO / "jfk.wav", folder / "jfk.wav")
    with pytest.raises(SaysoError, match="would both be transcribed to jfk.wav.txt"):
        archive_files([tmp_path / "a" / "jfk.wav", tmp_path / "b" / "jfk.wav"], "txt", recursive=False)


def test_a_manifest_line_cut_short_by_a_kill_costs_only_its_file(tmp_path):
    record = {"input": {"path": "/a.wav"}, "status": "done", "output": "a.wav.txt"}
    torn = json.dumps(record | {"input": {"path": "/b.wav"}})[:20]
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(record) + "\n" + torn)
    Manifest(tmp_path).append(record | {"input": {"path": "/c.wav"}})
    assert set(Manifest(tmp_path).latest) == {"/a.wav", "/c.wav"}
