"""The Conformer front convolutions that take log-mel frames (10 ms) down to encoder frames.

* ``StridedConv1d`` (GigaAM's ``StridingSubsampling``, conv1d): two Conv1d(kernel k, stride 2,
  padding (k-1)/2) + ReLU over time, mel bins as channels: 4x, 40 ms frames. On the backend as
  im2col + GEMM.
* ``DepthwiseStridingConv2d`` (NeMo's ``ConvSubsampling``, "dw_striding", Parakeet): the log-mel as
  a one-channel image [T, F]; Conv2d(1→C, 3x3, stride 2, pad 1) + ReLU, then twice a depthwise
  Conv2d(C, 3x3, stride 2, pad 1) followed by a pointwise Conv2d(C→C, 1x1) + ReLU: 8x in time and
  frequency, 80 ms frames. The [T/8, C, F/8] result is flattened channel-major and projected to
  d_model by a linear layer.

The ops work on [rows, channels] tensors with 1-D convolutions over rows, so the 2-D stack runs in
numpy (BLAS for the 1x1 convs) and only the final projection, the largest GEMM, runs on the
backend. What a GPU port needs: ``im2col2d(x [H*W, C], H, W, 3, 3, stride 2, pad 1) -> [H'*W', C*9]``
(column c*9 + 3i + j, the order of a [C_out, C, 3, 3] kernel flattened), after which the first conv
is one GEMM; and ``depthwise_conv2d(x [H*W, C], H, W, w [C, 9], b, stride 2, pad 1) -> [H'*W', C]``,
after which each pointwise conv is a GEMM with a ReLU epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.conformer.weights import Linear, linear
from engine.gguf.reader import ModelFile
from engine.ops import Ops, Tensor


@dataclass
class StridedConv1d:
    """GigaAM's subsampling: conv1d layers, weights [C_out, C_in*k] in im2col's column order."""

    layers: list[Linear]
    kernel: int

    @classmethod
    def load(cls, model_file: ModelFile, ops: Ops, prefix: str, indices: tuple[int, ...], kernel: int) -> StridedConv1d:
        return cls([linear(model_file, ops, f"{prefix}.conv.{i}") for i in indices], kernel)

    def __call__(self, ops: Ops, mel: np.ndarray) -> Tensor:
        """mel: [n_mels, T] float32 -> [T', C] on the backend."""
        x = ops.tensor(np.ascontiguousarray(mel.T))
        for layer in self.layers:
            x = ops.gemm(ops.im2col(x, self.kernel, 2, (self.kernel - 1) // 2), layer.weight, layer.bias, act="relu")
        return x


@dataclass
class DepthwiseStridingConv2d:
    """Parakeet's subsampling (see the module docstring); conv weights as float32 host arrays."""

    first: tuple[np.ndarray, np.ndarray]  # [C, 1, 3, 3], [C]
    separable: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # depthwise [C,1,3,3], [C]; pointwise [C,C], [C]
    projection: Linear  # [d_model, C * F/8] on the backend
    input_scale: float  # sqrt(d_model) when the model scales its input (xscaling), else 1

    @classmethod
    def load(cls, model_file: ModelFile, ops: Ops, prefix: str, xscale: float) -> DepthwiseStridingConv2d:
        def conv(i: int) -> tuple[np.ndarray, np.ndarray]:
            return model_file.array(f"{prefix}.conv.{i}.weight"), model_file.array(f"{prefix}.conv.{i}.bias")

        separable = []
        for dw, pw in ((2, 3), (5, 6)):
            (dw_w, dw_b), (pw_w, pw_b) = conv(dw), conv(pw)
            separable.append((dw_w, dw_b, pw_w.reshape(pw_w.shape[0], -1), pw_b))
        projection = linear(model_file, ops, f"{prefix}.out")
        if xscale != 1.0:  # x·s through a linear layer: scale the input on the host and the bias here
            bias = model_file.array(f"{prefix}.out.bias") * np.float32(xscale)
            projection = Linear(projection.weight, ops.tensor(bias))
        return cls(conv(0), separable, projection, xscale)

    def __call__(self, ops: Ops, mel: np.ndarray) -> Tensor:
        """mel: [n_mels, T] float32 -> [T', d_model] on the backend (T' = T/8 rounded up)."""
        weight, bias = self.first
        patches = _windows_3x3_stride2(mel.T[:, :, None])  # [T1, F1, 1, 3, 3]
        t1, f1 = patches.shape[:2]
        x = patches.reshape(t1 * f1, 9) @ weight.reshape(weight.shape[0], 9).T + bias
        x = np.maximum(x, 0, out=x).reshape(t1, f1, -1)  # [T1, F1, C]
        for dw_weight, dw_bias, pw_weight, pw_bias in self.separable:
            x = _depthwise_3x3_stride2(x, dw_weight.reshape(-1, 3, 3), dw_bias)
            t, f, c = x.shape
            x = x.reshape(t * f, c) @ pw_weight.T + pw_bias
            x = np.maximum(x, 0, out=x).reshape(t, f, c)
        flat = np.ascontiguousarray(x.transpose(0, 2, 1)).reshape(x.shape[0], -1)  # [T', C*F'] channel-major
        if self.input_scale != 1.0:
            flat *= np.float32(self.input_scale)
        return ops.gemm(ops.tensor(flat), self.projection.weight, self.projection.bias)


def _padded(x: np.ndarray) -> np.ndarray:
    """x: [H, W, C] zero-padded by one on both sides of H and W."""
    return np.pad(x, ((1, 1), (1, 1), (0, 0)))


def _windows_3x3_stride2(x: np.ndarray) -> np.ndarray:
    """The 3x3 patches at stride 2 of x: [H, W, C] with padding 1 -> view [H', W', C, 3, 3]."""
    windows = np.lib.stride_tricks.sliding_window_view(_padded(x), (3, 3), axis=(0, 1))
    return windows[::2, ::2]


def _depthwise_3x3_stride2(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Depthwise 3x3 conv, stride 2, padding 1: x [H, W, C], weight [C, 3, 3], bias [C] -> [H', W', C]."""
    h_out, w_out = (x.shape[0] - 1) // 2 + 1, (x.shape[1] - 1) // 2 + 1
    padded = _padded(x)
    out = np.broadcast_to(bias, (h_out, w_out, x.shape[2])).astype(np.float32)
    for i in range(3):
        for j in range(3):
            out += padded[i : i + 2 * h_out : 2, j : j + 2 * w_out : 2] * weight[:, i, j]
    return out
