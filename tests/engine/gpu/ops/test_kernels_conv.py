"""GPU im2col and depthwise conv1d against the numpy backend, and im2col against a direct conv.

Kernel sizes 3, 9 and 31 (Whisper's stem, Conformer convolution modules), strides 1 and 2,
'same', causal and no padding, and inputs shorter than the kernel. Then the 3x3 stride-2 conv2d
pieces of Parakeet's subsampling, on odd and even image sizes, against the numpy backend and a
direct conv2d.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture
def rng():
    return np.random.default_rng(4321)


@pytest.mark.parametrize(
    ("t", "c", "kernel", "stride", "pad"),
    [
        (1, 4, 3, 1, 1),
        (3, 5, 3, 2, 1),
        (50, 6, 3, 1, 1),
        (50, 6, 3, 2, 1),
        (50, 3, 9, 1, 4),
        (50, 3, 9, 2, 0),
        (3, 2, 31, 1, 15),  # kernel longer than the input: most taps read padding
        (50, 2, 31, 2, 15),
    ],
)
def test_im2col(gpu_ops, cpu_ops, rng, t, c, kernel, stride, pad):
    x = rng.standard_normal((t, c)).astype(np.float32)
    got = gpu_ops.read(gpu_ops.im2col(gpu_ops.tensor(x), kernel, stride, pad))
    want = cpu_ops.im2col(cpu_ops.tensor(x), kernel, stride, pad)
    assert got.shape == ((t + 2 * pad - kernel) // stride + 1, c * kernel)
    np.testing.assert_array_equal(got, want)  # a pure copy: bit-exact


@pytest.mark.parametrize(("t", "stride", "batch"), [(50, 1, 3), (50, 2, 3), (7, 2, 2)])
def test_im2col_of_a_batch_unfolds_each_sequence_on_its_own(gpu_ops, cpu_ops, rng, t, stride, batch):
    """Whisper's stem over several windows in one pass: no tap reaches into the next window."""
    x = rng.standard_normal((batch * t, 5)).astype(np.float32)
    got = gpu_ops.read(gpu_ops.im2col(gpu_ops.tensor(x), 3, stride, 1, batch))
    each = [cpu_ops.im2col(x[b * t:(b + 1) * t], 3, stride, 1) for b in range(batch)]
    np.testing.assert_array_equal(got, np.concatenate(each))
    np.testing.assert_array_equal(cpu_ops.im2col(x, 3, stride, 1, batch), np.concatenate(each))


def test_im2col_times_flattened_weight_is_conv1d(gpu_ops, rng):
    # The column order must match a conv weight [C_out, C, k] flattened to [C_out, C*k].
    t, c, c_out, k, stride, pad = 20, 4, 5, 3, 2, 1
    x = rng.standard_normal((t, c)).astype(np.float32)
    w = rng.standard_normal((c_out, c, k)).astype(np.float32)
    cols = gpu_ops.read(gpu_ops.im2col(gpu_ops.tensor(x), k, stride, pad))
    padded = np.pad(x, ((pad, pad), (0, 0)))
    t_out = (t + 2 * pad - k) // stride + 1
    windows = [padded[s * stride : s * stride + k].T for s in range(t_out)]  # each [C, k]
    direct = np.array([[np.sum(w[o] * window) for o in range(c_out)] for window in windows])
    np.testing.assert_allclose(cols @ w.reshape(c_out, c * k).T, direct, **TOL)


@pytest.mark.parametrize("t", [1, 3, 50])
@pytest.mark.parametrize(("c", "k"), [(1, 3), (5, 9), (16, 31)])
@pytest.mark.parametrize("padding", ["same", "causal", "lookahead"])
@pytest.mark.parametrize("bias", [True, False])
def test_depthwise_conv(gpu_ops, cpu_ops, rng, t, c, k, padding, bias):
    pad_left = {"same": (k - 1) // 2, "causal": k - 1, "lookahead": 0}[padding]
    x = rng.standard_normal((t, c)).astype(np.float32)
    w = rng.standard_normal((c, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32) if bias else None
    b_gpu = None if b is None else gpu_ops.tensor(b)
    got = gpu_ops.read(gpu_ops.depthwise_conv(gpu_ops.tensor(x), gpu_ops.tensor(w), b_gpu, pad_left))
    want = cpu_ops.depthwise_conv(x, w, b, pad_left)
    assert got.shape == (t, c)
    np.testing.assert_allclose(got, want, **TOL)


def test_depthwise_conv_rejects_mismatched_weight(gpu_ops):
    x = gpu_ops.tensor(np.zeros((4, 3), np.float32))
    w = gpu_ops.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="channels"):
        gpu_ops.depthwise_conv(x, w, None, 1)


def conv2d_3x3_s2(image: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The definition: image [H, W, C], weight [C_out, C, 3, 3], padding 1, stride 2 -> [H', W', C_out]."""
    h, w, _ = image.shape
    padded = np.pad(image, ((1, 1), (1, 1), (0, 0)))
    out = np.zeros(((h - 1) // 2 + 1, (w - 1) // 2 + 1, weight.shape[0]), np.float64)
    for y in range(out.shape[0]):
        for x in range(out.shape[1]):
            patch = padded[2 * y : 2 * y + 3, 2 * x : 2 * x + 3]  # [3, 3, C]
            out[y, x] = np.einsum("ijc,ocij->o", patch, weight)
    return out


@pytest.mark.parametrize(("h", "w", "c"), [(1, 1, 1), (7, 5, 1), (8, 128, 1), (9, 16, 6), (4, 3, 5)])
def test_conv2d_3x3_s2_pieces(gpu_ops, cpu_ops, rng, h, w, c):
    x = rng.standard_normal((h * w, c)).astype(np.float32)
    taps, bias = rng.standard_normal((c, 9)).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    gx = gpu_ops.tensor(x)
    patches = gpu_ops.read(gpu_ops.im2col_3x3_s2(gx, h, w))
    np.testing.assert_allclose(patches, cpu_ops.im2col_3x3_s2(x, h, w), **TOL)
    weight = rng.standard_normal((4, c, 3, 3)).astype(np.float32)
    direct = conv2d_3x3_s2(x.reshape(h, w, c), weight)
    np.testing.assert_allclose(patches @ weight.reshape(4, -1).T, direct.reshape(-1, 4), rtol=1e-4, atol=1e-4)
    got = gpu_ops.read(gpu_ops.depthwise_3x3_s2(gx, h, w, gpu_ops.tensor(taps), gpu_ops.tensor(bias)))
    np.testing.assert_allclose(got, cpu_ops.depthwise_3x3_s2(x, h, w, taps, bias), **TOL)
    per_channel = np.zeros((c, c, 3, 3), np.float32)
    per_channel[np.arange(c), np.arange(c)] = taps.reshape(c, 3, 3)
    np.testing.assert_allclose(got, (conv2d_3x3_s2(x.reshape(h, w, c), per_channel) + bias).reshape(-1, c), **TOL)
    flat = gpu_ops.read(gpu_ops.channels_major(gx, h, w, 2.0))
    np.testing.assert_array_equal(flat, cpu_ops.channels_major(x, h, w, 2.0))
    np.testing.assert_array_equal(flat.reshape(h, c, w).transpose(0, 2, 1).reshape(h * w, c), 2 * x)
