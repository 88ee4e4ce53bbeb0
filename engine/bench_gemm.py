"""The encoders' GEMMs alone: TFLOP/s of each tier at the models' shapes, and the error against numpy.

    python -m sayso.engine.bench_gemm [--reps N] [--types Q8_0 F16]

One line per shape, weight type and tier: ``portable`` (the FMA tiles of gemm.wgsl) and, where this
device's fast tier has subgroup matrices (Dawn, ``SAYSO_WEBGPU``), ``matrix`` (gemm_matrix.wgsl). The
time is the GPU's, from timestamps around each of ``reps`` products after one warm-up
(``engine.gpu.profile``), as ``sayso bench --kernels`` gives it within a model.
"""

from __future__ import annotations

import argparse

import gguf
import numpy as np

from sayso.engine.ops import WeightSource

SHAPES = {
    "whisper-large-v3-turbo ffn up": (1500, 1280, 5120),
    "whisper-large-v3-turbo ffn down": (1500, 5120, 1280),
    "whisper-large-v3-turbo attention out": (1500, 1280, 1280),
    "whisper-base ffn up": (1500, 512, 2048),
    "parakeet 11 s ffn up": (138, 1024, 4096),
    "parakeet 60 s ffn up": (750, 1024, 4096),
}
"""Name -> (M rows of activations, K, N outputs)."""


def weight(w: np.ndarray, kind: str) -> WeightSource:
    data = w.astype(np.float16) if kind == "F16" else gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
    return WeightSource(f"bench.{kind}", kind, w.shape, data)


def measure(ops, linear, tier: str, m: int, k: int, n: int, kind: str, reps: int) -> tuple[float, float]:
    """(TFLOP/s, largest error relative to the largest value) of ``tier``'s a[m, k] · W[n, k]ᵀ."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    source = weight(w, kind)
    want = a @ dequantized(source).T
    a_gpu, w_gpu = ops.tensor(a), ops.weight(source)
    rows = linear.MATRIX_MIN_ROWS
    linear.MATRIX_MIN_ROWS = 1 if tier == "matrix" else 1 << 30
    try:
        got = ops.read(ops.gemm(a_gpu, w_gpu))
        timer = ops.recorder.time_kernels()
        try:
            for _ in range(reps):  # each output freed at once: the pool hands its buffer to the next
                out = ops.gemm(a_gpu, w_gpu)
            ops.read(out)
        finally:
            ops.recorder.stop_timing()
        seconds = timer.busy_ms / 1e3 / reps
    finally:
        linear.MATRIX_MIN_ROWS = rows
    error = float(np.abs(got - want).max() / np.abs(want).max())
    return 2 * m * n * k / seconds / 1e12, error


def dequantized(source: WeightSource) -> np.ndarray:
    if source.ggml_type == "F16":
        return source.data.astype(np.float32)
    return gguf.quants.dequantize(source.data, gguf.GGMLQuantizationType.Q8_0).reshape(source.shape)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sayso.engine.bench_gemm")
    parser.add_argument("--reps", type=int, default=20, choices=range(1, 1001), metavar="1..1000")
    parser.add_argument("--types", nargs="+", default=["Q8_0", "F16"], choices=["Q8_0", "F16"])
    args = parser.parse_args()
    from sayso.engine.gpu import GpuOps
    from sayso.engine.gpu.entry_points import GEMM_MATRIX
    from sayso.engine.gpu.ops import linear

    ops = GpuOps()
    ops.fast.probe()
    print(ops.describe())
    tiers = ["portable"] + (["matrix"] if ops.fast.is_on(GEMM_MATRIX) else [])
    for name, (m, k, n) in SHAPES.items():
        for kind in args.types:
            for tier in tiers:
                tflops, error = measure(ops, linear, tier, m, k, n, kind, args.reps)
                print(f"{name:38s} {m:5d} x {k:5d} -> {n:5d} {kind:5s} {tier:9s} {tflops:7.1f} TFLOP/s  "
                      f"error {error:.1e}", flush=True)


if __name__ == "__main__":
    main()
