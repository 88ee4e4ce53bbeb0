"""GPU LayerNorm, GroupNorm, softmax, GLU, SwiGLU and rotary against the numpy backend.

Shapes cover the ragged edges of the kernels: rows shorter than a workgroup (1, 7 columns), longer
than one (384, 1000), GroupNorm groups split into several chunks, rotary on part of a head and at
positions far from zero, and more rows than one grid dimension holds.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def check(gpu_ops, cpu_ops, method, *args, **kwargs):
    """Run ``method`` on both backends (array arguments uploaded to each) and compare."""
    def on(ops):
        return [ops.tensor(a) if isinstance(a, np.ndarray) else a for a in args]

    got = gpu_ops.read(getattr(gpu_ops, method)(*on(gpu_ops), **kwargs))
    want = getattr(cpu_ops, method)(*on(cpu_ops), **kwargs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, **TOL)


@pytest.mark.parametrize("cols", [1, 7, 384, 1000])
@pytest.mark.parametrize("affine", ["wb", "w", "b", "none"])
def test_layer_norm(gpu_ops, cpu_ops, rng, cols, affine):
    # An offset mean checks that the variance is taken around the mean, not as E[x²] - E[x]².
    x = (rng.standard_normal((3, cols)) * 2 + 10).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32) if "w" in affine else None
    b = rng.standard_normal(cols).astype(np.float32) if "b" in affine else None
    check(gpu_ops, cpu_ops, "layer_norm", x, w, b, eps=1e-5)


def test_layer_norm_eps(gpu_ops, cpu_ops, rng):
    x = rng.standard_normal((4, 64)).astype(np.float32) * 0.01  # variance near eps, so eps matters
    check(gpu_ops, cpu_ops, "layer_norm", x, None, None, eps=1e-3)


@pytest.mark.parametrize("cols", [1, 7, 384, 1000])
def test_softmax(gpu_ops, cpu_ops, rng, cols):
    x = (rng.standard_normal((5, cols)) * 30).astype(np.float32)  # logits past exp's f32 range
    check(gpu_ops, cpu_ops, "softmax", x)


def test_row_kernels_past_one_grid_dimension(gpu_ops, cpu_ops, rng):
    # 70000 rows: one workgroup per row needs the y dimension of the dispatch grid.
    x = (rng.standard_normal((70_000, 3)) + np.arange(3) * 2).astype(np.float32)
    check(gpu_ops, cpu_ops, "softmax", x)
    check(gpu_ops, cpu_ops, "layer_norm", x, None, None)


@pytest.mark.parametrize("t", [1, 3, 50])
@pytest.mark.parametrize(("c", "groups"), [(8, 1), (12, 4), (6, 6), (416, 1)])
def test_group_norm(gpu_ops, cpu_ops, rng, t, c, groups):
    x = (rng.standard_normal((t, c)) + rng.standard_normal(c) * 3).astype(np.float32)
    w = rng.standard_normal(c).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    check(gpu_ops, cpu_ops, "group_norm", x, groups, w, b)


@pytest.mark.parametrize(("t", "c", "groups"), [(300, 416, 1), (201, 96, 2)])
def test_group_norm_many_chunks(gpu_ops, cpu_ops, rng, t, c, groups):
    # Over 4096 values per group: the group is reduced in chunks whose statistics are merged.
    x = (rng.standard_normal((t, c)) * 2 + 5).astype(np.float32)
    w = rng.standard_normal(c).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    check(gpu_ops, cpu_ops, "group_norm", x, groups, w, b, eps=1e-5)


def test_group_norm_rejects_uneven_groups(gpu_ops):
    x = gpu_ops.tensor(np.zeros((2, 10), np.float32))
    w = gpu_ops.tensor(np.ones(10, np.float32))
    with pytest.raises(ValueError, match="groups"):
        gpu_ops.group_norm(x, 3, w, w)


@pytest.mark.parametrize("method", ["glu", "swiglu"])
@pytest.mark.parametrize("d", [1, 7, 384, 1000])
def test_gated(gpu_ops, cpu_ops, rng, method, d):
    x = (rng.standard_normal((3, 2 * d)) * 8).astype(np.float32)
    x[0, d:] = np.linspace(-120, 120, d)  # gates where exp(-g) overflows or vanishes
    check(gpu_ops, cpu_ops, method, x)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize(
    ("t", "heads", "head_dim", "rot_dim", "pos0"),
    [
        (1, 1, 8, 8, 0),
        (3, 2, 8, 8, 0),
        (5, 3, 12, 8, 7),  # rot_dim < head_dim: the tail of each head passes through
        (50, 2, 36, 32, 1500),  # Moonshine tiny's heads, late in a long window
        (2, 1, 64, 64, 100_000),  # a position past 2^12 exercises the split of positions
    ],
)
def test_rotary(gpu_ops, cpu_ops, rng, interleaved, t, heads, head_dim, rot_dim, pos0):
    x = rng.standard_normal((t, heads * head_dim)).astype(np.float32)
    check(gpu_ops, cpu_ops, "rotary", x, heads, rot_dim, 10000.0, pos0, interleaved)


def test_rotary_other_base(gpu_ops, cpu_ops, rng):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    check(gpu_ops, cpu_ops, "rotary", x, 2, 6, 500.0, 3, False)


def test_rotary_rejects_odd_rot_dim(gpu_ops):
    x = gpu_ops.tensor(np.zeros((2, 16), np.float32))
    with pytest.raises(ValueError, match="rot_dim"):
        gpu_ops.rotary(x, 2, 5, 10000.0, 0, True)
