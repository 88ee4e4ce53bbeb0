"""NumpyOps against naive loops written straight from the docstrings of engine/ops.py.

The numpy backend is the oracle of the GPU kernel tests, so here it is checked against the plainest
possible code: Python loops over indices, math.erf, and gguf's own Q8_0 quantizer.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

from sayso.engine.cpu.ops import NumpyOps, dequantize
from sayso.engine.cpu.q8_matmul import STEP_ROWS, Q8Weight
from sayso.engine.ops import WeightSource

ops = NumpyOps()
rng = np.random.default_rng(1234)


def randn(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def naive_gelu(x: float) -> float:
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def test_weight_dequantizes_q8_0_f16_f32_like_gguf():
    values = randn(8, 64)
    blocks = gguf_quantize(values, GGMLQuantizationType.Q8_0)  # uint8 [8, 64/32*34]
    q8 = dequantize(WeightSource("w", "Q8_0", (8, 64), blocks))
    np.testing.assert_array_equal(q8, gguf_dequantize(blocks, GGMLQuantizationType.Q8_0))
    assert q8.dtype == np.float32 and np.abs(q8 - values).max() < 0.02
    np.testing.assert_array_equal(ops.weight(WeightSource("w", "F16", (8, 64), values.astype(np.float16))),
                                  values.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(ops.weight(WeightSource("w", "F32", (8, 64), values)), values)


def test_q8_0_weight_stays_in_8_bits_for_decoder_steps():
    """A Q8_0 weight stays Q8_0: its rows (an embedding lookup) are gguf's dequantized rows exactly;
    products with up to STEP_ROWS rows quantize the activations to 8 bits per block of 32 (as
    transcribe.cpp's CPU build does) and are within that rounding of the exact product; longer
    ones (an encoder's) are float32 products on a dequantized copy."""
    n, k = 40, 96
    blocks = gguf_quantize(randn(n, k), GGMLQuantizationType.Q8_0)
    table = ops.weight(WeightSource("token_embd", "Q8_0", (n, k), blocks))
    assert isinstance(table, Q8Weight) and table.shape == (n, k) and table.dense is None
    dense = gguf_dequantize(blocks, GGMLQuantizationType.Q8_0).astype(np.float64)
    ids = np.array([0, 7, n - 1], np.uint32)
    np.testing.assert_array_equal(ops.embed(ids, table, None, 0), dense[ids].astype(np.float32))

    a, bias, residual = randn(2, k), randn(n), randn(2, n)
    got = ops.gemm(a, table, bias, "none", residual, alpha=0.5)
    want = residual + 0.5 * (a @ dense.T + bias)
    # each activation moves by at most half a step of its block's scale, max|block| / 127
    half_step = (np.abs(a).reshape(2, k // 32, 32).max(axis=-1) / 127 / 2).repeat(32, axis=-1)
    bound = 0.5 * half_step @ np.abs(dense).T + 1e-4
    assert (np.abs(got - want) <= bound).all()
    assert np.abs(got - want).max() > 1e-6  # quantized indeed: the float32 product would be closer
    np.testing.assert_array_equal(ops.gemv(a[:1], table), ops.gemm(a[:1], table))
    assert table.dense is None

    frames = randn(STEP_ROWS + 1, k)
    np.testing.assert_allclose(ops.gemm(frames, table), frames @ dense.T, rtol=1e-5, atol=1e-5)
    assert table.dense is not None


@pytest.mark.parametrize(("tq", "tk", "heads", "head_dim", "scale"), [(150, 150, 6, 64, None), (7, 33, 3, 36, 0.3)])
def test_fast_attention_is_the_plain_one(tq, tk, heads, head_dim, scale):
    """An encoder's attention on ONNX Runtime's MultiHeadAttention (``fast``) gives what the plain
    numpy loops over heads give, to float32 rounding; masked or relative attention stays in numpy."""
    q, k, v = randn(tq, heads * head_dim), randn(tk, heads * head_dim), randn(tk, heads * head_dim)
    plain = NumpyOps(fast=False).attention(q, k, v, heads, scale=scale)
    np.testing.assert_allclose(ops.attention(q, k, v, heads, scale=scale), plain, rtol=1e-5, atol=1e-5)
    assert ops._attention_sessions  # the fast path was taken


def test_gelu_is_exact_erf_form():
    x = np.linspace(-12, 12, 20001, dtype=np.float32)
    got = ops.gemm(x[:, None], np.ones((1, 1), np.float32), act="gelu")[:, 0]
    want = np.array([naive_gelu(float(v)) for v in x])
    assert (np.abs(got - want) <= 1e-6 * np.maximum(1.0, np.abs(want))).all()


@pytest.mark.parametrize("act", ["none", "gelu", "silu", "relu", "tanh"])
def test_gemm_and_gemv_epilogues(act):
    functions = {"none": lambda v: v, "gelu": naive_gelu, "silu": lambda v: v / (1 + math.exp(-v)),
                 "relu": lambda v: max(v, 0.0), "tanh": math.tanh}
    a, w, bias, residual = randn(5, 7), randn(3, 7), randn(3), randn(5, 3)
    want = np.zeros((5, 3))
    for m in range(5):
        for n in range(3):
            dot = sum(float(a[m, k]) * float(w[n, k]) for k in range(7)) + float(bias[n])
            want[m, n] = residual[m, n] + 0.5 * functions[act](dot)
    np.testing.assert_allclose(ops.gemm(a, w, bias, act, residual, alpha=0.5), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ops.gemv(a[:1], w, bias, act, residual[:1], alpha=0.5), want[:1], rtol=1e-5, atol=1e-5)


def test_embed_adds_positions_at_pos0():
    table, positions = randn(10, 4), randn(8, 4)
    out = ops.embed(ops.ids(np.array([3, 0, 9])), table, positions, pos0=2)
    want = np.stack([table[3] + positions[2], table[0] + positions[3], table[9] + positions[4]])
    np.testing.assert_array_equal(out, want)


def test_norms_softmax_and_gates():
    x, w, b = randn(6, 8), randn(8), randn(8)
    for row in range(6):
        mean = sum(x[row]) / 8
        var = sum((v - mean) ** 2 for v in x[row]) / 8
        want = [(x[row, d] - mean) / math.sqrt(var + 1e-5) * w[d] + b[d] for d in range(8)]
        np.testing.assert_allclose(ops.layer_norm(x, w, b)[row], want, rtol=1e-5, atol=1e-5)

    out = ops.group_norm(x, 2, w, b)
    for g in range(2):
        cols = range(g * 4, g * 4 + 4)
        values = [x[t, c] for t in range(6) for c in cols]
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / len(values)
        for t in range(6):
            for c in cols:
                assert out[t, c] == pytest.approx((x[t, c] - mean) / math.sqrt(var + 1e-5) * w[c] + b[c], abs=1e-5)

    big = x * 100  # exp would overflow without the max shift
    soft = ops.softmax(big)
    assert np.isfinite(soft).all()
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(ops.glu(x), x[:, :4] / (1 + np.exp(-x[:, 4:])), rtol=1e-5)
    np.testing.assert_allclose(ops.swiglu(x), x[:, :4] * x[:, 4:] / (1 + np.exp(-x[:, 4:])), rtol=1e-5)


@pytest.mark.parametrize("stride", [1, 2])
def test_im2col_gemm_is_conv1d(stride):
    t, c_in, c_out, k, pad = 9, 3, 4, 3, 1
    x, w, bias = randn(t, c_in), randn(c_out, c_in, k), randn(c_out)
    got = ops.gemm(ops.im2col(x, k, stride, pad), w.reshape(c_out, c_in * k), bias)
    t_out = (t + 2 * pad - k) // stride + 1
    assert got.shape == (t_out, c_out)
    for to in range(t_out):
        for o in range(c_out):
            acc = float(bias[o])
            for ci in range(c_in):
                for j in range(k):
                    src = to * stride + j - pad
                    if 0 <= src < t:
                        acc += float(w[o, ci, j]) * float(x[src, ci])
            assert got[to, o] == pytest.approx(acc, abs=1e-5)


@pytest.mark.parametrize("pad_left", [1, 2])  # 'same' and causal for k = 3
def test_depthwise_conv(pad_left):
    x, w, b = randn(7, 3), randn(3, 3), randn(3)
    out = ops.depthwise_conv(x, w, b, pad_left)
    for t in range(7):
        for c in range(3):
            want = b[c] + sum(w[c, j] * x[t + j - pad_left, c] for j in range(3) if 0 <= t + j - pad_left < 7)
            assert out[t, c] == pytest.approx(want, abs=1e-5)


def naive_attention(q, k, v, n_heads, causal, rel=None, window=None):
    """rel[h, i, r]: added to score (i, j) at r = (L-1) + j - i, L = (rel.shape[2] + 1) / 2."""
    tq, tk, dh = q.shape[0], k.shape[0], q.shape[1] // n_heads
    center = tq - 1 if rel is None else (rel.shape[2] - 1) // 2
    out = np.zeros(q.shape)
    for h in range(n_heads):
        cols = slice(h * dh, (h + 1) * dh)
        for i in range(tq):
            visible = [j for j in range(tk) if (not causal or j <= i + (tk - tq))
                       and (window is None or i - window[0] <= j <= i + window[1])]
            scores = []
            for j in visible:
                s = float(np.dot(q[i, cols].astype(np.float64), k[j, cols])) / math.sqrt(dh)
                if rel is not None:
                    s += rel[h, i, center + j - i]
                scores.append(s)
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            total = sum(weights)
            for weight, j in zip(weights, visible):
                out[i, cols] += weight / total * v[j, cols]
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_attention_is_the_naive_one(causal):
    tq, tk, heads = 3, 5, 2
    q, k, v = randn(tq, 8), randn(tk, 8), randn(tk, 8)
    np.testing.assert_allclose(ops.attention(q, k, v, heads, causal=causal), naive_attention(q, k, v, heads, causal),
                               atol=1e-5)


@pytest.mark.parametrize("window", [None, (1, 2)])
def test_relative_attention_adds_each_query_s_position_term(window):
    """rel[h, i, r] = (q_i·positions[r]) * scale + bias[r, h] (head h's columns), read at r = (L-1) + j - i
    of tables made for L = T + 3, keys outside the window left out."""
    t, span, heads, dh = 6, 9, 2, 4
    scale = 1 / math.sqrt(dh)
    q, k, v = randn(t, heads * dh), randn(t, heads * dh), randn(t, heads * dh)
    positions, bias = randn(2 * span - 1, heads * dh), randn(2 * span - 1, heads)
    rel = np.stack([q[:, h * dh:(h + 1) * dh] @ positions[:, h * dh:(h + 1) * dh].T * scale + bias[:, h]
                    for h in range(heads)])
    np.testing.assert_allclose(ops.relative_attention(q, k, v, positions, bias, heads, scale, window),
                               naive_attention(q, k, v, heads, False, rel, window), atol=1e-5)


def test_kv_cache_prefill_then_step_stores_float16():
    heads, dh = 2, 4
    cache = ops.kv_cache(heads, dh, capacity=6)
    k, v, q = randn(5, 8) * 3, randn(5, 8) * 3, randn(5, 8)
    ops.kv_pack(cache, k[:4], v[:4], 0)  # a 4-token prefill ...
    ops.kv_pack(cache, k[4:], v[4:], 4)  # ... then one step
    k16, v16 = k.astype(np.float16).astype(np.float32), v.astype(np.float16).astype(np.float32)
    prefill = naive_attention(q[:4], k16[:4], v16[:4], heads, True)
    np.testing.assert_allclose(ops.attend(q[:4], cache, 4, causal=True), prefill, atol=1e-5)
    step = naive_attention(q[4:], k16, v16, heads, False)
    np.testing.assert_allclose(ops.attend(q[4:], cache, 5), step, atol=1e-5)
    cross = naive_attention(q, k16, v16, heads, False)
    np.testing.assert_allclose(ops.attend(q, cache, 5, causal=False), cross, atol=1e-5)
    with pytest.raises(ValueError):
        ops.kv_pack(cache, k[:2], v[:2], 5)


@pytest.mark.parametrize("interleaved", [True, False])
def test_rotary(interleaved):
    t, heads, dh, rot_dim, base, pos0 = 3, 2, 6, 4, 100.0, 5
    x = randn(t, heads * dh)
    out = ops.rotary(x, heads, rot_dim, base, pos0, interleaved)
    for row in range(t):
        for h in range(heads):
            head = x[row, h * dh : (h + 1) * dh].astype(np.float64)
            want = head.copy()
            for i in range(rot_dim // 2):
                a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + rot_dim // 2)
                angle = (pos0 + row) * base ** (-2 * i / rot_dim)
                want[a] = head[a] * math.cos(angle) - head[b] * math.sin(angle)
                want[b] = head[a] * math.sin(angle) + head[b] * math.cos(angle)
            np.testing.assert_allclose(out[row, h * dh : (h + 1) * dh], want, atol=1e-5)


def test_read_copies():
    x = np.array([[1.0, 3.0, 3.0], [7.0, 7.0, 0.0]], np.float32)
    copy = ops.read(x)
    copy[0, 0] = 99
    assert x[0, 0] == 1.0
