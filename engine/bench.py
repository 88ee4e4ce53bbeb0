"""Benchmarks: our engine and its peers on the same model file and audio, each in its own process.

One process per engine keeps their memory figures apart (peak RSS is per process) and stops one
engine's warm caches or thread pools from helping or hurting another. Each child prints one JSON line.

    python -m engine.bench ENGINE MODEL FILE [--runs N]      # one engine, one JSON line
    sayso bench --compare MODEL FILE [--json]               # every engine: a table and our ratios
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

SAMPLE_RATE = 16000
ENGINES = ("sayso-gpu", "sayso-cpu", "transcribe-cpp-vulkan", "transcribe-cpp-cpu")


def _open(engine: str, model: str):
    """Load ``engine`` with ``model``; returns (transcribe function, one-line description)."""
    if engine.startswith("sayso-"):
        from engine.engine import Engine

        ours = Engine(model, device=engine.removeprefix("sayso-"))
        return (lambda pcm: ours.transcribe(pcm).text), ours.describe()
    if engine.startswith("transcribe-cpp-"):
        import transcribe_cpp

        backend = engine.removeprefix("transcribe-cpp-")
        session = transcribe_cpp.Model(model, backend=backend).session()
        return (lambda pcm: session.run(pcm).text), f"transcribe.cpp {transcribe_cpp.native_version()} ({backend})"
    raise SystemExit(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")


def measure(engine: str, model: str, file: str, runs: int = 5) -> dict:
    """Load time, first call, warm median over ``runs``, realtime factor and peak RSS, in this process."""
    from engine.audio import load_audio

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


def compare(model: str, file: str, engines=ENGINES, runs: int = 5) -> list[dict]:
    """Run each engine in a child process; engines that can't run here report their error."""
    results = []
    for engine in engines:
        child = subprocess.run(
            [sys.executable, "-m", "engine.bench", engine, model, file, "--runs", str(runs)],
            capture_output=True, text=True,
        )
        lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
        if child.returncode == 0 and lines:
            results.append(json.loads(lines[-1]))
        else:
            error = (child.stderr.strip().splitlines() or ["no output"])[-1]
            results.append({"engine": engine, "error": error})
    return results


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


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.bench")
    parser.add_argument("engine", choices=ENGINES)
    parser.add_argument("model")
    parser.add_argument("file")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.engine, args.model, args.file, args.runs)))


if __name__ == "__main__":
    main()
