"""The numpy backend: every ``Backend`` method computed at once, in float32, on ``np.ndarray`` tensors.

It is the oracle that the GPU kernels are tested against, so each method is written to be
obviously what the contract in ``engine/ops.py`` says; speed comes from BLAS (``a @ w.T``), from
working on whole arrays, and from running the big operations on every core at once, never from
cleverness that would hide a mistake.

Threads: numpy's elementwise work (GELU, softmax, norms) runs on one core, and that is most of an
encoder's time. So the big operations (GEMMs with their epilogues, attention, norms, softmax, Q8_0
dequantization) split their rows into one block per core and run the blocks in a thread pool: numpy
and BLAS release the GIL while they work.
While blocks run, BLAS is limited to one thread per call (``threadpoolctl``), since the blocks already
fill the cores and two levels of threads would fight over them; a single call (a decoder step's
GEMV) keeps BLAS's own threads, which hand work out faster than a Python pool can.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from sayso.engine import onnx_graph
from sayso.engine.cpu.q8_matmul import STEP_ROWS, Q8Weight, q8_0_blocks
from sayso.engine.gguf.q8_0 import Q8_0_BLOCK, q8_0_values
from sayso.engine.ops import (TRANSDUCER_HEADER, Activation, Backend, Position, WeightSource, WhisperRules,
                              check_relative_attention)

# Chebyshev fit of erfc from Numerical Recipes (erfcc): erfc(z) = t*exp(-z*z + P(t)), t = 1/(1+z/2),
# z >= 0, fractional error < 1.2e-7. Evaluated in float64, erf = 1 - erfc is within 1e-7 everywhere.
_ERFC_COEFFS = (
    0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
    -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223,
)
# Elementwise work is done in slices that stay in cache: several times faster than whole arrays
# (docs/PERFORMANCE.md: numpy backend in blocks).
_CHUNK = 16384
_CORES = os.cpu_count() or 1
# Below this many output values a block's work is shorter than handing it to a thread.
_PARALLEL_MIN = 1 << 15
_pool: ThreadPoolExecutor | None = None
_blas: ThreadpoolController | None = None  # BLAS's own thread count, lowered while blocks run


def blas_threads(limit: int):
    """A context in which numpy's BLAS runs on at most ``limit`` threads (a process-wide setting)."""
    global _blas
    if _blas is None:
        _blas = ThreadpoolController().select(user_api="blas")
    return _blas.limit(limits=limit)


def in_blocks(extent: int, work_size: int, work: Callable[[slice], None]) -> None:
    """Call ``work(block)`` for contiguous blocks of ``range(extent)`` covering it, one per core at
    once when ``work_size`` (the values written) is worth it, else once for the whole range."""
    global _pool
    blocks = min(_CORES, extent)
    if blocks < 2 or work_size < _PARALLEL_MIN:
        work(slice(0, extent))
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(_CORES, thread_name_prefix="sayso-numpy")
    edges = [extent * i // blocks for i in range(blocks + 1)]
    with blas_threads(1):  # the blocks fill the cores: BLAS threads of their own would fight them
        for done in [_pool.submit(work, slice(a, b)) for a, b in zip(edges, edges[1:])]:
            done.result()  # re-raises a block's exception here


def dequantize(source: WeightSource) -> np.ndarray:
    """The float32 [N, K] values of a GGUF weight (F32, F16 or Q8_0 blocks)."""
    if len(source.shape) != 2:
        raise ValueError(f"{source.name}: a weight must be 2-D [N, K], got shape {source.shape}")
    n, k = source.shape
    data = np.asarray(source.data)
    if source.ggml_type in ("F32", "F16"):
        return data.astype(np.float32).reshape(n, k)
    if source.ggml_type == "Q8_0":
        blocks = q8_0_blocks(source)
        out = np.empty((n, k // Q8_0_BLOCK, Q8_0_BLOCK), np.float32)

        def rows(part: slice) -> None:  # int8 * f16 scale straight into the output: no temporaries
            q8_0_values(blocks[part], out=out[part])

        in_blocks(n, n * k, rows)  # a model's weights: far faster than whole-array passes on one core
        return out.reshape(n, k)
    raise ValueError(f"{source.name}: unsupported weight type {source.ggml_type}")


def _windows_3x3_s2(image: np.ndarray) -> np.ndarray:
    """The 3x3 patches at stride 2 of an image [H, W, C] padded by one: a view [H', W', C, 3, 3]."""
    padded = np.pad(image, ((1, 1), (1, 1), (0, 0)))
    return np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(0, 1))[::2, ::2]


def erfc_nonnegative(z: np.ndarray) -> np.ndarray:
    """erfc(z) for float32 z >= 0 (relative error < 1e-6); overwrites z to save memory traffic."""
    t = z * np.float32(0.5)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = np.full_like(t, _ERFC_COEFFS[0])
    for c in _ERFC_COEFFS[1:]:
        poly *= t
        poly += np.float32(c)
    z *= z
    poly -= z
    np.exp(poly, out=poly)
    poly *= t
    return poly


def gelu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Exact GELU ``x * Φ(x)``, Φ from erfc so that the negative tail, ``x * Φ(-|x|)``, keeps its
    precision (1 - erf(|x|) would cancel); within 1e-6 of the float64 definition for |x| <= 12."""
    flat = x.reshape(-1)
    result = np.empty_like(flat) if out is None else out.reshape(-1)
    for start in range(0, flat.size, _CHUNK):
        xc = flat[start : start + _CHUNK]
        z = np.abs(xc) * np.float32(np.sqrt(0.5))
        # erfc(9) = 4e-37: past it, x * Φ(x) would be subnormal, and one subnormal operand makes the
        # next GEMM's BLAS many times slower (docs/PERFORMANCE.md: GELU without subnormals). The values
        # kept instead are within 1e-35 of the true ones.
        np.minimum(z, np.float32(9.0), out=z)
        phi = erfc_nonnegative(z)
        phi *= np.float32(0.5)  # Φ(-|x|): Φ(x) where x < 0
        np.subtract(np.float32(1.0), phi, out=phi, where=xc >= 0)  # 1 - Φ(-x) where x >= 0
        np.multiply(xc, phi, out=result[start : start + _CHUNK])  # may overwrite x itself: read last
    return result.reshape(x.shape)


def position_value(position: int | Position) -> int:
    """An int position, or a ``Position``'s current value (its counter is a numpy array here)."""
    if isinstance(position, Position):
        return int(position.counter[0]) + position.offset
    return position


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function without overflow for large |x| (tanh form)."""
    return 0.5 * (1.0 + np.tanh(0.5 * x))


JOINT_FUNCTIONS = {
    "relu": lambda x: np.maximum(x, np.float32(0)),
    "tanh": np.tanh,
    "sigmoid": sigmoid,
}
"""A transducer joint's hidden activation by name (``engine.ops.JOINT_ACTIVATIONS``)."""


def softmax_rows(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, shifted by the row max so exp never overflows."""
    e = exp_shifted_rows(x.copy())
    e /= e.sum(axis=-1, keepdims=True)
    return e


def exp_shifted_rows(x: np.ndarray) -> np.ndarray:
    """``exp(x - rowmax(x))`` in place over the last axis: softmax's numerator, never overflowing.

    Shifted values below -80 count as -80: exp(-80) = 2e-35 is negligible beside the row's 1, and
    exp of anything lower is subnormal, which slows the BLAS product with V tenfold. Masked (-inf)
    entries therefore weigh 2e-35 rather than 0."""
    x -= x.max(axis=-1, keepdims=True)
    np.maximum(x, np.float32(-80.0), out=x)
    return np.exp(x, out=x)


def whisper_log_mel(mel: np.ndarray, frames: int) -> np.ndarray:
    """Whisper's normalised log-mel float32 [frames, n_mels] from the mel power of its first rows
    (``WhisperOps.whisper_log_mel``), in ``mel``'s precision: ``NumpyOps`` and ``whisper.frontend.LogMel``."""
    rows, n_mels = mel.shape
    log = np.log10(np.maximum(mel, 1e-10))
    top = max(float(log.max(initial=-np.inf)), -10.0 if rows < frames else -np.inf)  # silence: log10(1e-10)
    out = np.empty((frames, n_mels), np.float32)
    out[:rows] = (np.maximum(log, top - 8.0) + 4.0) / 4.0
    out[rows:] = (max(-10.0, top - 8.0) + 4.0) / 4.0
    return out


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-softmax of a 1-D array in float64 (-inf entries stay -inf, with probability 0)."""
    x = logits.astype(np.float64)
    shifted = x - x.max()
    return shifted - np.log(np.exp(shifted).sum())


def apply_activation(x: np.ndarray, act: Activation) -> np.ndarray:
    """``act(x)`` written over ``x`` itself (a GEMM block's output)."""
    if act == "gelu":
        gelu(x, out=x)
    elif act == "silu":
        x *= sigmoid(x)
    elif act == "relu":
        np.maximum(x, 0.0, out=x)
    elif act == "tanh":
        np.tanh(x, out=x)
    elif act == "square":
        np.multiply(x, x, out=x)
    elif act != "none":
        raise ValueError(f"unknown activation {act!r}")
    return x


class KvCache:
    """K and V of one attention layer, head-major: ``k``, ``v``: [H, capacity, dh].

    Values are rounded to float16 on the way in, as the GPU's f16 cache stores them, but kept in
    float32 arrays so that each step's attention reads them without converting 1500 rows again.
    Head-major, so that a decoder step attends with every head in one batched product over
    contiguous rows, faster than slicing each head's columns out of [capacity, H*dh]
    (docs/PERFORMANCE.md: numpy backend in blocks).
    """

    def __init__(self, n_heads: int, head_dim: int, capacity: int):
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.capacity = capacity
        self.k = np.zeros((n_heads, capacity, head_dim), np.float32)
        self.v = np.zeros((n_heads, capacity, head_dim), np.float32)

    def rows(self, which: np.ndarray, length: int) -> np.ndarray:
        """The first ``length`` positions of ``which`` (``k`` or ``v``) as [length, H*dh]."""
        return which[:, :length].transpose(1, 0, 2).reshape(length, -1)


@dataclass(eq=False)
class NumpyWhisperSelection:
    """Greedy selection over one window (``WhisperOps.whisper_selection``): the tokens chosen so far, their
    log-probabilities, and ``ids`` [1], the last choice, which the next step's ``embed`` reads."""

    rules: WhisperRules
    capacity: int
    ids: np.ndarray = field(default_factory=lambda: np.zeros(1, np.uint32))
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


def whisper_allowed_logits(logits: np.ndarray, rules: WhisperRules, chosen: list[int]) -> np.ndarray:
    """float64 copy of logits [n_vocab] with -inf on every token ``WhisperOps.whisper_select``'s rules
    disallow after the tokens ``chosen`` so far (OpenAI's SuppressTokens, SuppressBlank and
    ApplyTimestampRules, in their order)."""
    x = logits.astype(np.float64)
    begin = rules.timestamp_begin
    if not chosen:
        x[list(rules.begin_suppress)] = -np.inf
    x[list(rules.suppress)] = -np.inf
    if not rules.timestamps:
        x[begin:] = -np.inf
        return x
    last_was_timestamp = len(chosen) >= 1 and chosen[-1] >= begin
    penultimate_was_timestamp = len(chosen) < 2 or chosen[-2] >= begin
    if last_was_timestamp:
        if penultimate_was_timestamp:  # a pair just closed: text (or EOT) must follow
            x[begin:] = -np.inf
        else:  # a segment's end time: the next one's start time or EOT must follow
            x[: rules.eot] = -np.inf
    stamps = [t for t in chosen if t >= begin]
    if stamps:
        # never go back in time; after text the next timestamp must also move forward, so that no
        # segment is empty and decoding can't loop on one instant
        floor = stamps[-1] if last_was_timestamp and not penultimate_was_timestamp else stamps[-1] + 1
        x[begin:floor] = -np.inf
    if not chosen:  # the window opens with its first segment's start time, within the first second
        x[:begin] = -np.inf
        x[begin + rules.max_initial_timestamp + 1 :] = -np.inf
    logprobs = log_softmax(x)
    if np.logaddexp.reduce(logprobs[begin:]) > logprobs[:begin].max():
        x[:begin] = -np.inf  # the timestamps together are likelier than any text token
    return x


class NumpyOps(Backend):
    """``Ops`` and ``WhisperOps`` on numpy arrays; weights are float32 [N, K] arrays dequantized once by ``weight``.

    ``fast`` (the engine's choice) hands three things numpy does slowly to ONNX Runtime kernels: Q8_0
    weights stay in 8 bits for decoder steps (``engine.cpu.q8_matmul``; their activations are then quantized
    too), an encoder's products are its ``Gemm`` (``_frames_product``), and an encoder's attention is its
    ``MultiHeadAttention``, each faster than numpy's (docs/PERFORMANCE.md: ONNX Runtime kernels on the CPU).
    The kernel tests' oracle turns it off, so that every method stays the plain numpy written from the
    contract, with the exact float32 products the GPU computes.
    """

    name = "cpu"

    def __init__(self, fast: bool = True) -> None:
        self.fast = fast
        self._attention_sessions: dict[tuple[int, float | None], Any] = {}  # (heads, scale) -> session
        self._gemm_session = None  # ``_frames_product``'s, made on first use

    def describe(self) -> str:
        return f"numpy {np.__version__} on the CPU ({os.cpu_count()} cores)"

    # ---- data movement ------------------------------------------------------------------------

    def tensor(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, dtype=np.float32)  # a copy: the caller may reuse its array

    def ids(self, ids: np.ndarray) -> np.ndarray:
        return np.array(ids, dtype=np.uint32).reshape(-1)

    def weight(self, source: WeightSource) -> np.ndarray | Q8Weight:
        """float32, except Q8_0 when ``fast``, which stays in 8 bits (``Q8Weight``): a decoder step
        reads every weight for one row, so reading them is most of its time."""
        if self.fast and source.ggml_type == "Q8_0" and len(source.shape) == 2:
            return Q8Weight(source)
        return dequantize(source)

    def read(self, x: np.ndarray) -> np.ndarray:
        return np.array(x)  # a copy, as a GPU read-back would be

    # ---- linear algebra -----------------------------------------------------------------------

    def gemm(self, a, w, bias=None, act="none", residual=None, alpha=1.0):
        m, n = a.shape[0], w.shape[0]
        int8 = isinstance(w, Q8Weight) and m <= STEP_ROWS  # a decoder step: ONNX Runtime's int8 product
        if isinstance(w, Q8Weight) and not int8:  # an encoder's frames: BLAS, on a float32 copy kept for them
            if w.dense is None:
                w.dense = dequantize(w.source)
            w = w.dense
        frames = self.fast and not int8 and m > STEP_ROWS
        if int8:
            c = w.matmul(a)
        elif frames:
            c = self._frames_product(a, w)
        else:
            c = np.empty((m, n), np.float32)

        def block(rows: slice, cols: slice) -> None:
            out = c[rows, cols]
            if not int8 and not frames:
                np.matmul(a[rows], w[cols].T, out=out)
            if bias is not None:
                out += bias[cols]
            apply_activation(out, act)
            if residual is not None:
                out *= np.float32(alpha)
                out += residual[rows, cols]

        # Blocks of rows: an encoder's frames. A decoder step's single row stays one call, which
        # BLAS itself spreads over the cores (faster there than our blocks of the weight's rows).
        in_blocks(m, m * n, lambda rows: block(rows, slice(None)))
        return c

    def _frames_product(self, a: np.ndarray, w: np.ndarray) -> np.ndarray:
        """a [M, K] @ w.T for w [N, K] float32 and many rows (an encoder's frames), by ONNX Runtime's
        ``Gemm`` (its MLAS kernels) on every core, faster than numpy's OpenBLAS at an encoder's shapes
        (docs/PERFORMANCE.md: ONNX Runtime kernels on the CPU). One session for every weight: the weight is
        an input, packed as each product starts (K x N against the product's M x K x N)."""
        if not len(a):
            return np.empty((0, w.shape[0]), np.float32)
        if self._gemm_session is None:
            self._gemm_session = onnx_graph.session(onnx_graph.Node(
                "Gemm", ["a", "w"], {"a": ("m", "k"), "w": ("n", "k")}, weights={},
                outputs={"out": ("m", "n")}, attributes={"transB": 1},
            ), threads=_CORES)
        # Into an array of ours: ONNX Runtime's own outputs come from its arena, which grows in steps over
        # a long session (tests/e2e/test_long_use.py) where numpy's arrays stay flat.
        out = np.empty((len(a), w.shape[0]), np.float32)
        binding = self._gemm_session.io_binding()
        binding.bind_cpu_input("a", np.ascontiguousarray(a, np.float32))
        binding.bind_cpu_input("w", np.ascontiguousarray(w, np.float32))
        binding.bind_output("out", "cpu", 0, np.float32, out.shape, out.ctypes.data)
        self._gemm_session.run_with_iobinding(binding)
        return out

    def gemv(self, a, w, bias=None, act="none", residual=None, alpha=1.0, norm=None):
        if a.shape[0] != 1:
            raise ValueError(f"gemv takes one row, got a of shape {a.shape}")
        if norm is not None:
            a = self.layer_norm(a, norm.weight, norm.bias, norm.eps)
        return self.gemm(a, w, bias, act, residual, alpha)

    def add(self, x, y):
        if x.shape != y.shape:
            raise ValueError(f"add needs equal shapes, got {x.shape} and {y.shape}")
        return x + y

    # ---- embeddings -----------------------------------------------------------------------------

    def embed(self, ids, table, positions, pos0):
        pos0 = position_value(pos0)
        ids = ids.astype(np.int64)
        rows = table.rows(ids) if isinstance(table, Q8Weight) else table[ids]
        if positions is not None:
            rows = rows + positions[pos0 : pos0 + len(ids)]
        return rows.astype(np.float32)

    # ---- normalisation and activations ----------------------------------------------------------

    def layer_norm(self, x, w, b, eps=1e-5):
        y = np.empty_like(x, dtype=np.float32)

        def block(rows: slice) -> None:
            centred = x[rows] - x[rows].mean(axis=-1, keepdims=True)
            var = np.mean(centred * centred, axis=-1, keepdims=True)
            centred /= np.sqrt(var + np.float32(eps))
            if w is not None:
                centred *= w
            if b is not None:
                centred += b
            y[rows] = centred

        in_blocks(x.shape[0], x.size, block)
        return y

    def group_norm(self, x, groups, w, b, eps=1e-5):
        t, c = x.shape
        g = x.reshape(t, groups, c // groups)
        centred = g - g.mean(axis=(0, 2), keepdims=True)
        var = np.mean(centred * centred, axis=(0, 2), keepdims=True)
        y = (centred / np.sqrt(var + np.float32(eps))).reshape(t, c)
        return y * w + b

    def softmax(self, x):
        y = np.empty_like(x)

        def block(rows: slice) -> None:
            y[rows] = softmax_rows(x[rows])

        in_blocks(x.shape[0], x.size, block)
        return y

    def glu(self, x):
        d = x.shape[1] // 2
        return x[:, :d] * sigmoid(x[:, d:])

    def swiglu(self, x):
        d = x.shape[1] // 2
        gate = x[:, d:]
        return x[:, :d] * (gate * sigmoid(gate))

    # ---- convolution ------------------------------------------------------------------------------

    def im2col(self, x, kernel, stride, pad, batch=1):
        sequences = x.reshape(batch, -1, x.shape[1])
        padded = np.pad(sequences, ((0, 0), (pad, pad), (0, 0)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, kernel, axis=1)  # [B, T', C, kernel]
        windows = windows[:, ::stride]
        return np.ascontiguousarray(windows).reshape(batch * windows.shape[1], -1)  # column c*kernel + j

    def depthwise_conv(self, x, w, b, pad_left):
        t = x.shape[0]
        k = w.shape[1]
        padded = np.pad(x, ((pad_left, k - 1 - pad_left), (0, 0)))
        out = np.zeros_like(x) if b is None else np.broadcast_to(b, x.shape).astype(np.float32)
        for j in range(k):
            out += w[:, j] * padded[j : j + t]
        return out

    def im2col_3x3_s2(self, x, height, width):
        patches = _windows_3x3_s2(x.reshape(height, width, -1))  # [H', W', C, 3, 3]
        return np.ascontiguousarray(patches).reshape(patches.shape[0] * patches.shape[1], -1)

    def depthwise_3x3_s2(self, x, height, width, w, b):
        image = np.pad(x.reshape(height, width, -1), ((1, 1), (1, 1), (0, 0)))
        h_out, w_out = (height - 1) // 2 + 1, (width - 1) // 2 + 1
        out = np.broadcast_to(b, (h_out, w_out, x.shape[1])).astype(np.float32)
        for i in range(3):
            for j in range(3):
                out += image[i : i + 2 * h_out : 2, j : j + 2 * w_out : 2] * w[:, 3 * i + j]
        return out.reshape(h_out * w_out, -1)

    def channels_major(self, x, height, width, scale=1.0):
        flat = np.ascontiguousarray(x.reshape(height, width, -1).transpose(0, 2, 1)).reshape(height, -1)
        return flat * np.float32(scale) if scale != 1.0 else flat

    # ---- attention --------------------------------------------------------------------------------

    def attention(self, q, k, v, n_heads, causal=False, scale=None, batch=1):
        if batch > 1:
            if causal or q.shape[0] % batch or k.shape[0] % batch:
                raise ValueError(f"a batch of {batch} sequences of equal length attends without causal")
            tq, tk = q.shape[0] // batch, k.shape[0] // batch
            return np.concatenate([self.attention(q[b * tq:(b + 1) * tq], k[b * tk:(b + 1) * tk],
                                                  v[b * tk:(b + 1) * tk], n_heads, scale=scale)
                                   for b in range(batch)])
        if self.fast and not causal and q.shape[0] and k.shape[0]:  # an encoder's: ONNX Runtime's kernel
            run = self._attention_session(n_heads, scale).run
            return run(None, {"q": q[None], "k": k[None], "v": v[None]})[0][0]
        return self._attention(q, k, v, n_heads, scale, causal=causal)

    def relative_attention(self, q, k, v, positions, bias, n_heads, scale, window=None):
        span = check_relative_attention(q, k, v, positions, bias, n_heads)
        return self._attention(q, k, v, n_heads, scale, window=window, relative=(positions, bias, span))

    def _attention(self, q, k, v, n_heads, scale, causal=False, window=None, relative=None):
        """``attention`` of one sequence, or ``relative_attention`` where ``relative`` is its (positions,
        bias, span L) and ``window`` its (left, right), a block of query rows at a time."""
        tq, tk = q.shape[0], k.shape[0]
        dh = q.shape[1] // n_heads
        scaled = q * np.float32(1.0 / np.sqrt(dh) if scale is None else scale)
        out = np.empty((tq, n_heads * dh), np.float32)

        def block(rows: slice) -> None:  # every head for the queries ``rows``
            i = np.arange(tq)[rows, None]
            j = np.arange(tk)[None, :]
            hidden = None
            if causal:
                hidden = j > i + (tk - tq)  # query i sees keys j <= i + (tk - tq)
            elif window is not None:
                hidden = (j < i - window[0]) | (j > i + window[1])
            for h in range(n_heads):
                cols = slice(h * dh, (h + 1) * dh)
                scores = scaled[rows, cols] @ k[:, cols].T  # [rows, tk]
                if relative is not None:  # score[h, i, j] += scale * q_i·positions[r] + bias[r, h], r = (L-1) + j - i
                    positions, bias, span = relative
                    by_position = scaled[rows, cols] @ positions[:, cols].T + bias[:, h]  # [rows, 2L-1]
                    scores += np.take_along_axis(by_position, (span - 1) + j - i, axis=1)
                if hidden is not None:
                    scores[hidden] = -np.inf
                weights = exp_shifted_rows(scores)
                # normalise the [rows, dh] result rather than the [rows, tk] weights: tk/dh less work
                head = weights @ v[:, cols]
                head /= weights.sum(axis=-1, keepdims=True)
                out[rows, cols] = head

        in_blocks(tq, tq * tk * n_heads, block)
        return out

    def _attention_session(self, n_heads: int, scale: float | None):
        """ONNX Runtime's MultiHeadAttention over [1, T, H*dh] inputs, made once per heads and scale."""
        session = self._attention_sessions.get((n_heads, scale))
        if session is None:
            attributes = {"num_heads": n_heads} | ({} if scale is None else {"scale": float(scale)})
            session = onnx_graph.session(onnx_graph.Node(
                "MultiHeadAttention", ["q", "k", "v"], {"q": (1, "t", "d"), "k": (1, "s", "d"), "v": (1, "s", "d")},
                weights={}, outputs={"out": (1, "t", "d")}, attributes=attributes, domain="com.microsoft",
            ), threads=_CORES)
            self._attention_sessions[n_heads, scale] = session
        return session

    def rotary(self, x, n_heads, rot_dim, base, pos0, interleaved):
        t, width = x.shape
        heads = x.reshape(t, n_heads, width // n_heads)
        half = rot_dim // 2
        positions = np.arange(pos0, pos0 + t, dtype=np.float64)[:, None]
        angles = positions * base ** (-2.0 * np.arange(half) / rot_dim)  # [T, rot_dim/2]
        cos = np.cos(angles).astype(np.float32)[:, None, :]
        sin = np.sin(angles).astype(np.float32)[:, None, :]
        # pair i is (first[i], second[i]): dims (2i, 2i+1) interleaved, else (i, i + rot_dim/2)
        first = np.arange(0, rot_dim, 2) if interleaved else np.arange(half)
        second = first + 1 if interleaved else first + half
        x0, x1 = heads[:, :, first], heads[:, :, second]
        out = heads.copy()
        out[:, :, first] = x0 * cos - x1 * sin
        out[:, :, second] = x0 * sin + x1 * cos
        return out.reshape(t, width)

    # ---- decoding -------------------------------------------------------------------------------

    def transducer_state(self, capacity):
        state = np.zeros((1, TRANSDUCER_HEADER + 4 * capacity), np.uint32)
        state[0, 3] = 1
        return state

    def joint_hidden(self, encoder, prediction, state, activation):
        t = min(int(state[0, 0]), len(encoder) - 1)  # past the end: any row (the contract leaves it open)
        return JOINT_FUNCTIONS[activation](encoder[t : t + 1] + prediction).astype(np.float32)

    def transducer_choose(self, logits, durations, state, ids, frames, n_tokens, max_symbols):
        words = state[0]
        t, symbols, n = (int(v) for v in words[:3])
        if t >= frames:
            words[3] = 0
            return
        row = logits[0]
        token = int(np.argmax(row[:n_tokens]))
        shifted = row[:n_tokens] - row[token]
        probability = np.float32(1.0) / np.exp(shifted).sum(dtype=np.float32)
        blank = n_tokens - 1
        duration = 1 if durations is None else int(durations[int(np.argmax(row[n_tokens:]))])
        capacity = (words.size - TRANSDUCER_HEADER) // 4
        if token != blank:
            words[TRANSDUCER_HEADER + 4 * n : TRANSDUCER_HEADER + 4 * n + 4] = [
                token, t, duration, np.float32(probability).view(np.uint32)]
            n += 1
            ids[0] = token
        words[3] = token != blank
        symbols += 1
        if durations is not None:
            t += duration
            moves = duration == 0 and (token == blank or 0 < max_symbols <= symbols)
            if duration:
                symbols = 0
        else:
            moves = token == blank or 0 < max_symbols <= symbols
        if moves:
            t, symbols = t + 1, 0
        words[:3] = frames if n >= capacity else t, symbols, n

    def lstm_cell(self, gates, state, c, h, input_gates=None):
        if not state[0, 3]:
            return
        if input_gates is not None:
            gates = gates + self.embed(input_gates[1], input_gates[0], None, 0)
        i_gate, f_gate, g_gate, o_gate = np.split(gates[0], 4)
        c[0] = sigmoid(f_gate) * c[0] + sigmoid(i_gate) * np.tanh(g_gate)
        h[0] = sigmoid(o_gate) * np.tanh(c[0])

    def position(self, value):
        return Position(np.array([value], np.uint32))

    def advance(self, position, by):
        position.counter[0] += np.uint32(by)

    def kv_cache(self, n_heads, head_dim, capacity):
        return KvCache(n_heads, head_dim, capacity)

    def columns(self, x, start, stop):
        return x[:, start:stop]

    def rows(self, x, start, stop):
        return x[start:stop]

    def kv_pack(self, cache, k, v, pos0):
        pos0 = position_value(pos0)
        end = pos0 + k.shape[0]
        if end > cache.capacity:
            raise ValueError(f"KV cache holds {cache.capacity} positions, writing up to {end}")
        heads = (k.shape[0], cache.n_heads, cache.head_dim)
        cache.k[:, pos0:end] = k.astype(np.float16).reshape(heads).transpose(1, 0, 2)
        cache.v[:, pos0:end] = v.astype(np.float16).reshape(heads).transpose(1, 0, 2)

    def attend(self, q, cache, length, causal=True, scale=None):
        length = position_value(length)
        if q.shape[0] > 1:  # a prefill: the general path, on the cache's rows
            return self.attention(q, cache.rows(cache.k, length), cache.rows(cache.v, length), cache.n_heads,
                                  causal=causal, scale=scale)
        # a decoder step: one query, which sees every cached position, every head in one product
        h, dh = cache.n_heads, cache.head_dim
        q = q.reshape(h, 1, dh) * np.float32(1.0 / np.sqrt(dh) if scale is None else scale)
        weights = exp_shifted_rows(np.matmul(q, cache.k[:, :length].transpose(0, 2, 1)))  # [H, 1, length]
        heard = np.matmul(weights, cache.v[:, :length])
        heard /= weights.sum(axis=-1, keepdims=True)
        return heard.reshape(1, h * dh)

    # ---- Whisper's decoding operations (WhisperOps) ------------------------------------------------

    def whisper_log_mel(self, mel, frames):
        return whisper_log_mel(mel, frames)

    def whisper_selection(self, rules, capacity):
        return NumpyWhisperSelection(rules, capacity)

    def whisper_select(self, logits, selection):
        rules, chosen = selection.rules, selection.tokens
        if len(chosen) == selection.capacity or (chosen and chosen[-1] == rules.eot):
            selection.ids[0] = rules.eot
            return selection.ids
        allowed = whisper_allowed_logits(logits.reshape(-1), rules, chosen)
        token = int(np.argmax(allowed))  # the first index on ties
        chosen.append(token)
        selection.logprobs.append(float(log_softmax(allowed)[token]))
        selection.ids[0] = token
        return selection.ids

    def read_whisper_selection(self, selection):
        return np.array(selection.tokens, np.uint32), np.array(selection.logprobs, np.float64)
