"""The linear kernels (gemm.wgsl, embed.wgsl, elementwise.wgsl) against the numpy backend.

Shapes are small (lavapipe is slow; docs/PERFORMANCE.md: test sizes on lavapipe) but ragged on purpose: M,
N and K off the tiles, so every bounds check and the weights' zero padding are exercised, for each weight
type. Most cases have few rows (``gemm_short``, up to 256); the 64x64 ``gemm`` and the 128x128
``gemm_large`` have their own.
The portable tiles are what these tests check, on every device; ``gemm_matrix`` (subgroup matrices,
f16 products) has its own test, with the tolerance of f16 inputs, where the fast tier runs it.
"""

from __future__ import annotations

import math

import gguf
import numpy as np
import pytest

from sayso.engine.gpu.entry_points import GEMM_MATRIX
from sayso.engine.gpu.ops import linear
from sayso.engine.gpu.ops.linear import NORM_FOLD_MAX_N
from sayso.engine.ops import RowNorm, WeightSource

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def portable_tiles(monkeypatch):
    monkeypatch.setattr(linear, "MATRIX_MIN_ROWS", 1 << 30)

ACTIVATIONS = ["none", "gelu", "silu", "relu", "tanh", "square"]
KINDS = ["F32", "F16", "Q8_0"]
# (M, N, K) off the tiles in every direction; Q8_0 rows are whole 32-value blocks.
SHAPES = {
    "F32": [(1, 5, 7), (3, 64, 32), (67, 100, 80), (3, 5, 100)],
    "F16": [(1, 5, 7), (3, 64, 32), (67, 100, 80), (3, 5, 100)],
    "Q8_0": [(1, 5, 32), (3, 64, 96), (67, 100, 160)],
}


def weight_source(w: np.ndarray, kind: str) -> WeightSource:
    """A weight as a GGUF file holds it: f32, f16, or Q8_0 blocks quantized by gguf itself."""
    if kind == "F32":
        data = w.astype(np.float32)
    elif kind == "F16":
        data = w.astype(np.float16)
    else:
        data = gguf.quants.quantize(w.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    return WeightSource(f"test.{kind}", kind, w.shape, data)


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    """f32 results that differ only in summation order: 1e-4 relative, plus an absolute floor for
    values near zero that came out of sums of large terms."""
    floor = 1e-5 * max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=floor)


def linear_case(gpu_ops, cpu_ops, shape, kind, bias, residual, seed=0):
    """Random inputs for a linear layer on both backends: (gpu args, cpu args)."""
    m, n, k = shape
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    source = weight_source(rng.standard_normal((n, k)).astype(np.float32), kind)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    r = rng.standard_normal((m, n)).astype(np.float32) if residual else None

    def on(ops, array):
        return None if array is None else ops.tensor(array)

    gpu = (gpu_ops.tensor(a), gpu_ops.weight(source), on(gpu_ops, b), on(gpu_ops, r))
    cpu = (cpu_ops.tensor(a), cpu_ops.weight(source), on(cpu_ops, b), on(cpu_ops, r))
    return gpu, cpu


@pytest.mark.parametrize("kind", KINDS)
def test_gemm_ragged_shapes(gpu_ops, cpu_ops, kind):
    for shape in SHAPES[kind]:
        (a, w, _, _), (a_cpu, w_cpu, _, _) = linear_case(gpu_ops, cpu_ops, shape, kind, False, False)
        out = gpu_ops.gemm(a, w)
        assert out.shape == shape[:2]
        assert_close(gpu_ops.read(out), cpu_ops.gemm(a_cpu, w_cpu))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_gemm_epilogue_bias_activation_residual(gpu_ops, cpu_ops, kind, act):
    shape = SHAPES[kind][2]
    (a, w, b, r), (a_cpu, w_cpu, b_cpu, r_cpu) = linear_case(gpu_ops, cpu_ops, shape, kind, True, True)
    got = gpu_ops.read(gpu_ops.gemm(a, w, b, act, r, alpha=0.5))
    assert_close(got, cpu_ops.gemm(a_cpu, w_cpu, b_cpu, act, r_cpu, alpha=0.5))


@pytest.mark.parametrize("kind", KINDS)
def test_gemm_bias_and_gelu_without_residual(gpu_ops, cpu_ops, kind):
    # The first half of an FFN: bias and activation, nothing added back.
    (a, w, b, _), (a_cpu, w_cpu, b_cpu, _) = linear_case(gpu_ops, cpu_ops, SHAPES[kind][2], kind, True, False)
    assert_close(gpu_ops.read(gpu_ops.gemm(a, w, b, "gelu")), cpu_ops.gemm(a_cpu, w_cpu, b_cpu, "gelu"))


@pytest.mark.parametrize("kind", KINDS)
def test_gemm_residual_without_bias(gpu_ops, cpu_ops, kind):
    # Attention's output projection in models without biases: c = residual + a·Wᵀ.
    (a, w, _, r), (a_cpu, w_cpu, _, r_cpu) = linear_case(gpu_ops, cpu_ops, SHAPES[kind][1], kind, False, True)
    assert_close(gpu_ops.read(gpu_ops.gemm(a, w, residual=r)), cpu_ops.gemm(a_cpu, w_cpu, residual=r_cpu))


# gemm_short with K cut into parts: few output tiles, long rows (Parakeet's FFN down-projection is 138
# x 1024 x 4096). K off the parts' whole steps: 1000 is 3 parts of 352, 352 and 296.
SPLIT_SHAPES = {"F32": (19, 100, 1000), "F16": (37, 70, 800), "Q8_0": (19, 100, 1024)}


@pytest.mark.parametrize("kind", KINDS)
def test_gemm_with_k_in_parts_adds_them_before_the_epilogue(gpu_ops, cpu_ops, kind, monkeypatch):
    (a, w, b, r), (a_cpu, w_cpu, b_cpu, r_cpu) = linear_case(gpu_ops, cpu_ops, SPLIT_SHAPES[kind], kind, True, True)
    want = cpu_ops.gemm(a_cpu, w_cpu, b_cpu, "gelu", r_cpu, alpha=0.5)
    dispatches = gpu_ops.recorder.stats["dispatches"]
    split = gpu_ops.gemm(a, w, b, "gelu", r, alpha=0.5)
    assert gpu_ops.recorder.stats["dispatches"] - dispatches == 2  # the parts, then their sum
    assert_close(gpu_ops.read(split), want)
    assert_close(gpu_ops.read(gpu_ops.gemm(a, w)), cpu_ops.gemm(a_cpu, w_cpu))  # no epilogue
    monkeypatch.setattr(linear, "SPLIT_MIN_K", 1 << 30)  # K whole, as before the parts
    dispatches = gpu_ops.recorder.stats["dispatches"]
    whole = gpu_ops.gemm(a, w, b, "gelu", r, alpha=0.5)
    assert gpu_ops.recorder.stats["dispatches"] - dispatches == 1
    assert_close(gpu_ops.read(whole), want)


# gemm's own tiles (64x64) between gemm_short's rows and gemm_large's: M off the tile, each weight type.
MIDDLE_SHAPES = {"F32": (300, 130, 98), "F16": (300, 100, 80), "Q8_0": (333, 100, 160)}


@pytest.mark.parametrize("kind", KINDS)
def test_gemm_between_the_short_and_the_large_tiles(gpu_ops, cpu_ops, kind):
    shape = MIDDLE_SHAPES[kind]
    assert linear.SHORT_TILE_MAX_ROWS < shape[0] < linear.LARGE_TILE_MIN_ROWS
    (a, w, b, r), (a_cpu, w_cpu, b_cpu, r_cpu) = linear_case(gpu_ops, cpu_ops, shape, kind, True, True)
    assert_close(gpu_ops.read(gpu_ops.gemm(a, w, b, "silu", r, alpha=0.5)),
                 cpu_ops.gemm(a_cpu, w_cpu, b_cpu, "silu", r_cpu, alpha=0.5))


# gemm_large's cases: M past LARGE_TILE_MIN_ROWS; N = 130 puts a 128-row W tile past the weights'
# 64-row padding (192), F32's K = 98 takes the scalar path of its vec4 A reads.
LARGE_SHAPES = {"F32": (1030, 130, 98), "F16": (1030, 130, 96), "Q8_0": (1100, 130, 160)}


@pytest.mark.parametrize("kind", KINDS)
def test_gemm_large_tiles_give_the_small_tiles_bits(gpu_ops, cpu_ops, kind, monkeypatch):
    (a, w, b, r), (a_cpu, w_cpu, b_cpu, r_cpu) = linear_case(gpu_ops, cpu_ops, LARGE_SHAPES[kind], kind, True, True)
    large = gpu_ops.read(gpu_ops.gemm(a, w, b, "gelu", r, alpha=0.5))
    assert_close(large, cpu_ops.gemm(a_cpu, w_cpu, b_cpu, "gelu", r_cpu, alpha=0.5))
    monkeypatch.setattr(linear, "LARGE_TILE_MIN_ROWS", 1 << 30)
    small = gpu_ops.read(gpu_ops.gemm(a, w, b, "gelu", r, alpha=0.5))
    # Both sum each output over k in the same order.
    np.testing.assert_array_equal(large, small)


def exact_activation(x: np.ndarray, act: str) -> np.ndarray:
    """The activations in float64 from their definitions (GELU through erfc, so its negative tail
    does not cancel), as the reference that the float32 kernels must approach."""
    x = x.astype(np.float64)
    if act == "gelu":
        return 0.5 * x * np.vectorize(math.erfc)(-x / math.sqrt(2.0))
    if act == "silu":
        return x / (1.0 + np.exp(-x))
    if act == "relu":
        return np.maximum(x, 0.0)
    if act == "tanh":
        return np.tanh(x)
    if act == "square":
        return x * x
    return x


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_activations_are_accurate_over_their_range(gpu_ops, act):
    # Through a 1x1 identity weight the GEMM returns act(x) itself, so the tails of GELU (erf
    # approximated in WGSL) and tanh (clamped) are compared value by value, not lost in a sum.
    x = np.linspace(-12.0, 12.0, 193, dtype=np.float32)[:, None]
    identity = gpu_ops.weight(WeightSource("identity", "F32", (1, 1), np.ones((1, 1), np.float32)))
    got = gpu_ops.read(gpu_ops.gemm(gpu_ops.tensor(x), identity, act=act))
    np.testing.assert_allclose(got, exact_activation(x, act), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("kind", KINDS)
def test_gemv_ragged_shapes(gpu_ops, cpu_ops, kind):
    # K past 256 so that each of a row's 32 threads takes more than one step, and past 2048 so that
    # they take two rounds of four steps and then single steps up to a ragged end.
    ks = [7, 100, 600, 2100] if kind != "Q8_0" else [32, 96, 608, 2336]
    for n, k in zip([5, 64, 100, 37], ks):
        (a, w, _, _), (a_cpu, w_cpu, _, _) = linear_case(gpu_ops, cpu_ops, (1, n, k), kind, False, False)
        out = gpu_ops.gemv(a, w)
        assert out.shape == (1, n)
        assert_close(gpu_ops.read(out), cpu_ops.gemv(a_cpu, w_cpu))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_gemv_epilogue_bias_activation_residual(gpu_ops, cpu_ops, kind, act):
    shape = (1, 100, 160)
    (a, w, b, r), (a_cpu, w_cpu, b_cpu, r_cpu) = linear_case(gpu_ops, cpu_ops, shape, kind, True, True)
    got = gpu_ops.read(gpu_ops.gemv(a, w, b, act, r, alpha=0.5))
    assert_close(got, cpu_ops.gemv(a_cpu, w_cpu, b_cpu, act, r_cpu, alpha=0.5))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("n", "k", "norm_bias"),
                         [(100, 160, True), (100, 1280, True), (100, 96, False), (NORM_FOLD_MAX_N + 8, 64, True)])
def test_gemv_with_its_row_normalised_first(gpu_ops, cpu_ops, kind, n, k, norm_bias):
    """A decoder step's LayerNorm folded into the product (with and without the norm's bias; K past
    the 1024 values one pass of the workgroup's threads reads; so many outputs that the row is
    normalised once beforehand) equals the norm, then the product."""
    (a, w, b, r), (a_cpu, w_cpu, b_cpu, r_cpu) = linear_case(gpu_ops, cpu_ops, (1, n, k), kind, True, True)
    rng = np.random.default_rng(k)
    a_values = cpu_ops.read(a_cpu) * 3.0 + 1.5  # off-centre and wide, so the norm matters
    gain = rng.standard_normal(k).astype(np.float32)
    shift = rng.standard_normal(k).astype(np.float32) if norm_bias else None

    def norm(ops):
        return RowNorm(ops.tensor(gain), None if shift is None else ops.tensor(shift), 1e-5)

    got = gpu_ops.read(gpu_ops.gemv(gpu_ops.tensor(a_values), w, b, "gelu", r, alpha=0.5, norm=norm(gpu_ops)))
    assert_close(got, cpu_ops.gemv(cpu_ops.tensor(a_values), w_cpu, b_cpu, "gelu", r_cpu, alpha=0.5, norm=norm(cpu_ops)))


def test_linear_rejects_mismatched_shapes(gpu_ops):
    a = gpu_ops.tensor(np.zeros((3, 7), np.float32))
    w = gpu_ops.weight(weight_source(np.zeros((5, 7), np.float32), "F32"))
    with pytest.raises(ValueError, match="does not fit"):
        gpu_ops.gemm(gpu_ops.tensor(np.zeros((3, 8), np.float32)), w)
    with pytest.raises(ValueError, match="bias"):
        gpu_ops.gemm(a, w, bias=gpu_ops.tensor(np.zeros(4, np.float32)))
    with pytest.raises(ValueError, match="residual"):
        gpu_ops.gemm(a, w, residual=gpu_ops.tensor(np.zeros((3, 4), np.float32)))
    with pytest.raises(ValueError, match="one row"):
        gpu_ops.gemv(a, w)


def test_add(gpu_ops, cpu_ops):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 67, 33)).astype(np.float32)
    got = gpu_ops.read(gpu_ops.add(gpu_ops.tensor(x), gpu_ops.tensor(y)))
    np.testing.assert_array_equal(got, cpu_ops.add(x, y))


@pytest.mark.parametrize("kind", KINDS)
def test_embed_with_and_without_positions(gpu_ops, cpu_ops, kind):
    rng = np.random.default_rng(2)
    vocab, width = 50, 64 if kind == "Q8_0" else 40
    source = weight_source(rng.standard_normal((vocab, width)).astype(np.float32), kind)
    positions = rng.standard_normal((20, width)).astype(np.float32)
    ids = np.array([0, 49, 7, 7, 31], np.uint32)
    table, table_cpu = gpu_ops.weight(source), cpu_ops.weight(source)
    for pos, pos0 in [(positions, 0), (positions, 15), (None, 0)]:
        got = gpu_ops.read(gpu_ops.embed(gpu_ops.ids(ids), table, None if pos is None else gpu_ops.tensor(pos), pos0))
        want = cpu_ops.embed(cpu_ops.ids(ids), table_cpu, pos, pos0)
        np.testing.assert_array_equal(got, want)  # one addition per value: no rounding to differ


def test_embed_at_a_position_on_the_backend(gpu_ops, cpu_ops):
    """pos0 read from a counter (``Ops.position``) gives what the int gives; rows past the table get
    no position row (only a counter, which the host can't check, reaches them)."""
    rng = np.random.default_rng(5)
    source = weight_source(rng.standard_normal((50, 40)).astype(np.float32), "F16")
    positions = rng.standard_normal((20, 40)).astype(np.float32)
    ids = np.array([4, 9, 2], np.uint32)
    table, table_cpu = gpu_ops.weight(source), cpu_ops.weight(source)
    at = gpu_ops.position(12)
    got = gpu_ops.read(gpu_ops.embed(gpu_ops.ids(ids), table, gpu_ops.tensor(positions), at + 3))
    np.testing.assert_array_equal(got, cpu_ops.embed(ids, table_cpu, positions, 15))
    gpu_ops.advance(at, 6)  # rows 18..20: the last is past the table
    got = gpu_ops.read(gpu_ops.embed(gpu_ops.ids(ids), table, gpu_ops.tensor(positions), at))
    np.testing.assert_array_equal(got[:2], cpu_ops.embed(ids[:2], table_cpu, positions, 18))
    np.testing.assert_array_equal(got[2], cpu_ops.embed(ids[2:], table_cpu, None, 0)[0])


def test_embed_rejects_positions_too_short(gpu_ops):
    source = weight_source(np.zeros((10, 8), np.float32), "F32")
    with pytest.raises(ValueError, match="positions"):
        gpu_ops.embed(gpu_ops.ids(np.arange(4)), gpu_ops.weight(source), gpu_ops.tensor(np.zeros((5, 8))), 2)


def test_repeated_decoder_step_creates_no_new_bind_groups(gpu_ops):
    # A decoder step's sequence (embed, GEMV with epilogues, add, GEMM) run again must
    # reuse every bind group: the pool hands back the same buffers in the same order.
    rng = np.random.default_rng(5)
    table = gpu_ops.weight(weight_source(rng.standard_normal((40, 64)).astype(np.float32), "Q8_0"))
    w1 = gpu_ops.weight(weight_source(rng.standard_normal((96, 64)).astype(np.float32), "F16"))
    w2 = gpu_ops.weight(weight_source(rng.standard_normal((64, 96)).astype(np.float32), "Q8_0"))
    b1 = gpu_ops.tensor(rng.standard_normal(96).astype(np.float32))
    positions = gpu_ops.tensor(rng.standard_normal((8, 64)).astype(np.float32))
    ids = gpu_ops.ids(np.array([3], np.uint32))

    def step():
        x = gpu_ops.embed(ids, table, positions, 2)
        h = gpu_ops.gemv(x, w1, b1, "gelu")
        x = gpu_ops.add(gpu_ops.gemv(h, w2, residual=x, alpha=0.5), x)
        return gpu_ops.read(gpu_ops.gemm(x, table))

    first = step()
    created = gpu_ops.recorder.stats["bind_groups_created"]
    np.testing.assert_array_equal(step(), first)
    assert gpu_ops.recorder.stats["bind_groups_created"] == created, "the pool handed out buffers in another order"


@pytest.mark.parametrize("kind", ["F32", "F16", "Q8_0"])
def test_a_weight_uploaded_a_few_rows_at_a_time_is_the_same_weight(gpu_ops, monkeypatch, kind):
    """A weight is copied a chunk of rows at a time (``UPLOAD_CHUNK``); with chunks of a row or
    two, a weight whose rows and columns both need padding gives the same product as in one piece."""
    from sayso.engine.gpu import tensors

    rng = np.random.default_rng(3)
    k = 96 if kind == "Q8_0" else 100  # Q8_0 rows are whole blocks of 32; the others get padded
    a = gpu_ops.tensor(rng.standard_normal((3, k)).astype(np.float32))
    source = weight_source(rng.standard_normal((67, k)).astype(np.float32), kind)
    whole = gpu_ops.read(gpu_ops.gemm(a, gpu_ops.weight(source)))
    monkeypatch.setattr(tensors, "UPLOAD_CHUNK", 200)
    np.testing.assert_array_equal(gpu_ops.read(gpu_ops.gemm(a, gpu_ops.weight(source))), whole)


def test_weights_and_constants_made_while_loading_are_whole_when_it_ends(gpu_ops):
    """Inside ``loading`` weights are copied on threads and constants gathered (``ModelUpload``);
    once it ends they give the products that weights and tensors made one at a time give, and a
    kernel run before then is refused with a message rather than bound to a half-made buffer."""
    rng = np.random.default_rng(4)
    sources = [weight_source(rng.standard_normal((67, 96)).astype(np.float32), kind) for kind in KINDS]
    bias = rng.standard_normal(67).astype(np.float32)
    a = gpu_ops.tensor(rng.standard_normal((3, 96)).astype(np.float32))
    alone = [gpu_ops.read(gpu_ops.gemm(a, gpu_ops.weight(s), gpu_ops.tensor(bias))) for s in sources]
    with gpu_ops.loading():
        loaded = [(gpu_ops.weight(s), gpu_ops.tensor(bias)) for s in sources]
        with pytest.raises(RuntimeError, match="while a model loads"):
            gpu_ops.gemm(a, *loaded[0])
    for (weight, b), expected in zip(loaded, alone):
        np.testing.assert_array_equal(gpu_ops.read(gpu_ops.gemm(a, weight, b)), expected)


MATRIX_SHAPES = [(1, 5, 32), (67, 100, 160), (129, 300, 96), (300, 129, 64)]
"""(M, N, K) inside one 128x128 tile, and past it in rows and in columns."""


@pytest.mark.parametrize("kind", KINDS)
def test_gemm_on_subgroup_matrices_with_its_epilogue(gpu_ops, cpu_ops, kind, monkeypatch):
    if not gpu_ops.fast.is_on(GEMM_MATRIX):  # lavapipe: test_entry_points checks that it is refused there
        pytest.skip(f"no subgroup matrices on this device: {gpu_ops.fast.verdicts[GEMM_MATRIX.name]}")
    monkeypatch.setattr(linear, "MATRIX_MIN_ROWS", 1)
    for shape in MATRIX_SHAPES:
        (a, w, b, r), (a_cpu, w_cpu, b_cpu, r_cpu) = linear_case(gpu_ops, cpu_ops, shape, kind, True, True)
        got = gpu_ops.read(gpu_ops.gemm(a, w, b, "gelu", r, alpha=0.5))
        want = cpu_ops.gemm(a_cpu, w_cpu, b_cpu, "gelu", r_cpu, alpha=0.5)
        # a and W are rounded to f16 (relative error up to 2^-11 each) before their products, which sum
        # in f32: with unit inputs each of the K terms is off by about 1e-3, their sum by 1e-3 * sqrt(K).
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=6e-3 * np.sqrt(shape[2]))
