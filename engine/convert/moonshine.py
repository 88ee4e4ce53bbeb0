"""Lay a Moonshine checkpoint out as transcribe.cpp's Moonshine GGUF: its keys, value types, tensor
names, order, shapes and types, so that transcribe.cpp and Sayso read our files and theirs alike.

Both readers (``moonshine_ort`` for the ONNX Runtime files Moonshine's packages ship, ``moonshine_hf``
for transformers checkpoints) hand over the weights under transformers' names
(``model.decoder.layers.0.self_attn.q_proj.weight``); ``gguf_tensors`` renames them to transcribe.cpp's
(``dec.blocks.0.self_attn.q.weight``), and the writer checks that every weight is there with its shape.

Tensor types follow transcribe.cpp's quantizer: norms, biases and the three stem convolutions F32; the
linear layers and the token embedding Q8_0 in a ``q8_0`` file (F16 in an ``f16`` file, and for rows
that are not a multiple of 32 wide).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sayso.engine.convert.checkpoint_json import load_json
from sayso.engine.convert.layout import (
    Progress,
    check_out_type,
    check_shapes,
    general_metadata,
    parameter_count,
    shape_reader,
    vocabulary_metadata,
    write_layout,
)
from sayso.engine.convert.tokenizer import TOKEN_CONTROL, TOKEN_NORMAL, Vocabulary
from sayso.engine.errors import ModelFileError, SaysoError
from sayso.engine.gguf.writer import Meta

TOKEN_UNKNOWN = 2
TOKEN_BYTE = 6
"""llama.cpp's ``tokenizer.ggml.token_type`` codes for ``<unk>`` and the byte-fallback pieces ``<0x00>``..``<0xFF>``."""

SAMPLE_RATE = 16000
STEM_KERNELS = (127, 7, 3)
STEM_STRIDES = (64, 3, 2)
GROUPNORM_EPS = 1e-5

VARIANTS = {288: ("moonshine-tiny", "Moonshine Tiny"), 416: ("moonshine-base", "Moonshine Base")}
"""d_model -> (transcribe.cpp's variant slug, display name)."""


@dataclass(frozen=True)
class MoonshineHParams:
    """What a Moonshine checkpoint's config says beyond its weight shapes (transformers' ``MoonshineConfig``
    and ``generation_config.json``)."""

    encoder_heads: int
    decoder_heads: int
    encoder_kv_heads: int
    decoder_kv_heads: int
    max_position_embeddings: int  # the decoder's longest output, start token included
    partial_rotary_factor: float  # rotary dims per head = int(head_dim * factor)
    rope_theta: float
    pad_head_dim_to_multiple_of: int  # 0 for none; padding heads with zeros changes no result
    encoder_activation: str
    decoder_activation: str
    bos: int
    eos: int
    pad: int
    decoder_start: int


def _released(partial_rotary_factor: float) -> MoonshineHParams:
    """The config.json and generation_config.json of UsefulSensors/moonshine-tiny and -base, which differ
    only in the rotary factor (both turn 32 dims: 0.9 of tiny's 36-wide heads, 0.62 of base's 52)."""
    return MoonshineHParams(
        encoder_heads=8, decoder_heads=8, encoder_kv_heads=8, decoder_kv_heads=8, max_position_embeddings=194,
        partial_rotary_factor=partial_rotary_factor, rope_theta=10000.0, pad_head_dim_to_multiple_of=8,
        encoder_activation="gelu", decoder_activation="silu", bos=1, eos=2, pad=2, decoder_start=1,
    )


KNOWN_HPARAMS = {288: _released(0.9), 416: _released(0.62)}
"""d_model -> the released model's config, for sources that carry only weights (the ORT files)."""


@dataclass
class MoonshineSource:
    """A Moonshine checkpoint in GGUF terms: ``tensors`` maps transcribe.cpp's names to float arrays in
    PyTorch layout (linear [out, in], conv [out, in, kernel]); ``path`` is where it was read from."""

    path: Path
    tensors: dict[str, np.ndarray]
    hparams: MoonshineHParams
    vocabulary: Vocabulary


# ---- transformers names -> transcribe.cpp names ------------------------------------------------------

_TOP = {
    "model.encoder.conv1.weight": "enc.conv.0.weight",  # no bias
    "model.encoder.conv2.weight": "enc.conv.1.weight",
    "model.encoder.conv2.bias": "enc.conv.1.bias",
    "model.encoder.conv3.weight": "enc.conv.2.weight",
    "model.encoder.conv3.bias": "enc.conv.2.bias",
    "model.encoder.groupnorm.weight": "enc.conv.norm.weight",
    "model.encoder.groupnorm.bias": "enc.conv.norm.bias",
    "model.encoder.layer_norm.weight": "enc.final_norm.weight",
    "model.decoder.embed_tokens.weight": "dec.token_embd.weight",
    "model.decoder.norm.weight": "dec.final_norm.weight",
}
_ATTENTION = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "out"}
_MLP = {"mlp.fc1.weight": "ffn.fc1.weight", "mlp.fc1.bias": "ffn.fc1.bias",
        "mlp.fc2.weight": "ffn.fc2.weight", "mlp.fc2.bias": "ffn.fc2.bias"}  # fmt: skip
_ENCODER_BLOCK = {
    "input_layernorm.weight": "norm_attn.weight",
    **{f"self_attn.{hf}.weight": f"attn.{ours}.weight" for hf, ours in _ATTENTION.items()},
    "post_attention_layernorm.weight": "norm_ffn.weight",
    **_MLP,
}
_DECODER_BLOCK = {
    "input_layernorm.weight": "norm_self.weight",
    **{f"self_attn.{hf}.weight": f"self_attn.{ours}.weight" for hf, ours in _ATTENTION.items()},
    "post_attention_layernorm.weight": "norm_cross.weight",
    **{f"encoder_attn.{hf}.weight": f"cross_attn.{ours}.weight" for hf, ours in _ATTENTION.items()},
    "final_layernorm.weight": "norm_ffn.weight",
    **_MLP,
}
_LAYER = re.compile(r"model\.(encoder|decoder)\.layers\.(\d+)\.(.+)")
TIED_OUTPUT = "proj_out.weight"
"""transformers' output projection: the token embedding itself (tie_word_embeddings)."""


def gguf_name(hf_name: str) -> str | None:
    """transcribe.cpp's name for a transformers Moonshine weight, or None when it has none."""
    if hf_name in _TOP:
        return _TOP[hf_name]
    m = _LAYER.fullmatch(hf_name)
    if m is None:
        return None
    stack, index, part = m.groups()
    block = _ENCODER_BLOCK if stack == "encoder" else _DECODER_BLOCK
    return f"{stack[:3]}.blocks.{index}.{block[part]}" if part in block else None


def gguf_tensors(hf_tensors: dict[str, np.ndarray], path: Path) -> dict[str, np.ndarray]:
    """Rename transformers-named weights to transcribe.cpp's names; a ModelFileError for any weight a
    Moonshine model doesn't have (the tied output projection must equal the embedding)."""
    tensors: dict[str, np.ndarray] = {}
    unknown = []
    for hf_name, value in hf_tensors.items():
        name = gguf_name(hf_name)
        if name is not None:
            tensors[name] = value
        elif hf_name != TIED_OUTPUT:
            unknown.append(hf_name)
    if unknown:
        raise ModelFileError(path, f"has weights a Moonshine model doesn't have: {', '.join(sorted(unknown)[:5])}")
    for name in ("enc.conv.0.weight", "dec.token_embd.weight"):  # what the readers size the rest by
        if name not in tensors:
            raise ModelFileError(path, f"has no weight for {name}; is this a Moonshine model?")
    embedding = tensors["dec.token_embd.weight"]
    if TIED_OUTPUT in hf_tensors and not np.array_equal(hf_tensors[TIED_OUTPUT], embedding):
        raise ModelFileError(path, "has an output projection that differs from the token embedding, "
                             "which transcribe.cpp's Moonshine layout can't hold")  # fmt: skip
    return tensors


def tensor_layout(d: int, ffn: int, n_enc: int, n_dec: int, vocab: int) -> list[tuple[str, tuple[int, ...]]]:
    """Every tensor in file order with its numpy shape (the decoder's fc1 holds value and gate: 2*ffn rows)."""
    layout = [
        ("enc.conv.0.weight", (d, 1, STEM_KERNELS[0])),
        ("enc.conv.1.weight", (2 * d, d, STEM_KERNELS[1])), ("enc.conv.1.bias", (2 * d,)),
        ("enc.conv.2.weight", (d, 2 * d, STEM_KERNELS[2])), ("enc.conv.2.bias", (d,)),
        ("enc.conv.norm.weight", (d,)), ("enc.conv.norm.bias", (d,)),
        ("enc.final_norm.weight", (d,)),
    ]  # fmt: skip

    def block(prefix: str, names: dict[str, str], fc1_rows: int) -> list[tuple[str, tuple[int, ...]]]:
        shapes = []
        for name in names.values():
            if name.endswith("fc1.weight"):
                shape = (fc1_rows, d)
            elif name.endswith("fc1.bias"):
                shape = (fc1_rows,)
            elif name.endswith("fc2.weight"):
                shape = (d, ffn)
            else:
                shape = (d,) if name.startswith("norm") or name.endswith(".bias") else (d, d)
            shapes.append((f"{prefix}.{name}", shape))
        return shapes

    for i in range(n_enc):
        layout += block(f"enc.blocks.{i}", _ENCODER_BLOCK, ffn)
    layout += [("dec.token_embd.weight", (vocab, d)), ("dec.final_norm.weight", (d,))]
    for i in range(n_dec):
        layout += block(f"dec.blocks.{i}", _DECODER_BLOCK, 2 * ffn)
    return layout


def tensor_type(name: str, shape: tuple[int, ...], out_type: str) -> str:
    """The GGUF type transcribe.cpp's quantizer gives a tensor (see the module docstring)."""
    if len(shape) != 2 or name.startswith("enc.conv.") or "norm" in name:
        return "F32"
    return "Q8_0" if out_type == "q8_0" and shape[-1] % 32 == 0 else "F16"


# ---- the tokenizer --------------------------------------------------------------------------------------

_BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")


def piece_bytes(token: str) -> bytes:
    """The bytes a vocabulary piece stands for: ``<0x0A>`` -> b"\\n", any other piece its UTF-8 text."""
    return bytes([int(token[3:5], 16)]) if _BYTE_PIECE.fullmatch(token) else token.encode("utf-8")


def read_vocabulary(tokenizer_json: Path, vocab_size: int) -> Vocabulary:
    """Moonshine's tokenizer.json (SentencePiece-style BPE with byte fallback: ``▁`` for spaces,
    ``<0x0A>`` pieces for bytes, ``<<ST_n>>`` added control tokens) as exactly ``vocab_size`` ids."""
    data = load_json(tokenizer_json)
    model = data.get("model", {})
    if model.get("type") != "BPE" or not model.get("byte_fallback", False):
        raise ModelFileError(tokenizer_json, "is not a SentencePiece-style BPE tokenizer with byte fallback, "
                             "as Moonshine's is")  # fmt: skip
    by_id: dict[int, tuple[str, bool]] = {int(i): (t, False) for t, i in model["vocab"].items()}
    by_id.update({int(t["id"]): (t["content"], bool(t.get("special", False))) for t in data.get("added_tokens", [])})
    missing = [i for i in range(vocab_size) if i not in by_id]
    if missing or max(by_id) >= vocab_size:
        raise ModelFileError(tokenizer_json, f"doesn't hold ids 0..{vocab_size - 1}, the model's vocabulary")
    tokens, types = [], []
    for i in range(vocab_size):
        text, special = by_id[i]
        tokens.append(text)
        if text == "<unk>":
            types.append(TOKEN_UNKNOWN)
        elif special:
            types.append(TOKEN_CONTROL)
        elif _BYTE_PIECE.fullmatch(text):
            types.append(TOKEN_BYTE)
        else:
            types.append(TOKEN_NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return Vocabulary(tokens, types, merges)


# ---- writing -----------------------------------------------------------------------------------------


def write_moonshine_gguf(source: MoonshineSource, out: Path, out_type: str = "q8_0", variant: str | None = None,
                         progress: Progress | None = None) -> Path:  # fmt: skip
    """Write ``source`` to ``out`` in transcribe.cpp's Moonshine layout (atomically); returns ``out``."""
    check_out_type(out_type)
    t, shape = source.tensors, shape_reader(source)
    d = shape("enc.conv.0.weight")[0]
    hp = dict(
        d=d, ffn=shape("enc.blocks.0.ffn.fc1.weight")[0], vocab=shape("dec.token_embd.weight")[0],
        n_enc=sum(1 for n in t if n.startswith("enc.blocks.") and n.endswith(".norm_attn.weight")),
        n_dec=sum(1 for n in t if n.startswith("dec.blocks.") and n.endswith(".norm_self.weight")),
    )  # fmt: skip
    layout = tensor_layout(**hp)
    check_shapes(source, layout)
    if len(layout) != len(t):
        extra = sorted(set(t) - {name for name, _ in layout})
        raise ModelFileError(source.path, f"has weights outside Moonshine's layout: {', '.join(extra[:5])}")
    if variant is None:
        if d not in VARIANTS:
            raise SaysoError(f"Can't tell which Moonshine this is (d_model {d}); pass its variant name, "
                             "e.g. variant='moonshine-tiny'.")  # fmt: skip
        variant = VARIANTS[d][0]
    name = dict(VARIANTS.values()).get(variant, variant)
    metadata = _metadata(source, hp, variant, name, out_type, parameter_count(layout))
    return write_layout(out, "moonshine", metadata, source, layout, tensor_type, out_type, progress)


def _metadata(source: MoonshineSource, hp: dict, variant: str, name: str, out_type: str, n_params: int) -> list[Meta]:
    h, vocab = source.hparams, source.vocabulary
    m = general_metadata(name, "moonshine", n_params, "Useful Sensors", "UsefulSensors", "mit", "MIT License",
                         "https://opensource.org/license/mit", out_type, ["en"], variant,
                         lang_detect=False, translate=False, timestamps=False)
    m += [
        # transcribe.cpp's tag for SentencePiece-style BPE; the normalizer (a leading ▁, spaces as ▁)
        # is applied when encoding, so there is no pre-tokenizer
        Meta("tokenizer.ggml.model", "STRING", "bpe"),
        Meta("tokenizer.ggml.pre", "STRING", "default"),
        Meta("tokenizer.ggml.byte_fallback", "BOOL", True),
        Meta("tokenizer.ggml.unknown_token_id", "UINT32", vocab.id("<unk>")),
        Meta("tokenizer.ggml.bos_token_id", "UINT32", h.bos),
        Meta("tokenizer.ggml.eos_token_id", "UINT32", h.eos),
        Meta("tokenizer.ggml.padding_token_id", "UINT32", h.pad),
        Meta("tokenizer.ggml.add_bos_token", "BOOL", True),
    ]
    for stack, n_layers, heads, kv_heads, activation in (
        ("encoder", hp["n_enc"], h.encoder_heads, h.encoder_kv_heads, h.encoder_activation),
        ("decoder", hp["n_dec"], h.decoder_heads, h.decoder_kv_heads, h.decoder_activation),
    ):
        p = f"stt.moonshine.{stack}"
        m += [
            Meta(f"{p}.n_layers", "UINT32", n_layers),
            Meta(f"{p}.d_model", "UINT32", hp["d"]),
            Meta(f"{p}.n_heads", "UINT32", heads),
            Meta(f"{p}.n_kv_heads", "UINT32", kv_heads),
            Meta(f"{p}.ffn_dim", "UINT32", hp["ffn"]),
            Meta(f"{p}.activation", "STRING", activation),
        ]
    m += [
        Meta("stt.moonshine.decoder.vocab_size", "UINT32", hp["vocab"]),
        Meta("stt.moonshine.decoder.max_position_embeddings", "UINT32", h.max_position_embeddings),
        Meta("stt.moonshine.decoder.tie_word_embeddings", "BOOL", True),
        Meta("stt.moonshine.partial_rotary_factor", "FLOAT32", h.partial_rotary_factor),
        Meta("stt.moonshine.rope_theta", "FLOAT32", h.rope_theta),
        Meta("stt.moonshine.attention_bias", "BOOL", False),
        Meta("stt.moonshine.pad_head_dim_to_multiple_of", "UINT32", h.pad_head_dim_to_multiple_of),
        Meta("stt.moonshine.conv_stem.channels", "ARRAY[INT32]", [hp["d"], 2 * hp["d"], hp["d"]]),
        Meta("stt.moonshine.conv_stem.kernel_sizes", "ARRAY[INT32]", list(STEM_KERNELS)),
        Meta("stt.moonshine.conv_stem.strides", "ARRAY[INT32]", list(STEM_STRIDES)),
        Meta("stt.moonshine.conv_stem.groupnorm_num_groups", "UINT32", 1),
        Meta("stt.moonshine.conv_stem.groupnorm_eps", "FLOAT32", GROUPNORM_EPS),
        Meta("stt.moonshine.decoder_start_token_id", "UINT32", h.decoder_start),
        Meta("stt.moonshine.bos_token_id", "UINT32", h.bos),
        Meta("stt.moonshine.eos_token_id", "UINT32", h.eos),
        Meta("stt.moonshine.pad_token_id", "UINT32", h.pad),
        # the raw waveform goes straight into the conv stem; num_mels is its input channel count
        Meta("stt.frontend.type", "STRING", "raw"),
        Meta("stt.frontend.sample_rate", "UINT32", SAMPLE_RATE),
        Meta("stt.frontend.num_mels", "UINT32", 1),
    ]
    return m + vocabulary_metadata(vocab)
