"""Weights that the model families share, loaded from a GGUF file onto a backend (``engine.ops.Ops``).

Whisper and Moonshine name their tensors the same way (``{prefix}.weight``, ``{prefix}.bias``, attention
projections ``q``, ``k``, ``v``, ``out``), so one set of loaders serves both; the Conformer families use
the containers and the small-tensor loaders (``engine.conformer.weights``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import ModelFileError
from engine.ops import Ops, RowNorm, Tensor, WeightSource


@dataclass
class Linear:
    """``y = x·Wᵀ + b``: weight [N, K] on the backend, bias [N] or None (e.g. Whisper's key projections)."""

    weight: Any
    bias: Tensor | None


@dataclass
class Norm:
    """LayerNorm affine parameters [D]."""

    weight: Tensor
    bias: Tensor | None


@dataclass
class Attention:
    q: Linear
    k: Linear
    v: Linear
    out: Linear


@dataclass
class EncoderBlock:
    """A pre-norm Transformer encoder block: self-attention, then a two-layer MLP, each after its norm.
    A norm is a ``Norm`` (Whisper) or a bias-less norm's weight [d] (Moonshine): see ``encoder_block``."""

    norm_attn: Any
    attn: Attention
    norm_ffn: Any
    fc1: Linear  # d -> ffn (Whisper: GELU), or d -> [value, gate] 2*ffn (Moonshine's decoder: SwiGLU)
    fc2: Linear


@dataclass
class DecoderBlock:
    """A pre-norm Transformer decoder block: causal self-attention, cross-attention over the encoder's
    states, then the MLP, each after its norm."""

    norm_self: Any
    self_attn: Attention
    norm_cross: Any
    cross_attn: Attention
    norm_ffn: Any
    fc1: Linear
    fc2: Linear


def vector(model_file, ops: Ops, name: str) -> Tensor:
    """A small F32 tensor (norm, bias) uploaded as is."""
    return ops.tensor(model_file.array(name))


def optional_vector(model_file, ops: Ops, name: str) -> Tensor | None:
    return vector(model_file, ops, name) if model_file.has(name) else None


def linear(model_file, ops: Ops, prefix: str) -> Linear:
    """``prefix.weight`` [N, K] in its file type and ``prefix.bias`` when the file has it."""
    return Linear(ops.weight(model_file.tensor(f"{prefix}.weight")), optional_vector(model_file, ops, f"{prefix}.bias"))


def norm(model_file, ops: Ops, prefix: str) -> Norm:
    return Norm(vector(model_file, ops, f"{prefix}.weight"), vector(model_file, ops, f"{prefix}.bias"))


def norm_weight(model_file, ops: Ops, prefix: str) -> Tensor:
    """A bias-less LayerNorm (Moonshine's): its weight [D] alone."""
    return vector(model_file, ops, f"{prefix}.weight")


def attention(model_file, ops: Ops, prefix: str) -> Attention:
    """The four projections ``prefix.{q,k,v,out}``."""
    return Attention(*(linear(model_file, ops, f"{prefix}.{part}") for part in ("q", "k", "v", "out")))


def conv(model_file, ops: Ops, prefix: str, bias: bool = True) -> Linear:
    """A conv1d weight [C_out, C_in, k] flattened to [C_out, C_in*k], the column order of ``im2col``."""
    source = model_file.tensor(f"{prefix}.weight")
    if source.ggml_type not in ("F32", "F16"):
        raise ModelFileError(model_file.path, f"tensor '{source.name}' is {source.ggml_type}; "
                             "convolution kernels must be F32 or F16")  # fmt: skip
    c_out = source.shape[0]
    flat = WeightSource(source.name, source.ggml_type, (c_out, int(np.prod(source.shape[1:]))),
                        np.asarray(source.data).reshape(c_out, -1))  # fmt: skip
    return Linear(ops.weight(flat), vector(model_file, ops, f"{prefix}.bias") if bias else None)


@dataclass
class NormedRow:
    """A single row whose LayerNorm is left to the linear layers that read it (``apply``): a GPU
    folds it into each of their products instead of running it on its own."""

    row: Tensor
    norm: RowNorm


def layer_norm(ops: Ops, x: Tensor, weight: Tensor, bias: Tensor | None, eps: float) -> Tensor | NormedRow:
    """LayerNorm of ``x`` for ``apply``: done now, or for one row on a backend that folds it into
    the products (``Ops.folds_row_norms``), left to them."""
    if x.shape[0] == 1 and ops.folds_row_norms:
        return NormedRow(x, RowNorm(weight, bias, eps))
    return ops.layer_norm(x, weight, bias, eps)


def apply(ops: Ops, x: Tensor | NormedRow, layer: Linear, act: str = "none", residual: Tensor | None = None) -> Tensor:
    """``x·Wᵀ + b`` with an epilogue; a single row goes through gemv (a decoder's steps)."""
    if isinstance(x, NormedRow):
        return ops.gemv(x.row, layer.weight, layer.bias, act=act, residual=residual, norm=x.norm)
    product = ops.gemv if x.shape[0] == 1 else ops.gemm
    return product(x, layer.weight, layer.bias, act=act, residual=residual)


def encoder_block(model_file, ops: Ops, prefix: str, load_norm=norm) -> EncoderBlock:
    """``prefix.{norm_attn, attn, norm_ffn, ffn.fc1, ffn.fc2}``; ``load_norm``: ``norm`` or ``norm_weight``."""
    return EncoderBlock(
        norm_attn=load_norm(model_file, ops, f"{prefix}.norm_attn"),
        attn=attention(model_file, ops, f"{prefix}.attn"),
        norm_ffn=load_norm(model_file, ops, f"{prefix}.norm_ffn"),
        fc1=linear(model_file, ops, f"{prefix}.ffn.fc1"),
        fc2=linear(model_file, ops, f"{prefix}.ffn.fc2"),
    )


def decoder_block(model_file, ops: Ops, prefix: str, load_norm=norm) -> DecoderBlock:
    """``prefix.{norm_self, self_attn, norm_cross, cross_attn, norm_ffn, ffn.fc1, ffn.fc2}``."""
    return DecoderBlock(
        norm_self=load_norm(model_file, ops, f"{prefix}.norm_self"),
        self_attn=attention(model_file, ops, f"{prefix}.self_attn"),
        norm_cross=load_norm(model_file, ops, f"{prefix}.norm_cross"),
        cross_attn=attention(model_file, ops, f"{prefix}.cross_attn"),
        norm_ffn=load_norm(model_file, ops, f"{prefix}.norm_ffn"),
        fc1=linear(model_file, ops, f"{prefix}.ffn.fc1"),
        fc2=linear(model_file, ops, f"{prefix}.ffn.fc2"),
    )
