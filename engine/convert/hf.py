"""Read a Hugging Face transformers Whisper checkpoint (``config.json``, ``model.safetensors``,
``generation_config.json``, and ``tokenizer.json`` or ``vocab.json`` + ``merges.txt``).

Weight names are ``WhisperForConditionalGeneration``'s state dict: ``model.encoder.conv1.weight``,
``model.encoder.layers.N.self_attn.q_proj.weight``, ``model.decoder.layers.N.encoder_attn.k_proj.weight``...
``proj_out.weight`` is tied to the token embedding and, when saved at all, skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from sayso.engine.convert.checkpoint_json import load_json
from sayso.engine.convert.source import WhisperSource
from sayso.engine.convert.tokenizer import read_vocabulary
from sayso.engine.errors import ModelFileError

_TOP = {
    "encoder.conv1": "enc.conv.0",
    "encoder.conv2": "enc.conv.1",
    "encoder.embed_positions": "enc.pos_emb",
    "encoder.layer_norm": "enc.final_norm",
    "decoder.embed_tokens": "dec.token_embd",
    "decoder.embed_positions": "dec.pos_emb",
    "decoder.layer_norm": "dec.final_norm",
}
_SHARED_BLOCK = {"final_layer_norm": "norm_ffn", "fc1": "ffn.fc1", "fc2": "ffn.fc2"}
_ENCODER_BLOCK = {
    "self_attn_layer_norm": "norm_attn",
    **{f"self_attn.{p}_proj": f"attn.{p}" for p in ("q", "k", "v", "out")},
    **_SHARED_BLOCK,
}
_DECODER_BLOCK = {
    "self_attn_layer_norm": "norm_self",
    **{f"self_attn.{p}_proj": f"self_attn.{p}" for p in ("q", "k", "v", "out")},
    "encoder_attn_layer_norm": "norm_cross",
    **{f"encoder_attn.{p}_proj": f"cross_attn.{p}" for p in ("q", "k", "v", "out")},
    **_SHARED_BLOCK,
}
_TIED = "proj_out.weight"
_LAYER = re.compile(r"(encoder|decoder)\.layers\.(\d+)\.(.+)")


def gguf_name(hf_name: str) -> str | None:
    """transcribe.cpp's name for a transformers Whisper weight, or None when it has none."""
    stem, _, leaf = hf_name.removeprefix("model.").rpartition(".")
    if stem in _TOP:
        return f"{_TOP[stem]}.{leaf}"
    m = _LAYER.fullmatch(stem)
    if m is None:
        return None
    stack, index, part = m.groups()
    block = _ENCODER_BLOCK if stack == "encoder" else _DECODER_BLOCK
    return f"{stack[:3]}.blocks.{index}.{block[part]}.{leaf}" if part in block else None


def read_hf_whisper(model_dir: Path) -> WhisperSource:
    """A transformers Whisper checkpoint as GGUF-named float arrays, plus tokenizer and decoding config."""
    config = load_json(model_dir / "config.json")
    if config.get("model_type") != "whisper":
        raise ModelFileError(model_dir / "config.json", f"describes a {config.get('model_type')!r} model, not Whisper")
    generation_path = model_dir / "generation_config.json"
    generation = load_json(generation_path) if generation_path.is_file() else {}

    tensors: dict[str, np.ndarray] = {}
    unknown: list[str] = []
    for hf_name, value in _read_safetensors(model_dir / "model.safetensors").items():
        name = gguf_name(hf_name)
        if name is None:
            if hf_name != _TIED:
                unknown.append(hf_name)
        elif name.endswith(".k.bias"):  # Whisper has none; a zero one changes nothing
            if np.any(value):
                raise ModelFileError(model_dir / "model.safetensors", f"{hf_name} is not zero")
        else:
            tensors[name] = value
    if unknown:
        raise ModelFileError(
            model_dir / "model.safetensors",
            f"has weights a Whisper model doesn't have: {', '.join(sorted(unknown)[:5])}",
        )

    def decoding(key: str) -> list[int]:
        """Suppression lists: generation_config.json, or config.json in older checkpoints."""
        return [int(t) for t in (generation.get(key) or config.get(key) or [])]

    return WhisperSource(
        path=model_dir,
        tensors=tensors,
        encoder_heads=int(config["encoder_attention_heads"]),
        decoder_heads=int(config["decoder_attention_heads"]),
        activation=str(config.get("activation_function", "gelu")),
        scale_embedding=bool(config.get("scale_embedding", False)),
        vocabulary=read_vocabulary(model_dir, int(config["vocab_size"])),
        suppress_tokens=decoding("suppress_tokens"),
        begin_suppress_tokens=decoding("begin_suppress_tokens"),
    )


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        tensors = load_file(path)
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise ModelFileError(path, f"can't be read as safetensors ({e})") from None
    for name, value in tensors.items():
        if value.dtype not in (np.float16, np.float32):
            raise ModelFileError(path, f"weight {name} is {value.dtype}; only float16 and float32 are read")
    return tensors
