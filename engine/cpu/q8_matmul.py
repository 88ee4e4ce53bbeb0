"""Q8_0 weights kept in 8 bits on the CPU, multiplied by ONNX Runtime's int8 kernel in decoder steps.

A decoder step reads every weight once for one row of activations, so its time is the time to read the
weights, and the file's Q8_0 blocks are about a quarter of their float32 values' bytes. ONNX Runtime's
``MatMulNBits`` (8 bits, blocks of 32, ``accuracy_level`` 4) multiplies straight from those blocks on int8
units, quantizing the activations to 8 bits per block of 32 as transcribe.cpp's CPU build does, faster than
numpy's float32 GEMV (docs/PERFORMANCE.md: Q8_0 decoder steps on the CPU). numpy has no int8 matrix product,
hence the library; it is already a dependency (the Moonshine converter reads ORT files).

An encoder multiplies the same kind of weight by 1500 rows, where a float32 product is faster than the int8
kernel (OpenBLAS's, and more so ONNX Runtime's float32 ``Gemm``, which ``NumpyOps`` uses for them;
docs/PERFORMANCE.md: Q8_0 decoder steps on the CPU): the first product with more than ``STEP_ROWS`` rows
keeps a float32 copy (``dense``) for them. Decoder weights never get one.

The session is one ``MatMulNBits`` node (``engine.onnx_graph``) given the blocks' int8 values and
scales as they are in the file. Embedding lookups read a few rows of a token table (``rows``),
dequantized as they are asked for.
"""

from __future__ import annotations

import os

import numpy as np

from sayso.engine import onnx_graph
from sayso.engine.gguf.q8_0 import Q8_0_BLOCK, Q8_0_BLOCK_BYTES, q8_0_scales, q8_0_values
from sayso.engine.ops import WeightSource

STEP_ROWS = 16  # products with at most this many rows (decoder steps, short prefills) run in int8
# Weights of fewer values run on one thread: handing a 384 x 384 product to a second one (woken for
# each call) took longer than the product itself.
PARALLEL_VALUES = 1 << 22


def q8_0_blocks(source: WeightSource) -> np.ndarray:
    """A Q8_0 weight's blocks, uint8 [N, K/32, 34] (float16 scale, then 32 int8)."""
    n, k = source.shape
    if k % Q8_0_BLOCK:
        raise ValueError(f"{source.name}: Q8_0 rows must be a multiple of 32 wide, got K={k}")
    return np.ascontiguousarray(source.data, dtype=np.uint8).reshape(n, k // Q8_0_BLOCK, Q8_0_BLOCK_BYTES)


class Q8Weight:
    """A [N, K] weight kept as its GGUF Q8_0 blocks (uint8 [N, K/32, 34]: float16 scale, 32 int8)."""

    def __init__(self, source: WeightSource):
        self.name = source.name
        self.source = source
        self.dense: np.ndarray | None = None  # float32 [N, K], made by the first product with many rows
        self.blocks = q8_0_blocks(source)
        self.shape = source.shape
        n, k = self.shape
        self.session = onnx_graph.session(onnx_graph.Node(
            "MatMulNBits", ["a", "quants", "scales"], {"a": ("m", k)},
            # int8 + 128 as uint8 (the default zero point of 8-bit MatMulNBits), in one uint8 pass
            weights={"quants": np.bitwise_xor(self.blocks[:, :, 2:], 0x80), "scales": q8_0_scales(self.blocks).reshape(-1)},
            outputs={"y": ("m", n)},
            attributes={"K": k, "N": n, "bits": 8, "block_size": Q8_0_BLOCK, "accuracy_level": 4},
            domain="com.microsoft",
        ), threads=(os.cpu_count() or 1) if n * k >= PARALLEL_VALUES else 1)

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """The float32 rows ``ids`` [T] of the weight, [T, K] (an embedding lookup)."""
        return q8_0_values(self.blocks[ids]).reshape(len(ids), self.shape[1])

    def matmul(self, a: np.ndarray) -> np.ndarray:
        """``a [M, K] @ W.T`` -> float32 [M, N], the activations quantized per block of 32."""
        return self.session.run(None, {"a": np.ascontiguousarray(a, np.float32)})[0]
