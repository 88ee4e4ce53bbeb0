"""The attention kernels (shaders/attention.wgsl, shaders/kv_cache.wgsl) against the numpy backend.

Sizes are small (lavapipe is slow) but each case crosses a boundary the kernels care about: more
than one block of 16 query rows or 32 keys in flash attention, more than one block of 64 keys in
``attend``, head sizes 36 / 52 / 64 / 128 and an odd one (33), causal offsets Tk - Tq != 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from sayso.engine.gpu.entry_points import KV_ATTEND, KV_ATTEND_SUBGROUP
from sayso.engine.gpu.ops import attention

pytestmark = pytest.mark.gpu

EXACT = dict(rtol=1e-4, atol=1e-5)  # f32 throughout
F16_CACHE = dict(rtol=2e-3, atol=2e-3)  # K and V stored as f16
TIERS = dict(rtol=1e-5, atol=1e-6)  # the same f16 cache through both tiers: sums in another order


def random(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def both(gpu_ops, cpu_ops, method, *arrays, **kwargs):
    """Run ``method`` on both backends with the same float32 inputs; return (gpu, cpu) results."""
    gpu = getattr(gpu_ops, method)(*(gpu_ops.tensor(a) for a in arrays), **kwargs)
    cpu = getattr(cpu_ops, method)(*(cpu_ops.tensor(a) for a in arrays), **kwargs)
    return gpu_ops.read(gpu), cpu


@pytest.mark.parametrize(
    ("tq", "tk", "heads", "head_dim", "causal"),
    [
        (1, 1, 2, 64, False),
        (5, 5, 3, 36, True),
        (3, 70, 4, 64, True),  # causal offset Tk - Tq = 67, three key blocks
        (3, 70, 4, 36, False),
        (20, 33, 2, 52, True),  # two query blocks, a partial key block
        (6, 40, 6, 128, False),  # the largest head (smaller key blocks where workgroup memory is 32 KiB)
        (70, 100, 2, 64, False),  # attention_tiled.wgsl: several query blocks, a partial key block
        (33, 65, 3, 52, False),  # attention_tiled.wgsl with quads left idle (13 of 16)
        (7, 45, 3, 33, True),  # odd head: heads start off 16-byte boundaries, the last quad is partial
    ],
)
def test_attention_matches_numpy(gpu_ops, cpu_ops, tq, tk, heads, head_dim, causal):
    rng = np.random.default_rng(tq * 1000 + tk)
    q, k, v = random(rng, tq, heads * head_dim), random(rng, tk, heads * head_dim), random(rng, tk, heads * head_dim)
    gpu, cpu = both(gpu_ops, cpu_ops, "attention", q, k, v, n_heads=heads, causal=causal)
    np.testing.assert_allclose(gpu, cpu, **EXACT)


@pytest.mark.parametrize(
    ("tq", "tk", "heads", "head_dim", "batch"),
    [
        (70, 70, 2, 64, 3),  # attention_tiled.wgsl
        (33, 45, 3, 52, 2),
        (20, 33, 2, 128, 3),  # attention.wgsl: a head wider than the tiled kernel's
        (7, 45, 3, 33, 2),  # attention.wgsl, an odd head
    ],
)
def test_attention_of_a_batch_keeps_each_sequence_to_its_own_keys(gpu_ops, cpu_ops, tq, tk, heads, head_dim, batch):
    """A batched encoder pass: one dispatch for every window, as each window alone."""
    rng = np.random.default_rng(batch * 100 + tq)
    width = heads * head_dim
    q, k, v = random(rng, batch * tq, width), random(rng, batch * tk, width), random(rng, batch * tk, width)
    gpu, cpu = both(gpu_ops, cpu_ops, "attention", q, k, v, n_heads=heads, batch=batch)
    for b in range(batch):
        alone = cpu_ops.attention(q[b * tq:(b + 1) * tq], k[b * tk:(b + 1) * tk], v[b * tk:(b + 1) * tk], heads)
        np.testing.assert_array_equal(cpu[b * tq:(b + 1) * tq], alone)
        np.testing.assert_allclose(gpu[b * tq:(b + 1) * tq], alone, **EXACT)


def test_attention_scale_is_applied(gpu_ops, cpu_ops):
    rng = np.random.default_rng(3)
    q, k, v = random(rng, 4, 2 * 36), random(rng, 7, 2 * 36), random(rng, 7, 2 * 36)
    gpu, cpu = both(gpu_ops, cpu_ops, "attention", q, k, v, n_heads=2, scale=0.9)
    np.testing.assert_allclose(gpu, cpu, **EXACT)


FAST_ENCODER_ATTENTION = """
import json
import numpy as np
from sayso.engine.cpu.ops import NumpyOps
from sayso.engine.gpu import GpuOps
from sayso.engine.gpu.entry_points import ATTENTION_TILED_SUBGROUP
ops, oracle = GpuOps(), NumpyOps(fast=False)
found = {"on": ops.fast.is_on(ATTENTION_TILED_SUBGROUP), "cases": []}
for tq, tk, heads, head_dim, batch in json.loads(CASES):
    rng = np.random.default_rng(tq * 1000 + tk)
    q, k, v = (rng.standard_normal((batch * t, heads * head_dim)).astype(np.float32) for t in (tq, tk, tk))
    got = ops.read(ops.attention(ops.tensor(q), ops.tensor(k), ops.tensor(v), heads, batch=batch))
    want = oracle.attention(oracle.tensor(q), oracle.tensor(k), oracle.tensor(v), heads, batch=batch)
    found["cases"].append([bool(np.allclose(got, want, rtol=1e-4, atol=1e-5)), float(np.max(np.abs(got - want)))])
found["head_dims"] = sorted(dict(key[2]).get("HEAD_DIM", 0) for key in ops.kernels.pipelines
                            if key[:2] == (ATTENTION_TILED_SUBGROUP.file, ATTENTION_TILED_SUBGROUP.entry))
print(json.dumps(found))
"""


def test_the_fast_encoder_attention_matches_numpy():
    """attention_tiled_subgroup.wgsl needs subgroups of 16 lanes or more. Lavapipe's are 8 wide unless
    its vectors are 512 bits (``LP_NATIVE_VECTOR_WIDTH``, read when the driver loads), so the kernel
    runs in a process of its own: more than one block of 64 query rows, partial key blocks, quads left
    idle, a batch, and the largest head that fits lavapipe's 32 KiB of workgroup memory."""
    cases = [(1, 1, 2, 16, 1), (70, 100, 2, 32, 1), (130, 45, 3, 20, 2), (64, 64, 1, 32, 3), (33, 65, 2, 28, 1)]
    code = f"CASES = {json.dumps(json.dumps(cases))}\n" + FAST_ENCODER_ATTENTION
    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, "LP_NATIVE_VECTOR_WIDTH": "512"},
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.splitlines()[-1])
    assert found["on"], "the fast encoder attention did not pass its probe"
    assert found["head_dims"] == [0, 16, 20, 28, 32], "the fast kernel did not run every case"  # 0: the probe's
    for case, (close, error) in zip(cases, found["cases"]):
        assert close, (case, error)


def pack_both(gpu_ops, cpu_ops, caches, pos0, rows, rng):
    """Write the same random K and V rows at ``pos0`` into the (gpu, cpu) caches."""
    width = caches[1].n_heads * caches[1].head_dim
    k, v = random(rng, rows, width), random(rng, rows, width)
    gpu_ops.kv_pack(caches[0], gpu_ops.tensor(k), gpu_ops.tensor(v), pos0)
    cpu_ops.kv_pack(caches[1], cpu_ops.tensor(k), cpu_ops.tensor(v), pos0)


def fill_caches(gpu_ops, cpu_ops, heads, head_dim, capacity, chunks, rng):
    """One cache per backend, written chunk by chunk: ``chunks`` lists (pos0, rows)."""
    caches = gpu_ops.kv_cache(heads, head_dim, capacity), cpu_ops.kv_cache(heads, head_dim, capacity)
    for pos0, rows in chunks:
        pack_both(gpu_ops, cpu_ops, caches, pos0, rows, rng)
    return caches


def attend_both(gpu_ops, cpu_ops, caches, q, length, causal, scale=None):
    gpu = gpu_ops.read(gpu_ops.attend(gpu_ops.tensor(q), caches[0], length, causal=causal, scale=scale))
    cpu = cpu_ops.attend(cpu_ops.tensor(q), caches[1], length, causal=causal, scale=scale)
    return gpu, cpu


@pytest.mark.parametrize("head_dim", [36, 64])
def test_decoder_steps_in_a_partly_filled_cache(gpu_ops, cpu_ops, head_dim):
    """A prompt of 5, then one step at a time: each step packs at pos0 > 0 and attends to length <
    capacity, so stale zeros past ``length`` must not count."""
    rng = np.random.default_rng(head_dim)
    heads, capacity = 3, 16
    caches = fill_caches(gpu_ops, cpu_ops, heads, head_dim, capacity, [(0, 5)], rng)
    for pos in range(5, 8):
        pack_both(gpu_ops, cpu_ops, caches, pos, 1, rng)
        q = random(rng, 1, heads * head_dim)
        gpu, cpu = attend_both(gpu_ops, cpu_ops, caches, q, pos + 1, causal=True)
        np.testing.assert_allclose(gpu, cpu, **F16_CACHE)


def test_prefill_is_causal_in_the_cache(gpu_ops, cpu_ops):
    """Tq = 4 new rows after 2 cached ones: row i sees positions 0 .. 2 + i."""
    rng = np.random.default_rng(11)
    heads, head_dim = 4, 64
    caches = fill_caches(gpu_ops, cpu_ops, heads, head_dim, 10, [(0, 2), (2, 4)], rng)
    q = random(rng, 4, heads * head_dim)
    gpu, cpu = attend_both(gpu_ops, cpu_ops, caches, q, 6, causal=True)
    np.testing.assert_allclose(gpu, cpu, **F16_CACHE)


@pytest.mark.parametrize("rows, length", [(3, 3), (1, 70)])  # a prefill in one key block; a step over two
def test_pack_and_attend_read_columns_of_a_stacked_projection(gpu_ops, cpu_ops, rows, length):
    """q, k, v as ``columns`` of one [T, 3*H*dh] tensor (a stacked q/k/v projection) give what the
    same rows as tensors of their own give, on both backends."""
    rng = np.random.default_rng(rows)
    heads, head_dim = 2, 36
    width = heads * head_dim
    caches = fill_caches(gpu_ops, cpu_ops, heads, head_dim, 80, [(0, length - rows)] if length > rows else [], rng)
    qkv = random(rng, rows, 3 * width)
    for ops, cache in zip((gpu_ops, cpu_ops), caches):
        stacked = ops.tensor(qkv)
        k, v = ops.columns(stacked, width, 2 * width), ops.columns(stacked, 2 * width, 3 * width)
        ops.kv_pack(cache, k, v, length - rows)
    gpu = gpu_ops.read(gpu_ops.attend(gpu_ops.columns(gpu_ops.tensor(qkv), 0, width), caches[0], length))
    cpu = cpu_ops.attend(cpu_ops.columns(cpu_ops.tensor(qkv), 0, width), caches[1], length)
    np.testing.assert_allclose(gpu, cpu, **F16_CACHE)
    alone = gpu_ops.tensor(np.ascontiguousarray(qkv[:, :width]))
    np.testing.assert_array_equal(gpu, gpu_ops.read(gpu_ops.attend(alone, caches[0], length)))


def test_a_step_packs_and_attends_in_one_dispatch(gpu_ops, cpu_ops):
    """A one-row pack waits for the attend that reads it (one dispatch: kv_cache.wgsl's attend packs
    it); a second pack before that attend records the first, so both rows are there."""
    rng = np.random.default_rng(9)
    heads, head_dim = 2, 64
    caches = fill_caches(gpu_ops, cpu_ops, heads, head_dim, 16, [(0, 4)], rng)
    q = random(rng, 1, heads * head_dim)
    pack_both(gpu_ops, cpu_ops, caches, 4, 1, rng)
    before = gpu_ops.recorder.stats["dispatches"]
    gpu, cpu = attend_both(gpu_ops, cpu_ops, caches, q, 5, causal=True)
    assert gpu_ops.recorder.stats["dispatches"] - before == 2  # attend and the read's submission mark
    np.testing.assert_allclose(gpu, cpu, **F16_CACHE)
    pack_both(gpu_ops, cpu_ops, caches, 5, 1, rng)
    pack_both(gpu_ops, cpu_ops, caches, 6, 1, rng)
    gpu, cpu = attend_both(gpu_ops, cpu_ops, caches, q, 7, causal=True)
    np.testing.assert_allclose(gpu, cpu, **F16_CACHE)


def test_columns_outside_the_tensor_are_refused(gpu_ops):
    with pytest.raises(ValueError, match="not within"):
        gpu_ops.columns(gpu_ops.tensor(np.zeros((2, 6), np.float32)), 4, 8)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the oracle's NaN rows
def test_causal_rows_that_see_nothing_get_zeros(gpu_ops, cpu_ops):
    """Tq = 5 rows over 3 positions: rows 0 and 1 see none (the numpy oracle leaves them undefined,
    NaN), and one key block writes out directly."""
    rng = np.random.default_rng(5)
    heads, head_dim = 2, 64
    caches = fill_caches(gpu_ops, cpu_ops, heads, head_dim, 8, [(0, 3)], rng)
    q = random(rng, 5, heads * head_dim)
    gpu, cpu = attend_both(gpu_ops, cpu_ops, caches, q, 3, causal=True)
    np.testing.assert_array_equal(gpu[:2], 0.0)
    np.testing.assert_allclose(gpu[2:], cpu[2:], **F16_CACHE)


@pytest.mark.parametrize(("tq", "length", "causal"), [(1, 150, True), (2, 150, False), (3, 130, True)])
def test_attend_over_several_key_blocks(gpu_ops, cpu_ops, tq, length, causal):
    """Lengths over 2 x 64 keys: partials of several blocks (some empty for causal rows) merge in combine."""
    rng = np.random.default_rng(length + tq)
    heads, head_dim = 6, 64
    caches = fill_caches(gpu_ops, cpu_ops, heads, head_dim, 160, [(0, length)], rng)
    q = random(rng, tq, heads * head_dim)
    gpu, cpu = attend_both(gpu_ops, cpu_ops, caches, q, length, causal=causal, scale=0.2)
    np.testing.assert_allclose(gpu, cpu, **F16_CACHE)


@pytest.mark.parametrize("head_dim", [52, 33, 128])
def test_cache_with_other_head_sizes(gpu_ops, cpu_ops, head_dim):
    """52 (Moonshine base, 26 pairs), an odd 33, whose last pair has an empty high half, and 128,
    whose 64 pairs take every thread of a key block."""
    rng = np.random.default_rng(head_dim)
    heads = 2
    caches = fill_caches(gpu_ops, cpu_ops, heads, head_dim, 70, [(0, 40), (40, 27)], rng)
    q = random(rng, 2, heads * head_dim)
    gpu, cpu = attend_both(gpu_ops, cpu_ops, caches, q, 67, causal=False)
    np.testing.assert_allclose(gpu, cpu, **F16_CACHE)


def test_kv_pack_rejects_rows_past_capacity(gpu_ops):
    cache = gpu_ops.kv_cache(2, 8, 4)
    rows = gpu_ops.tensor(np.zeros((3, 16), np.float32))
    with pytest.raises(ValueError, match="do not fit"):
        gpu_ops.kv_pack(cache, rows, rows, 2)


@pytest.mark.parametrize("head_dim", [36, 64])
def test_a_position_on_the_backend_gives_what_an_int_gives(gpu_ops, cpu_ops, head_dim):
    """A decoder whose position is a counter on the GPU (``Ops.position``): a causal prefill of 60
    rows packed and attended at the counter, then steps on past 64 and 128 keys, where one workgroup
    per head walks the keys a block at a time (kv_cache.wgsl); numpy is given the ints."""
    rng = np.random.default_rng(head_dim)
    heads, capacity, prompt = 3, 140, 60
    width = heads * head_dim
    caches = gpu_ops.kv_cache(heads, head_dim, capacity), cpu_ops.kv_cache(heads, head_dim, capacity)
    at = gpu_ops.position(0)
    for pos0, rows in [(0, prompt), *((p, 1) for p in range(prompt, capacity))]:
        k, v, q = random(rng, rows, width), random(rng, rows, width), random(rng, rows, width)
        gpu_ops.kv_pack(caches[0], gpu_ops.tensor(k), gpu_ops.tensor(v), at)
        cpu_ops.kv_pack(caches[1], k, v, pos0)
        gpu = gpu_ops.read(gpu_ops.attend(gpu_ops.tensor(q), caches[0], at + rows, causal=True))
        gpu_ops.advance(at, rows)
        cpu = cpu_ops.attend(q, caches[1], pos0 + rows, causal=True)
        np.testing.assert_allclose(gpu, cpu, **F16_CACHE, err_msg=f"rows {pos0}..{pos0 + rows - 1}")
    assert gpu_ops.read(at.counter)[0] == capacity


def test_rows_past_the_capacity_at_a_position_are_not_written(gpu_ops, cpu_ops):
    """A counter can point past the cache, which the host can't check when recording: the kernels
    write nothing there, and what the cache held stays."""
    rng = np.random.default_rng(1)
    caches = fill_caches(gpu_ops, cpu_ops, 2, 8, 4, [(0, 4)], rng)
    at = gpu_ops.position(3)
    rows, row = gpu_ops.tensor(random(rng, 2, 16)), gpu_ops.tensor(random(rng, 1, 16))
    gpu_ops.kv_pack(caches[0], rows, rows, at + 1)  # positions 4 and 5
    gpu_ops.kv_pack(caches[0], row, row, at + 1)  # one row at 4, which the attend packs
    gpu_ops.attend(row, caches[0], at + 2)
    q = random(rng, 1, 16)
    gpu, cpu = attend_both(gpu_ops, cpu_ops, caches, q, 3, causal=False)  # rows 0..2 as they were
    np.testing.assert_allclose(gpu, cpu, **F16_CACHE)


def attend_three_ways(gpu_ops, portable_ops, cpu_ops, heads, head_dim, length, q, causal, rng):
    """``attend`` over ``length`` random cached rows: on the fast tier and the portable one, each at an
    int length (key blocks, then combine) and at a position on the backend (one workgroup walking the
    keys a chunk at a time), and on numpy."""
    width = heads * head_dim
    k, v = random(rng, length, width), random(rng, length, width)
    results = []
    for ops in (gpu_ops, portable_ops):
        for length_of in (lambda n: n, lambda n: ops.position(0) + n):
            cache = ops.kv_cache(heads, head_dim, length + 2)
            ops.kv_pack(cache, ops.tensor(k), ops.tensor(v), 0)
            results.append(ops.read(ops.attend(ops.tensor(q), cache, length_of(length), causal=causal, scale=0.3)))
    cache = cpu_ops.kv_cache(heads, head_dim, length + 2)
    cpu_ops.kv_pack(cache, k, v, 0)
    return results, cpu_ops.attend(q, cache, length, causal=causal, scale=0.3)


@pytest.mark.parametrize("threads", KV_ATTEND_SUBGROUP.probe_sizes)
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "all"])
@pytest.mark.parametrize(("length", "tq"), [(1, 1), (5, 1), (5, 3), (64, 1), (64, 2), (200, 1), (200, 3)])
@pytest.mark.parametrize(("heads", "head_dim"), [(1, 64), (3, 33), (2, 128)])
def test_the_fast_attend_gives_the_portable_and_numpy_results(gpu_ops, portable_ops, cpu_ops, monkeypatch, heads,
                                                              head_dim, length, tq, causal, threads):
    """attend's subgroup version (reduce_subgroup.wgsl's maximum and sum) against its portable version
    (reduce_workgroup.wgsl's) and numpy, at each workgroup size it runs with: decoder steps and prefill
    rows, one key or part of a block, a whole block and several."""
    assert attention.KEY_BLOCK in KV_ATTEND_SUBGROUP.probe_sizes  # the size attend runs with is probed
    monkeypatch.setattr(attention, "KEY_BLOCK", threads)
    rng = np.random.default_rng(length * 10 + tq)
    q = random(rng, tq, heads * head_dim)
    (fast, fast_walked, portable, portable_walked), cpu = attend_three_ways(
        gpu_ops, portable_ops, cpu_ops, heads, head_dim, length, q, causal, rng)
    assert gpu_ops.fast.version(KV_ATTEND) is KV_ATTEND_SUBGROUP and portable_ops.fast.version(KV_ATTEND) is KV_ATTEND
    np.testing.assert_allclose(fast, portable, **TIERS)
    np.testing.assert_allclose(fast_walked, portable_walked, **TIERS)
    for result in (fast, fast_walked):
        np.testing.assert_allclose(result, cpu, **F16_CACHE)


def test_a_fast_attend_with_a_broken_subgroup_sum_is_caught(gpu_ops, portable_ops, cpu_ops, monkeypatch):
    """The comparison above fails where the subgroup reduction is wrong: with reduce_subgroup.wgsl's
    sum missing its subgroupAdd (each subgroup's first lane standing for it), the weights no longer
    sum to their total. The probe checks the subgroups' layout, not the sums, so that version runs."""
    from sayso.engine.gpu import GpuOps, kernels

    source = kernels.module_source
    monkeypatch.setattr(kernels, "module_source", lambda module: source(module).replace("subgroupAdd(value)", "value"))
    broken = GpuOps(gpu_ops.device)
    rng = np.random.default_rng(3)
    q = random(rng, 1, 2 * 64)
    (fast, fast_walked, portable, _), cpu = attend_three_ways(broken, portable_ops, cpu_ops, 2, 64, 100, q, False, rng)
    assert broken.fast.version(KV_ATTEND) is KV_ATTEND_SUBGROUP
    np.testing.assert_allclose(portable, cpu, **F16_CACHE)
    for result in (fast, fast_walked):
        assert not np.allclose(result, portable, **TIERS)


def relative_inputs(rng, t, heads, head_dim, span):
    """q, k, v, positions and bias as ``RelPositionAttention`` gives them, the tables made for ``span``
    (L >= t) positions: positions [2L-1, H*dh], bias [2L-1, H]."""
    width = heads * head_dim
    q, k, v = random(rng, t, width), random(rng, t, width), random(rng, t, width)
    return q, k, v, random(rng, 2 * span - 1, width), random(rng, 2 * span - 1, heads)


@pytest.mark.parametrize(
    ("t", "heads", "head_dim", "window", "span"),
    [
        (1, 2, 8, None, 1),
        (7, 2, 8, None, 7),
        (7, 2, 8, None, 64),  # tables made for a longer sequence: the middle rows are read
        (33, 3, 16, None, 33),  # three query blocks, a partial key block
        (33, 4, 16, (5, 5), 40),
        (70, 4, 16, (4, 2), 70),  # rows 48..63 see no key of the first block, rows 0..15 none of the last
        (70, 2, 8, (0, 40), 128),  # rows past 29 see no key of the first block, 30..33 some of the second only
        (70, 2, 8, (300, 300), 70),  # a window wider than the sequence: full attention
        (9, 3, 33, None, 9),  # odd head: heads start off 16-byte boundaries
        (20, 2, 128, (3, 6), 21),  # the largest head: key blocks of 8 where workgroup memory is 32 KiB
    ],
)
def test_relative_attention_matches_numpy(gpu_ops, cpu_ops, t, heads, head_dim, window, span):
    """Parakeet's self-attention in one dispatch, the position term inside the walk over the keys, against
    the numpy backend; with a local window, whole blocks of keys of a row are masked or skipped."""
    rng = np.random.default_rng(t * 100 + head_dim + span)
    inputs = relative_inputs(rng, t, heads, head_dim, span)
    gpu, cpu = both(gpu_ops, cpu_ops, "relative_attention", *inputs, n_heads=heads, scale=1 / np.sqrt(head_dim),
                    window=window)
    np.testing.assert_allclose(gpu, cpu, **EXACT)


def test_relative_attention_reads_position_row_l_minus_1_plus_j_minus_i(gpu_ops, cpu_ops):
    """Each score takes position row (L-1) + j - i of tables made for L = 45 > T: with q·k = 0, a large
    bias at j - i = +1 makes head 0's row i the next value row, a large q·P at j - i = -1 makes head 1's
    the previous one, and an asymmetric window (2 back, 0 ahead) averages rows i-2..i. A sign or a row
    off picks other rows."""
    t, span, heads, dh = 40, 45, 2, 8  # two blocks of queries and of keys: rows 31 and 32 look across
    rng = np.random.default_rng(1)
    v = random(rng, t, heads * dh)
    q, k = np.zeros((t, heads * dh), np.float32), np.zeros((t, heads * dh), np.float32)
    positions, bias = np.zeros((2 * span - 1, heads * dh), np.float32), np.zeros((2 * span - 1, heads), np.float32)
    bias[(span - 1) + 1, 0] = 30.0
    q[:, dh:] = 1.0
    positions[(span - 1) - 1, dh:] = 30.0 / dh
    averaged = np.stack([v[max(0, i - 2):i + 1].mean(axis=0) for i in range(t)])
    for ops in (gpu_ops, cpu_ops):
        picked = ops.read(ops.relative_attention(*map(ops.tensor, (q, k, v, positions, bias)), heads, 1.0))
        windowed = ops.read(ops.relative_attention(*map(ops.tensor, (k, k, v, np.zeros_like(positions),
                                                                       np.zeros_like(bias))), heads, 1.0, (2, 0)))
        np.testing.assert_allclose(np.asarray(picked)[:-1, :dh], v[1:, :dh], **EXACT)
        np.testing.assert_allclose(np.asarray(picked)[1:, dh:], v[:-1, dh:], **EXACT)
        np.testing.assert_allclose(np.asarray(windowed), averaged, **EXACT)
