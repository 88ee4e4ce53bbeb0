"""Transcribing an archive of files into a folder, resumably: ``sayso transcribe DIR... -o OUTDIR``.

One output per input file, under OUTDIR as the input is under the folder given, named after the whole
input name (``talk.wav`` → ``talk.wav.txt``): ``talk.wav`` and ``talk.mp3`` side by side get two outputs,
not one overwriting the other. A manifest in OUTDIR (``MANIFEST_NAME``, JSON lines) gets a record for each
file as it is done or fails, flushed to disk before the next one starts, so that a run killed at any
moment loses at most the file in progress; a rerun skips the files done with the same model and options
whose output is still there as it was written (its size and checksum are in the record), and tries again
those that failed or were cut short. A damaged manifest line (a disk that filled while it was written) is
skipped with a warning naming it: its file is done again.

Runs into one OUTDIR share the work: each file is claimed (a lock on the lock file beside the manifest,
``LOCK_NAME``) while it is transcribed, so that a second run takes the files no run holds, and then waits
for those another run holds, taking them over if that run ended without recording them.

No Qt and no printing: the command line parses the options and shows the ``Progress`` and ``Summary``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sayso.engine import (MEDIA_SUFFIXES, SPECIAL_FILES, AudioError, SaysoError, check_output, checksum, duration,
                          render, write_text_atomically)

log = logging.getLogger(__name__)

MANIFEST_NAME = ".sayso-manifest.jsonl"
LOCK_NAME = ".sayso-manifest.lock"
""" Beside the manifest: its byte 0 locked while a run reads or appends to the manifest, and one byte a
file (at an offset from the file's checksum) while a run transcribes it. POSIX record locks (``lockf``):
one lock file for any number of files, released by the system when a run dies."""


@dataclass(frozen=True)
class ArchiveFile:
    """One input: ``path`` as given or found, ``output`` its transcript's path relative to OUTDIR;
    ``unreadable``: why a folder could not be listed, for a folder whose files can't be known."""

    path: Path
    output: Path
    unreadable: str | None = None


def archive_files(paths: list[Path], fmt: str, recursive: bool) -> list[ArchiveFile]:
    """The files to transcribe: files as given, and the audio and video files (``audio.MEDIA_SUFFIXES``) in
    the folders given, in their subfolders too when ``recursive``. A file reached twice (named twice, or
    through a link) is one input, the first way it was reached. Two inputs whose outputs would be one file
    (``a/x.wav`` and ``b/x.wav`` given directly) are refused before anything runs, rather than one
    transcript silently replacing the other."""
    found: dict[Path, ArchiveFile] = {}
    claimed: dict[Path, Path] = {}
    for given in paths:
        for path, relative, unreadable in _contents(given, recursive):
            real = path.resolve()
            if real in found:
                continue
            if unreadable:
                found[real] = ArchiveFile(path, relative, unreadable)
                continue
            output = relative.with_name(f"{relative.name}.{fmt}")
            if output in claimed:
                raise SaysoError(f"{claimed[output]} and {path} would both be transcribed to {output}: "
                                 "transcribe them into different output folders.")
            claimed[output] = path
            found[real] = ArchiveFile(path, output)
    return list(found.values())


def _contents(given: Path, recursive: bool):
    """(path, path relative to the output folder, None) for a path given: a file is its own name; a
    folder, its media files by their path inside it; (folder, its path, why) for a folder that can't be
    listed, whose files would otherwise be left out without a word. Links to folders are not followed: a
    link back up would never end."""
    if not given.is_dir():
        yield given, Path(given.name), None  # a missing or special file fails in its turn, as a bad file does
        return
    unreadable: list[OSError] = []
    for folder, subfolders, names in os.walk(given, onerror=unreadable.append):
        subfolders[:] = sorted(subfolders) if recursive else []
        for name in sorted(names):
            path = Path(folder, name)
            if path.suffix.lower() in MEDIA_SUFFIXES and path.is_file():
                yield path, path.relative_to(given), None
    for error in unreadable:
        folder = Path(error.filename)
        yield folder, folder.relative_to(given), f"{folder}: the folder can't be read ({error.strerror})"


def file_identity(path: Path) -> dict:
    """What tells a file from its next version without reading it: its real path, size and modification time."""
    info = path.stat()
    return {"path": str(path.resolve()), "size": info.st_size, "mtime_ns": info.st_mtime_ns}


class Manifest:
    """OUTDIR's record of the files done and failed: one JSON object a line, appended, the last line about
    a file the one that counts. Each line is on disk (flush, fsync) before the next file starts. Read and
    appended under a lock, so that runs into one OUTDIR see each other's lines as they come (``refresh``)."""

    def __init__(self, outdir: Path) -> None:
        self.path = outdir / MANIFEST_NAME
        check_output(self.path)  # a pipe there would hang the run's first read
        self.latest: dict[str, dict] = {}
        self.read_bytes = 0
        self.lines = 0
        self.tail = b""  # a last line not ended yet: cut short by a kill
        self.warned: set[int] = set()
        _make_folder(outdir)
        check_output(outdir / LOCK_NAME)
        self.lock = os.open(outdir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
        with self.locked():
            self.refresh()
        if self.tail and _record(self.tail)[0] is None:
            self._warn(self.lines + 1, "is cut short")

    def locked(self):
        return _Lock(self.lock, 0)

    def refresh(self) -> None:
        """Take in the lines appended since the last read (by this run or another). Call it locked."""
        try:
            with open(self.path, "rb") as manifest:
                manifest.seek(self.read_bytes)
                data = manifest.read()
        except FileNotFoundError:
            return
        self.read_bytes += len(data)
        *complete, self.tail = (self.tail + data).split(b"\n")
        for line in complete:
            self.lines += 1
            record, problem = _record(line)
            if record is not None:
                self.latest[record["input"]["path"]] = record
            elif problem:
                self._warn(self.lines, problem)
        last, _ = _record(self.tail)  # whole but for its line's end: the kill came just before it
        if last is not None:
            self.latest[last["input"]["path"]] = last

    def _warn(self, line: int, problem: str) -> None:
        """Say once that a damaged line is skipped (a line cut short is reported again once it is ended)."""
        if line not in self.warned:
            self.warned.add(line)
            log.warning("%s: line %d %s: skipped, its file is done again", self.path, line, problem)

    def is_done(self, file: ArchiveFile, outdir: Path, model: dict, options: dict) -> bool:
        """Whether ``file`` as it is now was transcribed with this model and options, its output still there
        as it was written."""
        record = self.latest.get(str(file.path.resolve()))
        return (record is not None and record["status"] == "done" and record["input"] == _identity_or_path(file.path)
                and record["model"] == model and record["options"] == options
                and record["output"] == str(file.output) and _intact(outdir / file.output, record))

    def append(self, record: dict) -> None:
        with self.locked():
            self.refresh()
            with open(self.path, "ab") as manifest:
                line = json.dumps(record, ensure_ascii=False) + "\n"
                manifest.write((b"\n" if self.tail else b"") + line.encode("utf-8"))
                manifest.flush()
                os.fsync(manifest.fileno())
            self.refresh()

    def close(self) -> None:
        os.close(self.lock)


def _make_folder(outdir: Path) -> None:
    """OUTDIR, made if need be; SaysoError when it is something else than a folder."""
    try:
        mode = outdir.stat().st_mode
    except FileNotFoundError:
        outdir.mkdir(parents=True)
        return
    if not stat.S_ISDIR(mode):
        kind = SPECIAL_FILES.get(stat.S_IFMT(mode), "a file")
        raise SaysoError(f"{outdir} is {kind}, not a folder: give -o a folder to write the transcripts into.")


class _Lock:
    """An exclusive POSIX record lock on byte ``offset`` of the lock file ``fd``, for a ``with`` block."""

    def __init__(self, fd: int, offset: int) -> None:
        self.fd, self.offset = fd, offset

    def take(self, wait: bool) -> bool:
        """Lock it; False when ``wait`` is False and another process holds it."""
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB), 1, self.offset)
        except (BlockingIOError, PermissionError):  # held elsewhere (PermissionError: EACCES, on some systems)
            return False
        return True

    def release(self) -> None:
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.offset)

    def __enter__(self):
        self.take(wait=True)
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _record(line: bytes) -> tuple[dict | None, str | None]:
    """A manifest line's record, or None and what is wrong with it (None for an empty line)."""
    if not line.strip():
        return None, None
    try:
        record = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "is not UTF-8 text (cut inside a character?)"
    except json.JSONDecodeError:
        return None, "is not JSON (cut short?)"
    valid = (isinstance(record, dict) and isinstance(record.get("input"), dict)
             and isinstance(record["input"].get("path"), str) and record.get("status") in ("done", "failed")
             and isinstance(record.get("output"), str))
    return (record, None) if valid else (None, "is not a record of a file")


def _intact(output: Path, record: dict) -> bool:
    """Whether ``output`` is the file the record's run wrote: its size and checksum, where the record has
    them (a record of an earlier Sayso has neither: the file being there is all it can say)."""
    if not output.is_file():
        return False
    if "output_checksum" not in record:
        return True
    data = output.read_bytes()
    if len(data) == record.get("output_size") and checksum(data) == record["output_checksum"]:
        return True
    log.warning("%s was changed or damaged since it was written: it is transcribed again", output)
    return False


@dataclass
class Progress:
    """Where a run stands: files and audio seconds done of the total to do (skipped files not counted; a
    file whose header gives no length counts as a file only)."""

    files: int
    audio_s: float
    files_done: int = 0
    audio_done_s: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def eta_s(self, current_done_s: float = 0.0) -> float | None:
        """Seconds left at this run's pace so far: by audio seconds when the headers give them, else by files."""
        elapsed = time.monotonic() - self.started
        done_s = self.audio_done_s + current_done_s
        if self.audio_s > 0 and done_s > 0:
            return elapsed * (self.audio_s - done_s) / done_s
        if self.files_done:
            return elapsed * (self.files - self.files_done) / self.files_done
        return None


@dataclass
class Summary:
    transcribed: int = 0
    skipped: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)
    audio_s: float = 0.0
    wall_s: float = 0.0
    by_others: int = 0
    """Files another run into OUTDIR did while this one ran."""
    left: int = 0
    """Files not done when the run was interrupted."""
    interrupted: bool = False


class ArchiveRun:
    """One run over an archive: the files left to do (those not done before), and the recording of each
    outcome as it comes, in whatever order: its output written atomically, then its manifest record. The
    one writer of OUTDIR, whether the files are transcribed here (``transcribe_archive``) or on a cluster
    (``app.core.archive_ray``), so that a rerun either way skips what either way did."""

    def __init__(self, files: list[ArchiveFile], outdir: Path, model: Path, options: dict) -> None:
        self.started = time.monotonic()
        self.outdir, self.options = outdir, options
        self.manifest = Manifest(outdir)
        self.model = file_identity(model)
        unreadable = [(f.path, f.unreadable) for f in files if f.unreadable]
        files = [f for f in files if not f.unreadable]
        self.todo = [f for f in files if not self.manifest.is_done(f, outdir, self.model, options)]
        self.summary = Summary(skipped=len(files) - len(self.todo), failed=unreadable)
        self.lengths = {f: _length(f.path) for f in self.todo}
        self.progress = Progress(len(self.todo), sum(s for s in self.lengths.values() if s is not None))
        self.claims: dict[ArchiveFile, _Lock] = {}

    def claimed(self) -> Iterator[ArchiveFile]:
        """The files to do, each as this run claims it: first those no other run into OUTDIR holds, then,
        waiting for each, those another one held; a file another run recorded meanwhile is counted and
        left to it. A claim lasts until the file's outcome is recorded."""
        held = []
        for file in self.todo:
            taken = self._claim(file, wait=False)
            if taken is None:
                held.append(file)
            elif taken:
                yield file
        for file in held:
            if self._claim(file, wait=True):
                yield file

    def _claim(self, file: ArchiveFile, wait: bool) -> bool | None:
        """Claim ``file``: True when this run is to do it, False when another run recorded it meanwhile,
        None when another run holds it and ``wait`` is False."""
        key = str(file.path.resolve())
        claim = _Lock(self.manifest.lock, 1 + int(checksum(key.encode()), 16) % 2**62)
        if not claim.take(wait):
            return None
        with self.manifest.locked():
            self.manifest.refresh()
        # Not done when this run started: done now, it was by another run. Failed there, it is tried again
        # here, as a rerun would.
        if not self.manifest.is_done(file, self.outdir, self.model, self.options):
            self.claims[file] = claim
            return True
        claim.release()
        self.summary.by_others += 1
        self._count(file)
        return False

    def record_done(self, file: ArchiveFile, transcript) -> None:
        text = render(transcript, self.options["format"], file=str(file.path))
        written = text.encode("utf-8")
        with _uninterrupted():
            write_text_atomically(self.outdir / file.output, text)
            self._record(file, {"status": "done", "audio_s": transcript.duration, "output_size": len(written),
                                "output_checksum": checksum(written)})
            self.summary.transcribed += 1
            self.summary.audio_s += transcript.duration

    def record_failed(self, file: ArchiveFile, error: str) -> None:
        with _uninterrupted():
            self._record(file, {"status": "failed", "error": error})
            self.summary.failed.append((file.path, error))

    def _record(self, file: ArchiveFile, outcome: dict) -> None:
        self.manifest.append({"input": _identity_or_path(file.path), "model": self.model, "options": self.options,
                              "output": str(file.output), **outcome})
        claim = self.claims.pop(file, None)
        if claim is not None:
            claim.release()
        self._count(file)

    def _count(self, file: ArchiveFile) -> None:
        self.progress.files_done += 1
        self.progress.audio_done_s += self.lengths[file] or 0.0

    def interrupt(self) -> None:
        """Note that the run was stopped (Ctrl+C) with files left."""
        self.summary.interrupted = True
        self.summary.left = self.progress.files - self.progress.files_done

    def finish(self) -> Summary:
        self.manifest.close()
        self.summary.wall_s = time.monotonic() - self.started
        return self.summary


def transcribe_archive(files: list[ArchiveFile], outdir: Path, model: Path, options: dict,
                       transcribe_many: Callable, show: Callable[[Progress, float], None] | None = None,
                       failed: Callable[[Path, str], None] | None = None) -> Summary:
    """Transcribe the ``files`` not done yet into ``outdir``, here, recording each in the manifest as it
    is done.

    ``options``: format, language, task and prompt, as the manifest keeps them. ``transcribe_many(paths,
    progress)``: the engine's ``transcribe_many`` with the options, yielding (path, transcript or
    ``AudioError``) in the order of ``paths``; called only when there are files to do (so a rerun with
    nothing left loads no model); the paths are claimed as it takes them (``ArchiveRun.claimed``).
    ``show(progress, seconds of the current file done)``: called as the work goes; ``failed(path,
    message)`` as a file fails, a folder that can't be read first. A bad file (not audio, damaged, empty:
    ``AudioError``) is recorded as failed and the run goes on; any other error (options the model
    refuses, an output that can't be written) would fail every file alike, so it stops the run. Ctrl+C
    stops it too, with the files left in the summary.
    """
    run = ArchiveRun(files, outdir, model, options)
    if failed:
        for path, message in run.summary.failed:
            failed(path, message)
    if not run.todo:
        return run.finish()
    todo = {file.path: file for file in run.todo}
    report = None
    if show:
        show(run.progress, 0.0)
        report = lambda path, fraction: show(run.progress, fraction * (run.lengths[todo[path]] or 0.0))  # noqa: E731
    try:
        for path, outcome in transcribe_many((file.path for file in run.claimed()), report):
            file = todo[path]
            if isinstance(outcome, AudioError):
                run.record_failed(file, str(outcome))
                if failed:
                    failed(file.path, str(outcome))
            else:
                run.record_done(file, outcome)
            if show:
                show(run.progress, 0.0)
    except KeyboardInterrupt:
        run.interrupt()
    return run.finish()


@contextmanager
def _uninterrupted():
    """Ctrl+C (SIGINT) held back for the ``with`` block, so that a file's outcome is recorded whole (its
    output, its manifest line, the summary's counts) or not at all: it stops the run once the block ends."""
    if threading.current_thread() is not threading.main_thread():  # signal handlers are the main thread's
        yield
        return
    asked = []
    previous = signal.signal(signal.SIGINT, lambda *_: asked.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if asked:
            raise KeyboardInterrupt


def _length(path: Path) -> float | None:
    """Seconds of audio by the file's header, None when it doesn't say (or isn't audio: that fails later)."""
    try:
        return duration(path)
    except AudioError:
        return None


def _identity_or_path(path: Path) -> dict:
    """The file's identity, or only its path when it can't be read (gone, a broken link): it fails anyway."""
    try:
        return file_identity(path)
    except OSError:
        return {"path": str(path.resolve())}
