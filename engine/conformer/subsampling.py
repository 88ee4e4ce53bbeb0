"""The Conformer front convolutions that take log-mel frames (10 ms) down to encoder frames.

* ``StridedConv1d`` (GigaAM's ``StridingSubsampling``, conv1d): two Conv1d(kernel k, stride 2,
  padding (k-1)/2) + ReLU over time, mel bins as channels: 4x, 40 ms frames. On the backend as
  im2col + GEMM.
* ``DepthwiseStridingConv2d`` (NeMo's ``ConvSubsampling``, "dw_striding", Parakeet): the log-mel as
  a one-channel image [T, F]; Conv2d(1→C, 3x3, stride 2, pad 1) + ReLU, then twice a depthwise
  Conv2d(C, 3x3, stride 2, pad 1) followed by a pointwise Conv2d(C→C, 1x1) + ReLU: 8x in time and
  frequency, 80 ms frames. The [T/8, C, F/8] result is flattened channel-major and projected to
  d_model by a linear layer.

The 2-D stack runs on the backend on images [H*W, C]: the first conv is ``im2col_3x3_s2`` then one
GEMM; each depthwise conv is ``depthwise_3x3_s2``, each pointwise conv a GEMM with a ReLU epilogue;
``channels_major`` flattens the result (and applies xscaling) for the projection.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sayso.engine.conformer.weights import Linear, linear
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import Ops, Tensor


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
    """Parakeet's subsampling (see the module docstring), all of it on the backend."""

    first: Linear  # [C, 9]: Conv2d(1 -> C, 3x3) as a product of im2col_3x3_s2's patches
    separable: list[tuple[Tensor, Tensor, Linear]]  # depthwise taps [C, 9] and bias [C]; pointwise [C, C]
    projection: Linear  # [d_model, C * F/8]
    input_scale: float  # sqrt(d_model) when the model scales its input (xscaling), else 1

    @classmethod
    def load(cls, model_file: ModelFile, ops: Ops, prefix: str, xscale: float) -> DepthwiseStridingConv2d:
        separable = []
        for dw, pw in ((2, 3), (5, 6)):
            taps = model_file.array(f"{prefix}.conv.{dw}.weight")  # [C, 1, 3, 3]
            bias = model_file.array(f"{prefix}.conv.{dw}.bias")
            separable.append((ops.tensor(taps.reshape(taps.shape[0], 9)), ops.tensor(bias),
                              linear(model_file, ops, f"{prefix}.conv.{pw}")))
        projection = linear(model_file, ops, f"{prefix}.out")
        if xscale != 1.0:  # x·s through a linear layer: the input is scaled as it is flattened, the bias here
            bias = model_file.array(f"{prefix}.out.bias") * np.float32(xscale)
            projection = Linear(projection.weight, ops.tensor(bias))
        return cls(linear(model_file, ops, f"{prefix}.conv.0"), separable, projection, xscale)

    def __call__(self, ops: Ops, mel: np.ndarray) -> Tensor:
        """mel: [n_mels, T] float32 -> [T', d_model] on the backend (T' = T/8 rounded up). The log-mel
        is an image of T rows of n_mels pixels with one channel."""
        height, width = mel.shape[1], mel.shape[0]
        x = ops.tensor(np.ascontiguousarray(mel.T).reshape(-1, 1))
        x = ops.gemm(ops.im2col_3x3_s2(x, height, width), self.first.weight, self.first.bias, act="relu")
        height, width = (height - 1) // 2 + 1, (width - 1) // 2 + 1
        for taps, bias, pointwise in self.separable:
            x = ops.depthwise_3x3_s2(x, height, width, taps, bias)
            height, width = (height - 1) // 2 + 1, (width - 1) // 2 + 1
            x = ops.gemm(x, pointwise.weight, pointwise.bias, act="relu")
        flat = ops.channels_major(x, height, width, self.input_scale)  # [T', C*F'] channel-major
        return ops.gemm(flat, self.projection.weight, self.projection.bias)
