"""Read a Hugging Face transformers Moonshine checkpoint (``config.json``, ``generation_config.json``,
``model.safetensors``, ``tokenizer.json``), as UsefulSensors/moonshine-tiny and -base publish it.

Weight names are ``MoonshineForConditionalGeneration``'s state dict (``model.encoder.conv1.weight``,
``model.decoder.layers.N.encoder_attn.q_proj.weight``...); ``proj_out.weight``, when saved at all, is
the token embedding (tied).
"""

from __future__ import annotations

from pathlib import Path

from sayso.engine.convert.checkpoint_json import load_json
from sayso.engine.convert.hf import _read_safetensors
from sayso.engine.convert.moonshine import MoonshineHParams, MoonshineSource, gguf_tensors, read_vocabulary
from sayso.engine.errors import ModelFileError

DEFAULT_PARTIAL_ROTARY_FACTOR = 0.9  # what transformers assumes when a Moonshine config has none


def read_hf_moonshine(model_dir: Path) -> MoonshineSource:
    """A transformers Moonshine checkpoint as GGUF-named float arrays, plus its config and tokenizer."""
    config_path = model_dir / "config.json"
    config = load_json(config_path)
    if config.get("model_type") != "moonshine":
        raise ModelFileError(config_path, f"describes a {config.get('model_type')!r} model, not Moonshine")
    generation_path = model_dir / "generation_config.json"
    generation = load_json(generation_path) if generation_path.is_file() else {}
    if config.get("attention_bias") or not config.get("tie_word_embeddings", True):
        raise ModelFileError(config_path, "has attention biases or a separate output projection, "
                             "which transcribe.cpp's Moonshine layout can't hold")  # fmt: skip
    tensors = gguf_tensors(_read_safetensors(model_dir / "model.safetensors"), model_dir / "model.safetensors")

    def token(key: str, default: int) -> int:
        """A special token id: generation_config.json first (where eos may be a list), then config.json."""
        value = generation.get(key, config.get(key))
        value = value[0] if isinstance(value, list) else value
        return default if value is None else int(value)

    rope = config.get("rope_parameters") or {}
    eos = token("eos_token_id", 2)
    encoder_heads = int(config["encoder_num_attention_heads"])
    decoder_heads = int(config["decoder_num_attention_heads"])
    hparams = MoonshineHParams(
        encoder_heads=encoder_heads,
        decoder_heads=decoder_heads,
        encoder_kv_heads=int(config.get("encoder_num_key_value_heads") or encoder_heads),
        decoder_kv_heads=int(config.get("decoder_num_key_value_heads") or decoder_heads),
        max_position_embeddings=int(config["max_position_embeddings"]),
        partial_rotary_factor=float(rope.get("partial_rotary_factor",
                                             config.get("partial_rotary_factor", DEFAULT_PARTIAL_ROTARY_FACTOR))),
        rope_theta=float(rope.get("rope_theta", config.get("rope_theta", 10000.0))),
        pad_head_dim_to_multiple_of=int(config.get("pad_head_dim_to_multiple_of") or 0),
        encoder_activation=str(config.get("encoder_hidden_act", "gelu")).lower(),
        decoder_activation=str(config.get("decoder_hidden_act", "silu")).lower(),
        bos=token("bos_token_id", 1),
        eos=eos,
        pad=token("pad_token_id", eos),
        decoder_start=token("decoder_start_token_id", 1),
    )  # fmt: skip
    vocabulary = read_vocabulary(model_dir / "tokenizer.json", tensors["dec.token_embd.weight"].shape[0])
    return MoonshineSource(model_dir, tensors, hparams, vocabulary)
