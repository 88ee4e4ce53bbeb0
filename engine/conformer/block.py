"""One Conformer block on ``engine.ops``: half FFN, self-attention, convolution module, half FFN,
LayerNorm (Gulati et al. 2020, as NeMo's and GigaAM's ``ConformerLayer`` compute it):

    x = x + ½·FFN₁(LN(x));  x = x + MHSA(LN(x));  x = x + Conv(LN(x));  x = x + ½·FFN₂(LN(x));  x = LN(x)

FFN is Linear → SiLU → Linear. The convolution module is pointwise (d → 2d) → GLU → depthwise
(kernel k, 'same' padding) → BatchNorm (Parakeet; folded into the depthwise weights at load) or
LayerNorm over channels (GigaAM) → SiLU → pointwise (d → d).

The ops have no standalone SiLU, so the conv module computes it as a GLU of a doubled tensor:
``glu([z, z]) = z·σ(z) = silu(z)``. The first pointwise conv is loaded with its rows repeated
(value, value, gate, gate → GLU gives [g, g]), the depthwise kernel and BatchNorm fold repeated,
and a LayerNorm over [z, z] with repeated affine equals the LayerNorm of z repeated (same mean and
variance). That costs one extra d×d of the first pointwise GEMM per block (about 9% of a block's
FLOPs); a ``silu`` activation epilogue on ``depthwise_conv`` or ``layer_norm`` would remove it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from sayso.engine.conformer.weights import Linear, linear, matrix_source
from sayso.engine.layers import Norm, norm
from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import Ops, Tensor, WeightSource

LAYER_NORM_EPS = 1e-5  # PyTorch's nn.LayerNorm default, which both families train with
BATCH_NORM_EPS = 1e-5  # nn.BatchNorm1d's default


class Attention(Protocol):
    def __call__(self, ops: Ops, h: Tensor, x: Tensor) -> Tensor:
        """``x + attention(h)`` for the LayerNorm'd h and the residual stream x, both [T, d]."""


@dataclass
class FeedForward:
    norm: Norm
    linear1: Linear
    linear2: Linear

    def __call__(self, ops: Ops, x: Tensor) -> Tensor:
        """The macaron half step: ``x + ½·Linear₂(SiLU(Linear₁(LN(x))))``."""
        h = ops.layer_norm(x, self.norm.weight, self.norm.bias, LAYER_NORM_EPS)
        h = ops.gemm(h, self.linear1.weight, self.linear1.bias, act="silu")
        return ops.gemm(h, self.linear2.weight, self.linear2.bias, residual=x, alpha=0.5)


@dataclass
class ConvModule:
    """The convolution module, its tensors doubled for the SiLU-as-GLU step (module docstring)."""

    norm: Norm
    pointwise1: Linear  # [4d, d]: rows value, value, gate, gate
    depthwise: Tensor  # [2d, k]
    depthwise_bias: Tensor | None  # [2d]
    channel_norm: Norm | None  # GigaAM's LayerNorm over channels, affine [2d]; None when BatchNorm is folded in
    pointwise2: Linear  # [d, d]
    pad_left: int

    def __call__(self, ops: Ops, x: Tensor) -> Tensor:
        """``x + Conv(LN(x))``."""
        h = ops.layer_norm(x, self.norm.weight, self.norm.bias, LAYER_NORM_EPS)
        h = ops.glu(ops.gemm(h, self.pointwise1.weight, self.pointwise1.bias))  # [T, 2d] = [g, g]
        h = ops.depthwise_conv(h, self.depthwise, self.depthwise_bias, self.pad_left)
        if self.channel_norm is not None:
            h = ops.layer_norm(h, self.channel_norm.weight, self.channel_norm.bias, LAYER_NORM_EPS)
        h = ops.glu(h)  # silu
        return ops.gemm(h, self.pointwise2.weight, self.pointwise2.bias, residual=x)


@dataclass
class ConformerBlock:
    ff1: FeedForward
    attn_norm: Norm
    attn: Attention
    conv: ConvModule
    ff2: FeedForward
    out_norm: Norm

    def __call__(self, ops: Ops, x: Tensor) -> Tensor:
        """x: [T, d] -> [T, d]."""
        x = self.ff1(ops, x)
        x = self.attn(ops, ops.layer_norm(x, self.attn_norm.weight, self.attn_norm.bias, LAYER_NORM_EPS), x)
        x = self.conv(ops, x)
        x = self.ff2(ops, x)
        return ops.layer_norm(x, self.out_norm.weight, self.out_norm.bias, LAYER_NORM_EPS)


def conformer_block(model_file: ModelFile, ops: Ops, prefix: str, attn: Attention, conv: ConvModule) -> ConformerBlock:
    """``prefix.{norm_ff1, ff1, norm_attn, norm_conv, ff2, norm_ff2, norm_out}`` around the family's own
    attention and conv module (already loaded: they are what differs between Parakeet and GigaAM)."""
    return ConformerBlock(
        ff1=feed_forward(model_file, ops, f"{prefix}.ff1", f"{prefix}.norm_ff1"),
        attn_norm=norm(model_file, ops, f"{prefix}.norm_attn"),
        attn=attn,
        conv=conv,
        ff2=feed_forward(model_file, ops, f"{prefix}.ff2", f"{prefix}.norm_ff2"),
        out_norm=norm(model_file, ops, f"{prefix}.norm_out"),
    )


def feed_forward(model_file: ModelFile, ops: Ops, prefix: str, norm_prefix: str) -> FeedForward:
    return FeedForward(norm(model_file, ops, norm_prefix), linear(model_file, ops, f"{prefix}.linear1"),
                       linear(model_file, ops, f"{prefix}.linear2"))


def conv_module(model_file: ModelFile, ops: Ops, prefix: str, norm_prefix: str, channel_norm: str,
                pad_left: int | None = None) -> ConvModule:
    """Load ``prefix.{pointwise1,depthwise,pointwise2}`` and the channel norm: ``"batch_norm"``
    (``prefix.bn.{weight,bias,running_mean,running_var}``, folded into the depthwise conv) or
    ``"layer_norm"`` (``prefix.ln.*``, or ``prefix.bn.{weight,bias}`` where Parakeet's streaming
    variants keep it). ``pad_left`` defaults to (k-1)/2, 'same' padding."""
    pw1 = matrix_source(model_file, f"{prefix}.pointwise1.weight")
    d = pw1.shape[0] // 2
    value, gate = pw1.rows(0, d), pw1.rows(d, 2 * d)
    doubled = WeightSource.stacked(f"{prefix}.pointwise1.weight (doubled)", [value, value, gate, gate])
    pw1_bias = model_file.array(f"{prefix}.pointwise1.bias") if model_file.has(f"{prefix}.pointwise1.bias") else None
    pointwise1 = Linear(
        ops.weight(doubled),
        None if pw1_bias is None else ops.tensor(np.concatenate([pw1_bias[:d], pw1_bias[:d], pw1_bias[d:], pw1_bias[d:]])),
    )
    kernel = model_file.array(f"{prefix}.depthwise.weight").reshape(d, -1)  # [d, 1, k] -> [d, k]
    k = kernel.shape[1]
    bias_name = f"{prefix}.depthwise.bias"
    bias = model_file.array(bias_name) if model_file.has(bias_name) else np.zeros(d, np.float32)
    affine = None
    if channel_norm == "batch_norm":
        scale, shift = _batch_norm_affine(model_file, f"{prefix}.bn")
        kernel, bias = kernel * scale[:, None], bias * scale + shift
    elif channel_norm == "layer_norm":
        ln = f"{prefix}.ln" if model_file.has(f"{prefix}.ln.weight") else f"{prefix}.bn"
        weight, shift = model_file.array(f"{ln}.weight"), model_file.array(f"{ln}.bias")
        affine = Norm(ops.tensor(np.concatenate([weight, weight])), ops.tensor(np.concatenate([shift, shift])))
    else:
        raise ModelFileError(model_file.path, f"uses a '{channel_norm}' in its conv modules, which Sayso can't run",
                             "Supported: batch_norm, layer_norm.")
    return ConvModule(
        norm=norm(model_file, ops, norm_prefix),
        pointwise1=pointwise1,
        depthwise=ops.tensor(np.concatenate([kernel, kernel]).astype(np.float32)),
        depthwise_bias=ops.tensor(np.concatenate([bias, bias]).astype(np.float32)),
        channel_norm=affine,
        pointwise2=linear(model_file, ops, f"{prefix}.pointwise2"),
        pad_left=(k - 1) // 2 if pad_left is None else pad_left,
    )


def _batch_norm_affine(model_file: ModelFile, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """BatchNorm in eval mode as ``x·scale + shift`` (float32 [C] each), as transcribe.cpp fuses it."""
    weight, bias = model_file.array(f"{prefix}.weight"), model_file.array(f"{prefix}.bias")
    mean, var = model_file.array(f"{prefix}.running_mean"), model_file.array(f"{prefix}.running_var")
    scale = (weight / np.sqrt(var + np.float32(BATCH_NORM_EPS))).astype(np.float32)
    return scale, (bias - mean * scale).astype(np.float32)
