"""Benchmarks: our engine and its peers on the same model file and audio, each in its own process.

One process per engine keeps their memory figures apart (peak RSS is per process) and stops one
engine's warm caches or thread pools from helping or hurting another. Each child prints one JSON line.

    python -m engine.bench ENGINE MODEL FILE [--runs N]      # one engine, one JSON line
    sayso bench --compare MODEL FILE [--json]               # every engine: a table and our ratios
    sayso bench --stream MODEL FILE [--device cpu]          # a dictation: key-up to text, streamed vs not
    sayso bench --kernels MODEL FILE                        # GPU time per kernel, and what the host adds
    sayso bench --folder DIR MODEL [--batch N]              # hours of audio per hour, batched and file by file
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from sayso.engine import reference
from sayso.engine.errors import SaysoError
from sayso.engine.stream import FEED_SECONDS

SAMPLE_RATE = 16000
ENGINES = ("sayso-gpu", "sayso-cpu", "transcribe-cpp-vulkan", "transcribe-cpp-cpu", "faster-whisper-cpu")


def _open(engine: str, model: str):
    """Load ``engine`` with ``model``; returns (transcribe function, one-line description)."""
    if engine.startswith("sayso-"):
        from sayso.engine.engine import Engine

        ours = Engine(model, device=engine.removeprefix("sayso-"))
        return (lambda pcm: ours.transcribe(pcm).text), ours.describe()
    if engine.startswith("transcribe-cpp-"):
        import transcribe_cpp

        backend = engine.removeprefix("transcribe-cpp-")
        peer = transcribe_cpp.Model(model, backend=backend)
        session, options = peer.session(), reference.run_options(peer)  # the decoding ours does
        description = f"transcribe.cpp {transcribe_cpp.native_version()} ({backend})"
        return (lambda pcm: session.run(pcm, **options).text), description
    if engine == "faster-whisper-cpu":
        return _open_faster_whisper(model)
    raise SystemExit(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")


def _open_faster_whisper(model: str):
    """faster-whisper (CTranslate2, float32 on every core) on the CTranslate2 files that the GGUF
    ``model`` was converted from: its ``stt.variant`` names them in ``engine.models.PYPI_MODELS``.
    Greedy, with timestamps and without VAD, as our engine decodes."""
    import os

    import ctranslate2
    from faster_whisper import WhisperModel

    from sayso.engine.gguf.reader import ModelFile
    from sayso.engine.files import cache_dir
    from sayso.engine.models import PYPI_MODELS

    variant = str(ModelFile(model).metadata.get("stt.variant", ""))
    if not variant.startswith("whisper") or variant not in PYPI_MODELS:
        raise SystemExit(f"faster-whisper runs Whisper's CTranslate2 files; none are known for {variant or model!r}")
    source = PYPI_MODELS[variant](cache_dir() / "ct2" / variant, None)
    peer = WhisperModel(str(source), device="cpu", compute_type="float32", cpu_threads=os.cpu_count() or 1)

    def transcribe(pcm):
        segments, _ = peer.transcribe(pcm, language="en", beam_size=1, temperature=0.0, vad_filter=False)
        return "".join(segment.text for segment in segments).strip()

    return transcribe, f"faster-whisper on CTranslate2 {ctranslate2.__version__} (float32, {variant})"


def measure(engine: str, model: str, file: str, runs: int = 5) -> dict:
    """Load time, first call, warm median over ``runs``, realtime factor and peak RSS, in this process."""
    from sayso.engine.audio import load_audio

    pcm = load_audio(file)
    start = time.perf_counter()
    transcribe, description = _open(engine, model)
    load_ms = (time.perf_counter() - start) * 1000
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        text = transcribe(pcm)
        times.append((time.perf_counter() - start) * 1000)
    warm_ms = sorted(times[1:])[len(times[1:]) // 2]
    audio_s = len(pcm) / SAMPLE_RATE
    return {
        "engine": engine,
        "description": description,
        "load_ms": round(load_ms, 1),
        "first_ms": round(times[0], 1),
        "warm_ms": round(warm_ms, 1),
        "realtime": round(audio_s * 1000 / warm_ms, 1),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "audio_s": round(audio_s, 2),
        "text": text,
    }


def measure_stream(model: str, file: str, device: str = "cpu", chunk_seconds: float = FEED_SECONDS,
                   runs: int = 3) -> dict:
    """FILE dictated in real time: chunks fed to a stream session as a microphone would deliver them
    (each once the wall clock has reached its end), then ``finish`` at the moment the last chunk was
    due, the key-up. ``finish_ms``: key-up to final text. ``offline_ms``: the warm median over ``runs``
    of transcribing the same audio at once, what the key-up would cost without streaming."""
    from sayso.engine.audio import load_audio
    from sayso.engine.engine import Engine

    pcm = load_audio(file)
    engine = Engine(model, device=device)
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        offline = engine.transcribe(pcm)
        times.append((time.perf_counter() - start) * 1000)
    offline_ms = sorted(times[1:])[len(times[1:]) // 2]

    session = engine.stream()
    step = max(1, int(chunk_seconds * SAMPLE_RATE))
    partials: list[tuple[float, str]] = []
    begin = time.perf_counter()
    for start in range(0, len(pcm), step):
        chunk = pcm[start : start + step]
        time.sleep(max(0.0, begin + (start + len(chunk)) / SAMPLE_RATE - time.perf_counter()))
        text = session.feed(chunk)
        if text and (not partials or partials[-1][1] != text):
            partials.append((round(time.perf_counter() - begin, 2), text))
    key_up = begin + len(pcm) / SAMPLE_RATE
    streamed = session.finish()
    finish_ms = (time.perf_counter() - key_up) * 1000
    return {
        "description": engine.describe(),
        "audio_s": round(len(pcm) / SAMPLE_RATE, 2),
        "chunk_s": chunk_seconds,
        "finish_ms": round(finish_ms, 1),
        "offline_ms": round(offline_ms, 1),
        "ratio": round(finish_ms / offline_ms, 3),
        "equal": streamed == offline,
        "partials": partials,
        "final_text": streamed.text,
        "offline_text": offline.text,
    }


def measure_kernels(model: str, file: str) -> dict:
    """Where one warm GPU transcription of FILE spends its time: every kernel's dispatches and GPU time
    (``engine.gpu.profile``) and their sum, ``busy_ms``, beside a normal warm run's wall time,
    ``warm_ms``; ``host_ms``, their difference, is Python, the driver and waiting on read-backs, and
    ``host_ms_per_token`` that over the tokens emitted."""
    from sayso.engine.audio import load_audio
    from sayso.engine.engine import Engine

    pcm = load_audio(file)
    engine = Engine(model, device="gpu")
    engine.transcribe(pcm)  # builds the pipelines and fills the buffer pool
    start = time.perf_counter()
    transcript = engine.transcribe(pcm)
    warm_ms = (time.perf_counter() - start) * 1000
    text, tokens = transcript.text, sum(len(segment.tokens) for segment in transcript.segments)
    timer = engine.ops.recorder.time_kernels()
    start = time.perf_counter()
    profiled_text = engine.transcribe(pcm).text
    profiled_ms = (time.perf_counter() - start) * 1000
    engine.ops.recorder.stop_timing()
    return {
        "description": engine.describe(),
        "warm_ms": round(warm_ms, 1),
        "busy_ms": round(timer.busy_ms, 1),
        "host_ms": round(warm_ms - timer.busy_ms, 1),
        "tokens": tokens,
        # A transducer's search is host work per emitted token: most of what the host adds there.
        "host_ms_per_token": round((warm_ms - timer.busy_ms) / max(1, tokens), 3),
        "profiled_ms": round(profiled_ms, 1),
        "dispatches": sum(k.calls for k in timer.kernels.values()),
        "kernels": {label: {"calls": k.calls, "ms": round(k.ns / 1e6, 3)} for label, k in timer.kernels.items()},
        "table": timer.table(),
        "text": text,
        "same_text": profiled_text == text,  # timing must change nothing but the time
    }


def measure_folder(engine: str, model: str, folder: str, batch: int = 1, runs: int = 3) -> dict:
    """Hours of audio transcribed per hour of wall time for the media files of ``folder``, in this
    process: the model loaded and warmed on the first file, then the median of ``runs`` passes over
    the whole folder, decoding the files included. Ours runs ``Engine.transcribe_many`` with ``batch``
    windows per encoder pass (1: file by file); a peer runs file by file. ``texts``: each file's text,
    to compare runs by."""
    from pathlib import Path

    from sayso.engine.audio import MEDIA_SUFFIXES, duration, load_audio

    files = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in MEDIA_SUFFIXES and p.is_file())
    if not files:
        raise SystemExit(f"no audio or video files in {folder}")
    start = time.perf_counter()
    if engine.startswith("sayso-"):
        from sayso.engine.engine import Engine

        ours = Engine(model, device=engine.removeprefix("sayso-"))
        description = ours.describe()

        def transcribe_all(paths):
            return [_text(outcome) for _, outcome in ours.transcribe_many(paths, batch=batch)]
    else:
        transcribe, description = _open(engine, model)

        def transcribe_all(paths):
            return [transcribe(load_audio(path)) for path in paths]
    load_ms = (time.perf_counter() - start) * 1000
    transcribe_all(files[:1])
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        texts = transcribe_all(files)
        times.append(time.perf_counter() - start)
    wall_s = sorted(times)[len(times) // 2]
    audio_s = sum(duration(path) for path in files)
    return {
        "engine": engine,
        "batch": batch if engine.startswith("sayso-") else 1,
        "description": description,
        "files": len(files),
        "audio_s": round(audio_s, 2),
        "load_ms": round(load_ms, 1),
        "wall_s": round(wall_s, 3),
        "hours_per_hour": round(audio_s / wall_s, 2),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "texts": texts,
    }


def _text(outcome) -> str:
    """A transcript's text; a file that failed (``AudioError``) stops the measure, which would time less audio."""
    if isinstance(outcome, Exception):
        raise outcome
    return outcome.text


def compare(model: str, file: str, engines=ENGINES, runs: int = 5) -> list[dict]:
    """Run each engine in a child process; engines that can't run here report their error."""
    model = _model_file(model)
    return [_child(engine, [engine, model, file, "--runs", str(runs)]) for engine in engines]


def compare_folder(model: str, folder: str, device: str, batch: int, runs: int = 3) -> list[dict]:
    """``measure_folder`` in a child process each: our engine on ``device`` batched and file by file, and
    transcribe.cpp file by file on the same device kind (Vulkan for a GPU)."""
    ours, peer = f"sayso-{device}", "transcribe-cpp-vulkan" if device == "gpu" else "transcribe-cpp-cpu"
    model = _model_file(model)
    passes = [(ours, batch), (ours, 1), (peer, 1)]
    return [_child(engine, [engine, model, folder, "--folder", "--batch", str(n), "--runs", str(runs)])
            for engine, n in passes]


def _model_file(model: str) -> str:
    """The GGUF file of a model name (``whisper-tiny.en``) or path, as ``sayso transcribe`` finds it: the
    peers take a file's path, and one engine converting a PyPI model while the next waits would be timed."""
    from sayso.engine.models import resolve

    return str(resolve(model))


def _child(engine: str, arguments: list[str]) -> dict:
    """``python -m sayso.engine.bench ARGUMENTS``' JSON line, or the error that stopped it."""
    child = subprocess.run([sys.executable, "-m", "sayso.engine.bench", *arguments], capture_output=True, text=True)
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    if child.returncode == 0 and lines:
        return json.loads(lines[-1])
    return {"engine": engine, "error": (child.stderr.strip().splitlines() or ["no output"])[-1]}


def table(results: list[dict], ours: str) -> str:
    """A text table of ``results`` with each peer's warm time divided into ``ours``'s."""
    base = next((r for r in results if r["engine"] == ours and "error" not in r), None)
    rows = [f"{'engine':<24}{'load ms':>10}{'first ms':>10}{'warm ms':>10}{'x realtime':>11}{'peak MB':>9}{'ours/peer':>10}"]
    for r in results:
        if "error" in r:
            rows.append(f"{r['engine']:<24}  not run: {r['error']}")
            continue
        ratio = f"{base['warm_ms'] / r['warm_ms']:.2f}" if base else "-"
        rows.append(f"{r['engine']:<24}{r['load_ms']:>10.1f}{r['first_ms']:>10.1f}{r['warm_ms']:>10.1f}"
                    f"{r['realtime']:>11.1f}{r['peak_mb']:>9.0f}{ratio:>10}")
    return "\n".join(rows)


def folder_table(results: list[dict]) -> str:
    """A text table of ``compare_folder``'s results: hours of audio per hour of wall time, each run's
    against the first's (our batched run), and whether its texts are the first's."""
    base = next((r for r in results if "error" not in r), None)
    rows = [f"{'engine':<24}{'batch':>6}{'files':>6}{'audio s':>9}{'wall s':>9}{'audio h/h':>10}{'first/this':>11}"
            f"{'same text':>10}"]
    for r in results:
        if "error" in r:
            rows.append(f"{r['engine']:<24}  not run: {r['error']}")
            continue
        rows.append(f"{r['engine']:<24}{r['batch']:>6}{r['files']:>6}{r['audio_s']:>9.1f}{r['wall_s']:>9.2f}"
                    f"{r['hours_per_hour']:>10.2f}{base['hours_per_hour'] / r['hours_per_hour']:>11.2f}"
                    f"{str(r['texts'] == base['texts']):>10}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.bench")
    parser.add_argument("engine", choices=ENGINES)
    parser.add_argument("model")
    parser.add_argument("file", help="an audio file, or with --folder a folder of them")
    parser.add_argument("--runs", type=int, default=5, help="warm runs (with --folder: passes over the folder)")
    parser.add_argument("--folder", action="store_true", help="FILE is a folder: measure_folder")
    parser.add_argument("--batch", type=int, default=1, help="with --folder: windows per encoder pass (ours)")
    args = parser.parse_args()
    try:
        if args.folder:
            print(json.dumps(measure_folder(args.engine, args.model, args.file, args.batch, args.runs)))
        else:
            print(json.dumps(measure(args.engine, args.model, args.file, args.runs)))
    except SaysoError as error:  # the parent shows the last line of stderr: the error, not a traceback's end
        raise SystemExit(str(error)) from None


if __name__ == "__main__":
    main()
