"""Weights that the model families share, loaded from a GGUF file onto a backend (``engine.ops.Ops``).

Whisper and Moonshine name their tensors the same way (``{prefix}.weight``, ``{prefix}.bias``, attention
projections ``q``, ``k``, ``v``, ``out``), so one set of loaders serves both; the Conformer families use
the containers and the small-tensor loaders (``engine.conformer.weights``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from sayso.engine.errors import ModelFileError
from sayso.engine.ops import Ops, RowNorm, Tensor, Weight, WeightSource


@dataclass
class Linear:
    """``y = x·Wᵀ + b``: weight [N, K] on the backend, bias [N] or None (e.g. Whisper's key projections)."""

    weight: Weight
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
class StackedAttention:
    """Self-attention whose q, k and v projections are one stacked layer (``stacked_linear``):
    its output [T, 3d] holds q, k and v side by side, for ``Ops.columns``."""

    qkv: Linear
    out: Linear


@dataclass
class EncoderBlock:
    """A pre-norm Transformer encoder block: self-attention, then a two-layer MLP, each after its norm.
    A norm is a ``Norm`` (Whisper) or a bias-less norm's weight [d] (Moonshine): see ``encoder_block``."""

    norm_attn: Norm | Tensor
    attn: Attention
    norm_ffn: Norm | Tensor
    fc1: Linear  # d -> ffn (Whisper: GELU), or d -> [value, gate] 2*ffn (Moonshine's decoder: SwiGLU)
    fc2: Linear


@dataclass
class DecoderBlock:
    """A pre-norm Transformer decoder block: causal self-attention, cross-attention over the encoder's
    states, then the MLP, each after its norm."""

    norm_self: Norm | Tensor
    self_attn: Attention | StackedAttention
    norm_cross: Norm | Tensor
    cross_attn: Attention
    norm_ffn: Norm | Tensor
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


def stacked_linear(model_file, ops: Ops, prefixes: list[str]) -> Linear:
    """The linear layers ``prefixes`` (same input size) as one, weights stacked along N: one product
    where the model would run several on the same input (a decoder step's q, k and v: one dispatch
    instead of three). Biases are stacked with zeros for a layer without one (Whisper's k). Weights
    that share a file type stack as their raw rows (a Q8_0 row is whole blocks), mixed ones as float32."""
    sources = [model_file.tensor(f"{prefix}.weight") for prefix in prefixes]
    if len({s.shape[1:] for s in sources}) != 1 or len(sources[0].shape) != 2:
        shapes = ", ".join(f"{s.name} {s.shape}" for s in sources)
        raise ModelFileError(model_file.path, f"can't stack weights of different input sizes ({shapes})")
    if len({s.ggml_type for s in sources}) != 1:
        sources = [WeightSource(s.name, "F32", s.shape, model_file.array(s.name)) for s in sources]
    weight = ops.weight(WeightSource.stacked("+".join(s.name for s in sources), sources))
    biases = [f"{prefix}.bias" for prefix in prefixes]
    if not any(model_file.has(name) for name in biases):
        return Linear(weight, None)
    parts = [model_file.array(name) if model_file.has(name) else np.zeros(s.shape[0], np.float32)
             for name, s in zip(biases, sources)]
    return Linear(weight, ops.tensor(np.concatenate(parts)))


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
    return Linear(ops.weight(source.flattened()), vector(model_file, ops, f"{prefix}.bias") if bias else None)


@dataclass
class NormedRow:
    """A single row whose LayerNorm is left to the linear layers that read it (``apply``): a GPU
    folds it into each of their products instead of running it on its own."""

    row: Tensor
    norm: RowNorm


Layer = TypeVar("Layer")

LAYERS_PER_SUBMISSION = 4
"""Encoder layers recorded per GPU submission (``in_submissions``)."""


def in_submissions(ops: Ops, layers: Sequence[Layer]) -> Iterator[Layer]:
    """``layers`` in order, the work recorded so far submitted after every ``LAYERS_PER_SUBMISSION`` of
    them: the GPU runs the first layers while Python records the next, where one submission at the
    end would leave it idle for the whole encoder's recording."""
    for number, layer in enumerate(layers, start=1):
        yield layer
        if number % LAYERS_PER_SUBMISSION == 0 and number < len(layers):
            ops.flush()


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


def decoder_block(model_file, ops: Ops, prefix: str, load_norm=norm, stack_self_qkv: bool = False) -> DecoderBlock:
    """``prefix.{norm_self, self_attn, norm_cross, cross_attn, norm_ffn, ffn.fc1, ffn.fc2}``;
    ``stack_self_qkv``: self-attention as a ``StackedAttention``."""
    self_attn = f"{prefix}.self_attn"
    return DecoderBlock(
        norm_self=load_norm(model_file, ops, f"{prefix}.norm_self"),
        self_attn=StackedAttention(stacked_linear(model_file, ops, [f"{self_attn}.{p}" for p in "qkv"]),
                                   linear(model_file, ops, f"{self_attn}.out"))
        if stack_self_qkv else attention(model_file, ops, self_attn),
        norm_cross=load_norm(model_file, ops, f"{prefix}.norm_cross"),
        cross_attn=attention(model_file, ops, f"{prefix}.cross_attn"),
        norm_ffn=load_norm(model_file, ops, f"{prefix}.norm_ffn"),
        fc1=linear(model_file, ops, f"{prefix}.ffn.fc1"),
        fc2=linear(model_file, ops, f"{prefix}.ffn.fc2"),
    )
