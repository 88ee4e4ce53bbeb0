"""The command line against hostile input: outputs that aren't files, a damaged manifest, folders that can't
be read, a closed stderr, options out of range, two runs into one folder, Ctrl+C. Each case ends in the
work done or one clear line and a non-zero exit; never a traceback, never something of the user's
overwritten."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from support.cli import cli_env
from support.data import AUDIO, ROOT, TINY_EN_GGUF
from support.texts import JFK_WORDS, words
from sayso.app.cli import main
from sayso.app.core.archive import LOCK_NAME, MANIFEST_NAME, ArchiveFile, ArchiveRun, Manifest
from sayso.engine.audio import load_audio, save_wav
from sayso.engine.files import write_text_atomically

JFK = AUDIO / "jfk.wav"


def sayso(args: list[str], data_dir: Path, **run) -> subprocess.CompletedProcess:
    """``sayso ARGS`` in a fresh process; stdout and stderr captured as text unless ``run`` says otherwise."""
    run = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **run}
    return subprocess.run([sys.executable, "-m", "sayso", *args], cwd=ROOT, env=cli_env(data_dir), text=True,
                          timeout=300, **run)


def into(folder: Path, out: Path, *options: str) -> list[str]:
    return ["transcribe", str(folder), "-o", str(out), "--model", str(TINY_EN_GGUF), "--device", "cpu", *options]


def one_line(done: subprocess.CompletedProcess, status: int = 1) -> str:
    """The one ``sayso`` line of a refused command (no traceback), which is returned."""
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("sayso")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / MANIFEST_NAME).read_text().splitlines()]


def clips(folder: Path, count: int, seconds: int = 3) -> list[Path]:
    """``count`` short clips of real speech, each its own file."""
    folder.mkdir(parents=True)
    pcm = load_audio(JFK)
    return [save_wav(folder / f"clip{i}.wav", pcm[16000 * i: 16000 * (i + seconds)]) or folder / f"clip{i}.wav"
            for i in range(count)]


def special_file(path: Path, kind: str) -> Path:
    """A FIFO, a socket, a folder, a file, or a link to /dev/null at ``path``: a link, so that a regression
    would replace the link and never the device."""
    if kind == "file":
        path.write_text("a file of the user's")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(os.devnull)
    return path


KINDS = {"fifo": "a pipe (FIFO)", "socket": "a socket", "folder": "a folder", "device": "a character device"}


@pytest.mark.parametrize("kind", KINDS)
def test_convert_never_replaces_what_isnt_a_regular_file(tmp_path, kind):
    target = special_file(tmp_path / "out.gguf", kind)
    before = os.stat(target).st_mode
    line = one_line(sayso(["convert", "--random", "whisper-tiny.en", "--small", str(target)], tmp_path / "data"))
    assert f"{target} is {KINDS[kind]}, not a file" in line
    assert os.stat(target).st_mode == before
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("kind", ["fifo", "socket", "device", "file"])
def test_an_archive_output_folder_that_isnt_one_is_refused_before_the_model_loads(tmp_path, kind):
    out = special_file(tmp_path / "out", kind)
    done = sayso(into(JFK, out), tmp_path / "data")
    assert f"{out} is {KINDS.get(kind, 'a file')}, not a folder" in one_line(done)
    assert "CPU backend" not in done.stderr  # refused before the model loads
    if kind == "file":
        assert out.read_text() == "a file of the user's"


def test_a_special_file_in_place_of_an_output_is_left_alone(tmp_path):
    os.mkfifo(tmp_path / "jfk.wav.txt")
    done = sayso(into(JFK, tmp_path), tmp_path / "data")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].endswith("jfk.wav.txt is a pipe (FIFO), not a file: Sayso writes only a "
                                                 "new file or over a regular one. Give the path of a file to write.")
    assert stat.S_ISFIFO(os.stat(tmp_path / "jfk.wav.txt").st_mode)


def test_a_write_a_killed_writer_left_is_removed_and_one_in_use_is_kept(tmp_path):
    target = tmp_path / "model.gguf"
    abandoned = tmp_path / ".model.gguf.0123456789ab.tmp"
    abandoned.write_bytes(b"")  # what a conversion killed before its first byte leaves
    in_use = tmp_path / ".model.gguf.ba9876543210.tmp"
    with open(in_use, "wb") as writer:
        fcntl.flock(writer, fcntl.LOCK_EX)  # another process writing it: its lock is on the file
        done = sayso(["convert", "--random", "whisper-tiny.en", "--small", str(target)], tmp_path / "data")
        assert done.returncode == 0, done.stderr
        assert not abandoned.exists() and in_use.exists() and target.stat().st_size > 0
    write_text_atomically(tmp_path / "notes.txt", "text")  # the same helper writes every output
    assert (tmp_path / "notes.txt").read_text() == "text"


def test_a_refused_output_folder_says_to_choose_another_not_the_data_folder(tmp_path):
    line = one_line(sayso(into(JFK, Path("/sys/sayso-out")), tmp_path / "data"))  # read-only, even for root
    assert "Give -o a folder you can write." in line and "SAYSO_DATA_DIR" not in line


@pytest.mark.parametrize("args, says", [
    (["bench", "M", "F", "--runs", "0"], "--runs: '0' is not a number of runs from 1 to 1000"),
    (["bench", "M", "F", "--runs", "-1"], "--runs: '-1' is not a number of runs from 1 to 1000"),
    (["bench", "M", "--folder", "D", "--batch", "0"], "--batch: '0' is not a number of windows from 1 to 64"),
    (["bench", "M", "F", "--stream", "--chunk", "0"], "--chunk: '0' is not a chunk's length: give more than 0"),
    (["bench", "M", "F", "--stream", "--chunk", "-1"], "--chunk: '-1' is not a chunk's length"),
    (["bench", "M", "F", "--stream", "--chunk", "nan"], "--chunk: 'nan' is not a chunk's length"),
    (["transcribe", "F", "-o", "O", "--batch", "0"], "--batch: '0' is not a number of windows from 1 to 64"),
    (["transcribe", "F", "-o", "O", "--batch", "-1"], "--batch: '-1' is not a number of windows from 1 to 64"),
    (["transcribe", "F", "-o", "O", "--batch", "100000"], "--batch: '100000' is not a number of windows"),
    (["transcribe", "F", "-o", "O", "--ray", "local", "--ray-workers", "0"], "--ray-workers: '0' is not a number"),
    (["transcribe", "F", "-o", ""], "-o/--output-dir: the output folder is empty"),
    (["transcribe", "F", "--model", ""], "--model: the model is empty"),
    (["convert", "--random", "whisper-tiny.en", ""], "the model folder or output file is empty"),
])
def test_options_out_of_range_are_refused_by_the_parser_in_one_line(capsys, args, says):
    with pytest.raises(SystemExit) as exit:
        main(args)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and f"See sayso {args[0]} --help." in err, err


def test_bench_folder_over_a_broken_file_says_what_is_wrong_with_it(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    shutil.copy(JFK, folder)
    (folder / "broken.wav").write_bytes(np.random.default_rng(0).bytes(4000))  # no format FFmpeg can probe
    done = sayso(["bench", str(TINY_EN_GGUF), "--folder", str(folder), "--device", "cpu", "--runs", "1"],
                 tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(f"not run: {folder / 'broken.wav'}: isn't audio or video") == 3, done.stdout
    assert "Error" not in done.stdout


def test_a_closed_stderr_costs_nothing_of_the_transcript(tmp_path):
    closed = {"stderr": None, "preexec_fn": lambda: os.close(2)}  # as `2>&-` leaves it
    done = sayso(["transcribe", str(JFK), "--model", str(TINY_EN_GGUF), "--device", "cpu"], tmp_path / "data",
                 **closed)
    assert done.returncode == 0 and words(done.stdout) == JFK_WORDS
    done = sayso(into(JFK, tmp_path / "out"), tmp_path / "data", **closed)
    assert done.returncode == 0 and words((tmp_path / "out" / "jfk.wav.txt").read_text()) == JFK_WORDS


def test_a_stderr_whose_reader_is_gone_costs_nothing_of_the_transcript(tmp_path):
    reader, writer = os.pipe()
    os.close(reader)  # every message written now fails with EPIPE
    try:
        done = sayso(["-v", "transcribe", str(JFK), "--model", str(TINY_EN_GGUF), "--device", "cpu"],
                     tmp_path / "data", stderr=writer)
    finally:
        os.close(writer)
    assert done.returncode == 0 and words(done.stdout) == JFK_WORDS


def test_several_files_to_stdout_are_told_apart_by_a_header(tmp_path):
    done = sayso(["transcribe", str(JFK), str(AUDIO / "jfk.mp3"), "--model", str(TINY_EN_GGUF), "--device", "cpu",
                  "--format", "srt"], tmp_path / "data")
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split(f"==> {AUDIO / 'jfk.mp3'} <==\n")
    assert first.startswith(f"==> {JFK} <==\n1\n00:00:00,000 --> ") and second.startswith("1\n00:00:00,000 --> ")


def cut_in_a_character(record: dict) -> bytes:
    """``record``'s line cut inside its first non-ASCII character, as a disk that filled would leave it."""
    line = json.dumps(record, ensure_ascii=False).encode()
    return line[:next(i for i, byte in enumerate(line) if byte > 127) + 1]


@pytest.mark.parametrize("line", [
    cut_in_a_character({"input": {"path": "/gone/caf\u00e9.wav"}, "status": "done", "output": "caf\u00e9.wav.txt"}),
    b"null", b"{}", b"[1,2]", b"{not json", b'{"input": {"path": 7}, "status": "done", "output": "x"}',
])
def test_a_damaged_manifest_line_is_skipped_with_its_number(tmp_path, caplog, line):
    good = {"input": {"path": "/a.wav"}, "status": "done", "output": "a.wav.txt"}
    (tmp_path / MANIFEST_NAME).write_bytes(b"\n".join([json.dumps(good).encode(), line, json.dumps(good).encode()]))
    assert set(Manifest(tmp_path).latest) == {"/a.wav"}
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and messages[0].startswith(f"{tmp_path / MANIFEST_NAME}: line 2 "), messages
    assert "skipped" in messages[0]


def test_an_archive_resumes_over_a_damaged_manifest_and_redoes_a_damaged_output(tmp_path):
    out, data = tmp_path / "out", tmp_path / "data"
    out.mkdir()
    cut = cut_in_a_character({"input": {"path": "/r\u00e9union.wav"}, "status": "done"})
    (out / MANIFEST_NAME).write_bytes(b"null\n{}\n[1,2]\n" + cut)
    done = sayso(into(JFK, out), data)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert [line.split(": line ")[1][0] for line in done.stderr.splitlines() if ": line " in line] == list("1234")
    assert words((out / "jfk.wav.txt").read_text()) == JFK_WORDS

    done = sayso(into(JFK, out), data)
    assert "0 transcribed, 1 skipped (done before)" in done.stderr, done.stderr
    transcript = (out / "jfk.wav.txt").read_text()
    (out / "jfk.wav.txt").write_text(transcript[: len(transcript) // 2])  # damaged since
    done = sayso(into(JFK, out), data)
    assert "1 transcribed, 0 skipped" in done.stderr and "changed or damaged since" in done.stderr, done.stderr
    assert (out / "jfk.wav.txt").read_text() == transcript


def unprivileged() -> list[str]:
    """What runs a command so that file permissions apply to it: for root, setpriv without the capabilities
    that let root past them (still uid 0, so the checkout and the model stay readable); else nothing."""
    return ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []


def test_a_folder_that_cant_be_read_is_a_failure_named_in_the_summary(tmp_path):
    """The folder inside the tree (with --recursive) and given directly: one failure, the folder named."""
    folder = tmp_path / "archive"
    (folder / "locked").mkdir(parents=True)
    shutil.copy(JFK, folder / "locked" / "jfk.wav")  # a file the run can't know of
    (folder / "locked").chmod(0)
    command = [*unprivileged(), sys.executable, "-m", "sayso", "transcribe", str(folder), str(folder / "locked"),
               "--recursive", "-o", str(tmp_path / "out"), "--model", str(TINY_EN_GGUF), "--device", "cpu"]
    try:
        done = subprocess.run(command, cwd=ROOT, env=cli_env(tmp_path / "data"), capture_output=True, text=True,
                              timeout=120)
    finally:
        (folder / "locked").chmod(0o755)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "sayso: 0 transcribed, 0 skipped (done before), 1 failed" in done.stderr
    assert f"failed: {folder / 'locked'}: the folder can't be read (Permission denied)" in done.stderr


def test_ctrl_c_stops_an_archive_with_a_summary_of_what_is_left(tmp_path):
    files = 8  # enough that the run can't end between the first file done and the signal
    clips(tmp_path / "clips", files)
    run = subprocess.Popen([sys.executable, "-m", "sayso", *into(tmp_path / "clips", tmp_path / "out")], cwd=ROOT,
                           env=cli_env(tmp_path / "data"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    manifest = tmp_path / "out" / MANIFEST_NAME
    deadline = time.monotonic() + 120
    while not (manifest.exists() and '"done"' in manifest.read_text()) and run.poll() is None:
        assert time.monotonic() < deadline, "no file was done in 120 s"
        time.sleep(0.02)
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 130 and "Traceback" not in stderr, stderr
    done = sum(r["status"] == "done" for r in records(tmp_path / "out"))
    assert 1 <= done < files, "the run ended before it could be interrupted"
    assert f"sayso: interrupted: {done} transcribed, 0 skipped (done before), 0 failed, {files - done} left" in stderr


def test_two_runs_into_one_folder_share_the_files(tmp_path):
    clips(tmp_path / "clips", 6)
    out, data = tmp_path / "out", tmp_path / "data"
    runs = [subprocess.Popen([sys.executable, "-m", "sayso", *into(tmp_path / "clips", out)], cwd=ROOT,
                             env=cli_env(data), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    stderrs = [run.communicate(timeout=240)[1] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], stderrs
    done = Counter(r["input"]["path"] for r in records(out) if r["status"] == "done")
    assert sorted(done.values()) == [1] * 6, "a file transcribed twice, or never"
    transcribed = [int(s.split(" transcribed,")[0].rsplit(" ", 1)[-1]) for s in stderrs]
    assert sum(transcribed) == 6, stderrs


def test_a_file_another_run_holds_is_waited_for_and_taken_over_if_it_isnt_recorded(tmp_path):
    files = clips(tmp_path / "clips", 2)
    out, data = tmp_path / "out", tmp_path / "data"
    other = ArchiveRun([ArchiveFile(files[0], Path("clip0.wav.txt"))], out, TINY_EN_GGUF, {})
    assert next(other.claimed()).path == files[0]  # this process holds clip0 as another run would
    run = subprocess.Popen([sys.executable, "-m", "sayso", *into(tmp_path / "clips", out)], cwd=ROOT,
                           env=cli_env(data), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "clip1.wav.txt").exists():
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1]
        time.sleep(0.02)
    assert run.poll() is None and not (out / "clip0.wav.txt").exists(), "clip0 was taken while it was held"
    other.finish()  # the other run ends without recording clip0: it is done here
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 0 and "sayso: 2 transcribed" in stderr, stderr
    assert (out / "clip0.wav.txt").exists() and LOCK_NAME in os.listdir(out)
