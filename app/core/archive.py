"""Transcribing an archive of files into a folder, resumably: ``sayso transcribe DIR... -o OUTDIR``.

One output per input file, under OUTDIR as the input is under the folder given, named after the whole
input name (``talk.wav`` → ``talk.wav.txt``): ``talk.wav`` and ``talk.mp3`` side by side get two outputs,
not one overwriting the other. A manifest in OUTDIR (``MANIFEST_NAME``, JSON lines) gets a record for each
file as it is done or fails, flushed to disk before the next one starts, so that a run killed at any
moment loses at most the file in progress; a rerun skips the files done with the same model and options
whose output is still there, and tries again those that failed or were cut short.

No Qt and no printing: the command line parses the options and shows the ``Progress`` and ``Summary``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sayso.engine import audio
from sayso.engine.errors import AudioError, SaysoError
from sayso.engine.files import write_text_atomically
from sayso.engine.formats import render

MANIFEST_NAME = ".sayso-manifest.jsonl"


@dataclass(frozen=True)
class ArchiveFile:
    """One input: ``path`` as given or found, ``output`` its transcript's path relative to OUTDIR."""

    path: Path
    output: Path


def archive_files(paths: list[Path], fmt: str, recursive: bool) -> list[ArchiveFile]:
    """The files to transcribe: files as given, and the audio and video files (``audio.MEDIA_SUFFIXES``) in
    the folders given, in their subfolders too when ``recursive``. A file reached twice (named twice, or
    through a link) is one input, the first way it was reached. Two inputs whose outputs would be one file
    (``a/x.wav`` and ``b/x.wav`` given directly) are refused before anything runs, rather than one
    transcript silently replacing the other."""
    found: dict[Path, ArchiveFile] = {}
    claimed: dict[Path, Path] = {}
    for given in paths:
        for path, relative in _contents(given, recursive):
            real = path.resolve()
            if real in found:
                continue
            output = relative.with_name(f"{relative.name}.{fmt}")
            if output in claimed:
                raise SaysoError(f"{claimed[output]} and {path} would both be transcribed to {output}: "
                                 "transcribe them into different output folders.")
            claimed[output] = path
            found[real] = ArchiveFile(path, output)
    return list(found.values())


def _contents(given: Path, recursive: bool):
    """(path, path relative to the output folder) for a path given: a file is its own name; a folder, its
    media files by their path inside it. Links to folders are not followed: a link back up would never end."""
    if not given.is_dir():
        yield given, Path(given.name)  # a missing or special file fails in its turn, as a bad file does
        return
    for folder, subfolders, names in os.walk(given):
        subfolders[:] = sorted(subfolders) if recursive else []
        for name in sorted(names):
            path = Path(folder, name)
            if path.suffix.lower() in audio.MEDIA_SUFFIXES and path.is_file():
                yield path, path.relative_to(given)


def file_identity(path: Path) -> dict:
    """What tells a file from its next version without reading it: its real path, size and modification time."""
    info = path.stat()
    return {"path": str(path.resolve()), "size": info.st_size, "mtime_ns": info.st_mtime_ns}


class Manifest:
    """OUTDIR's record of the files done and failed: one JSON object a line, appended, the last line about
    a file the one that counts. Each line is on disk (flush, fsync) before the next file starts."""

    def __init__(self, outdir: Path) -> None:
        self.path = outdir / MANIFEST_NAME
        self.latest: dict[str, dict] = {}
        text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        self.torn = not text.endswith("\n") and text != ""  # a line cut short: the next starts on a line of its own
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # the last line of a run killed while writing it
                continue
            self.latest[record["input"]["path"]] = record

    def is_done(self, file: ArchiveFile, outdir: Path, model: dict, options: dict) -> bool:
        """Whether ``file`` as it is now was transcribed with this model and options, its output still there."""
        record = self.latest.get(str(file.path.resolve()))
        return (record is not None and record["status"] == "done" and record["input"] == _identity_or_path(file.path)
                and record["model"] == model and record["options"] == options
                and record["output"] == str(file.output) and (outdir / file.output).is_file())

    def append(self, record: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as manifest:
            manifest.write(("\n" if self.torn else "") + json.dumps(record, ensure_ascii=False) + "\n")
            manifest.flush()
            os.fsync(manifest.fileno())
        self.torn = False
        self.latest[record["input"]["path"]] = record


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
        self.todo = [f for f in files if not self.manifest.is_done(f, outdir, self.model, options)]
        self.summary = Summary(skipped=len(files) - len(self.todo))
        self.lengths = {f: _length(f.path) for f in self.todo}
        self.progress = Progress(len(self.todo), sum(s for s in self.lengths.values() if s is not None))

    def record_done(self, file: ArchiveFile, transcript) -> None:
        target = self.outdir / file.output
        for stale in target.parent.glob(f".{target.name}.*.tmp"):  # a write a killed run left half done
            stale.unlink(missing_ok=True)
        write_text_atomically(target, render(transcript, self.options["format"], file=str(file.path)))
        self.summary.transcribed += 1
        self.summary.audio_s += transcript.duration
        self._record(file, {"status": "done", "audio_s": transcript.duration})

    def record_failed(self, file: ArchiveFile, error: str) -> None:
        self.summary.failed.append((file.path, error))
        self._record(file, {"status": "failed", "error": error})

    def _record(self, file: ArchiveFile, outcome: dict) -> None:
        self.manifest.append({"input": _identity_or_path(file.path), "model": self.model, "options": self.options,
                              "output": str(file.output), **outcome})
        self.progress.files_done += 1
        self.progress.audio_done_s += self.lengths[file] or 0.0

    def finish(self) -> Summary:
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
    nothing left loads no model). ``show(progress, seconds of the current file done)``: called as the
    work goes; ``failed(path, message)`` as a file fails. A bad file (not audio, damaged, empty:
    ``AudioError``) is recorded as failed and the run goes on; any other error (options the model
    refuses, an output that can't be written) would fail every file alike, so it stops the run.
    """
    run = ArchiveRun(files, outdir, model, options)
    if not run.todo:
        return run.finish()
    todo = {file.path: file for file in run.todo}
    report = None
    if show:
        show(run.progress, 0.0)
        report = lambda path, fraction: show(run.progress, fraction * (run.lengths[todo[path]] or 0.0))  # noqa: E731
    for path, outcome in transcribe_many(list(todo), report):
        file = todo[path]
        if isinstance(outcome, AudioError):
            run.record_failed(file, str(outcome))
            if failed:
                failed(file.path, str(outcome))
        else:
            run.record_done(file, outcome)
        if show:
            show(run.progress, 0.0)
    return run.finish()


def _length(path: Path) -> float | None:
    """Seconds of audio by the file's header, None when it doesn't say (or isn't audio: that fails later)."""
    try:
        return audio.duration(path)
    except AudioError:
        return None


def _identity_or_path(path: Path) -> dict:
    """The file's identity, or only its path when it can't be read (gone, a broken link): it fails anyway."""
    try:
        return file_identity(path)
    except OSError:
        return {"path": str(path.resolve())}
