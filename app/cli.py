"""The ``sayso`` command: the app with no subcommand, the engine's tools with one.

Only the GUI path imports Qt, so ``sayso transcribe`` works on a machine with no screen.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from engine.errors import SaysoError

FORMATS = ("txt", "json", "srt", "vtt")


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


def _engine(args):
    from engine.engine import Engine

    def note(message: str) -> None:
        print(message, file=sys.stderr)

    return Engine(args.model, device=args.device, notify=note)


def cmd_transcribe(args) -> int:
    from engine.formats import render

    engine = _engine(args)
    failed = 0
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
        print(render(transcript, args.format, file=str(path)))
    return 1 if failed else 0


def cmd_convert(args) -> int:
    from engine.convert import convert

    out = convert(args.src, args.out, type=args.type)
    print(f"Wrote {out}")
    return 0


def cmd_bench(args) -> int:
    import json

    from engine import bench

    if args.compare:
        results = bench.compare(args.model, args.file, runs=args.runs)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sayso", description="Local dictation and transcription on the GPU.")
    parser.add_argument("--toggle", action="store_true", help="start or stop dictation in the running app")
    parser.add_argument("--screenshots", metavar="DIR", help="save screenshots of the app's windows to DIR and exit")
    parser.add_argument("--selftest", action="store_true", help="load the default model, transcribe a sample, exit 0 if it works")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine does")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def engine_options(p):
        p.add_argument("--model", help="model name (in the models folder) or path to a GGUF file; default: whisper-tiny.en")
        p.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto", help="compute backend (default: auto)")
        p.add_argument("--language", help="spoken language code (e.g. en, de); default: detect")

    p = sub.add_parser("transcribe", help="transcribe audio or video files")
    p.add_argument("files", nargs="+", metavar="FILE")
    engine_options(p)
    p.add_argument("--format", choices=FORMATS, default="txt")
    p.add_argument("--task", choices=("transcribe", "translate"), default="transcribe")
    p.add_argument("--prompt", help="custom vocabulary or context given to the model as its prompt")
    p.set_defaults(run=cmd_transcribe)

    p = sub.add_parser("convert", help="convert a CTranslate2 or Hugging Face Whisper model to GGUF")
    p.add_argument("src", help="CTranslate2 or Hugging Face model directory")
    p.add_argument("out", help="output .gguf file")
    p.add_argument("--type", choices=("f16", "q8_0"), default="q8_0", help="type of the weight matrices (default: q8_0)")
    p.set_defaults(run=cmd_convert)

    p = sub.add_parser("bench", help="time model load, first call and warm transcription of a file")
    p.add_argument("model")
    p.add_argument("file")
    p.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto", help="our backend (auto: gpu)")
    p.add_argument("--runs", type=int, default=5, help="warm runs (default: 5)")
    p.add_argument("--compare", action="store_true", help="also run transcribe.cpp (Vulkan, CPU) on the same file, each in its own process")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        from app.main import run_app

        return run_app(argv)
    try:
        return args.run(args)
    except SaysoError as error:
        print(f"sayso: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
