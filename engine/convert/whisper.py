"""Lay a Whisper checkpoint out as transcribe.cpp's Whisper GGUF: its keys, value types, tensor
names, order, shapes and types, so that transcribe.cpp and Sayso read our files and theirs alike.

Tensor types follow transcribe.cpp's files: convolution kernels F16; norms, biases, positional
tables and the frontend F32; the 2-D weight matrices (linear layers and the token embedding) F16
in an ``f16`` file or Q8_0 in a ``q8_0`` file (as its published, quantized files).
"""

from __future__ import annotations

from pathlib import Path

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
from sayso.engine.convert.mel import hann_periodic, mel_filterbank
from sayso.engine.convert.source import WhisperSource
from sayso.engine.errors import ModelFileError, SaysoError
from sayso.engine.gguf.writer import Meta, TensorOut

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
CHUNK_SECONDS = 30

_SIZES = {(384, 4): "tiny", (512, 6): "base", (768, 12): "small", (1024, 24): "medium", (1280, 32): "large"}
"""(d_model, encoder layers) -> Whisper size name."""
ENGLISH_ONLY_VOCAB = 51864  # the .en models' vocabulary; multilingual ones have 51865 (51866 for v3)

_ENCODER_BLOCK = ["norm_attn", "attn.q", "attn.k", "attn.v", "attn.out", "norm_ffn", "ffn.fc1", "ffn.fc2"]
_DECODER_BLOCK = [
    "norm_self", "self_attn.q", "self_attn.k", "self_attn.v", "self_attn.out",
    "norm_cross", "cross_attn.q", "cross_attn.k", "cross_attn.v", "cross_attn.out",
    "norm_ffn", "ffn.fc1", "ffn.fc2",
]  # fmt: skip


def tensor_layout(d: int, n_mels: int, enc_ffn: int, dec_ffn: int, n_enc: int, n_dec: int,
                  n_src: int, n_tgt: int, vocab: int) -> list[tuple[str, tuple[int, ...]]]:  # fmt: skip
    """Every model tensor (frontend excluded) in file order with its numpy shape."""

    def part(name: str, ffn: int) -> list[tuple[str, tuple[int, ...]]]:
        if name.startswith("norm"):
            return [(f"{name}.weight", (d,)), (f"{name}.bias", (d,))]
        if name.endswith(".k"):  # Whisper's key projections have no bias
            return [(f"{name}.weight", (d, d))]
        if name.endswith("fc1"):
            return [(f"{name}.weight", (ffn, d)), (f"{name}.bias", (ffn,))]
        if name.endswith("fc2"):
            return [(f"{name}.weight", (d, ffn)), (f"{name}.bias", (d,))]
        return [(f"{name}.weight", (d, d)), (f"{name}.bias", (d,))]

    layout = [
        ("enc.conv.0.weight", (d, n_mels, 3)), ("enc.conv.0.bias", (d,)),
        ("enc.conv.1.weight", (d, d, 3)), ("enc.conv.1.bias", (d,)),
        ("enc.pos_emb.weight", (n_src, d)),
        ("enc.final_norm.weight", (d,)), ("enc.final_norm.bias", (d,)),
    ]  # fmt: skip
    for i in range(n_enc):
        for name in _ENCODER_BLOCK:
            layout += [(f"enc.blocks.{i}.{n}", s) for n, s in part(name, enc_ffn)]
    layout += [
        ("dec.token_embd.weight", (vocab, d)),
        ("dec.pos_emb.weight", (n_tgt, d)),
        ("dec.final_norm.weight", (d,)), ("dec.final_norm.bias", (d,)),
    ]  # fmt: skip
    for i in range(n_dec):
        for name in _DECODER_BLOCK:
            layout += [(f"dec.blocks.{i}.{n}", s) for n, s in part(name, dec_ffn)]
    return layout


def tensor_type(name: str, shape: tuple[int, ...], out_type: str) -> str:
    """The GGUF type transcribe.cpp's files give a tensor (see the module docstring)."""
    if name.startswith("enc.conv.") and name.endswith(".weight"):
        return "F16"
    is_matrix = name.endswith(".weight") and len(shape) == 2 and ".pos_emb." not in name
    if not is_matrix:
        return "F32"
    return "Q8_0" if out_type == "q8_0" and shape[-1] % 32 == 0 else "F16"


def infer_variant(d_model: int, n_enc: int, n_dec: int, n_mels: int, vocab: int) -> str:
    """transcribe.cpp's variant slug (``whisper-tiny.en``, ``whisper-base``, ``whisper-large-v3``...)."""
    size = _SIZES.get((d_model, n_enc))
    if size is None:
        raise SaysoError(
            f"Can't tell which Whisper this is (d_model {d_model}, {n_enc} encoder layers); "
            "pass its variant name, e.g. variant='whisper-small'."
        )
    if size == "large":
        size = "large-v2" if n_mels == 80 else "large-v3-turbo" if n_dec == 4 else "large-v3"
    return f"whisper-{size}{'.en' if vocab == ENGLISH_ONLY_VOCAB else ''}"


def display_name(variant: str) -> str:
    """``whisper-tiny.en`` -> ``Whisper Tiny (English)``, ``whisper-large-v3`` -> ``Whisper Large V3``."""
    stem = variant.removesuffix(".en")
    words = " ".join(w.capitalize() for w in stem.split("-"))
    return words + (" (English)" if variant.endswith(".en") else "")


def write_whisper_gguf(source: WhisperSource, out: Path, out_type: str = "q8_0", variant: str | None = None,
                       progress: Progress | None = None) -> Path:  # fmt: skip
    """Write ``source`` to ``out`` in transcribe.cpp's Whisper layout (atomically); returns ``out``."""
    check_out_type(out_type)
    t, shape = source.tensors, shape_reader(source)
    d_model, n_mels, _ = shape("enc.conv.0.weight")
    n_enc = sum(1 for n in t if n.startswith("enc.blocks.") and n.endswith(".norm_attn.weight"))
    n_dec = sum(1 for n in t if n.startswith("dec.blocks.") and n.endswith(".norm_self.weight"))
    hp = dict(
        d=d_model, n_mels=n_mels, n_enc=n_enc, n_dec=n_dec,
        enc_ffn=shape("enc.blocks.0.ffn.fc1.weight")[0], dec_ffn=shape("dec.blocks.0.ffn.fc1.weight")[0],
        n_src=shape("enc.pos_emb.weight")[0], n_tgt=shape("dec.pos_emb.weight")[0],
        vocab=shape("dec.token_embd.weight")[0],
    )  # fmt: skip
    layout = tensor_layout(**hp)
    check_shapes(source, layout)
    variant = variant or infer_variant(d_model, n_enc, n_dec, n_mels, hp["vocab"])

    metadata = _metadata(source, hp, variant, out_type, parameter_count(layout))
    frontend = [
        TensorOut("frontend.mel_filterbank", mel_filterbank(SAMPLE_RATE, N_FFT, n_mels), "F32"),
        TensorOut("frontend.window", hann_periodic(N_FFT), "F32"),
    ]
    return write_layout(out, "whisper", metadata, source, layout, tensor_type, out_type, progress, frontend)


def _metadata(source: WhisperSource, hp: dict, variant: str, out_type: str, n_params: int) -> list[Meta]:
    vocab = source.vocabulary

    def token(content: str, required: bool = True) -> int | None:
        i = vocab.id(content)
        if i is None and required:
            raise ModelFileError(source.path, f"tokenizer has no {content} token; is this a Whisper model?")
        return i

    eot, sot = token("<|endoftext|>"), token("<|startoftranscript|>")
    translate = token("<|translate|>", required=False)
    multilingual = hp["vocab"] != ENGLISH_ONLY_VOCAB
    if multilingual:
        if translate is None:
            raise ModelFileError(source.path, "multilingual tokenizer has no <|translate|> token")
        # The language tokens sit between <|startoftranscript|> and <|translate|>; listed in the
        # order of their token text, as Hugging Face's generation_config.json lang_to_id has them.
        languages = [t[2:-2] for t in sorted(vocab.tokens[sot + 1 : translate])]
    else:
        languages = ["en"]

    m = general_metadata(display_name(variant), "whisper", n_params, "OpenAI", "openai", "apache-2.0",
                         "Apache License 2.0", "https://www.apache.org/licenses/LICENSE-2.0", out_type, languages,
                         variant, lang_detect=multilingual, translate=multilingual, timestamps=True)
    if multilingual:
        m.append(Meta("stt.translation.target_languages", "ARRAY[STRING]", ["en"]))
    m += [
        Meta("tokenizer.ggml.model", "STRING", "gpt2"),
        Meta("tokenizer.ggml.pre", "STRING", "gpt2"),
        Meta("tokenizer.ggml.bos_token_id", "UINT32", eot),
        Meta("tokenizer.ggml.eos_token_id", "UINT32", eot),
        Meta("tokenizer.ggml.padding_token_id", "UINT32", eot),
        Meta("tokenizer.ggml.add_bos_token", "BOOL", False),
    ]
    for stack, ffn, n_layers, heads in (
        ("encoder", hp["enc_ffn"], hp["n_enc"], source.encoder_heads),
        ("decoder", hp["dec_ffn"], hp["n_dec"], source.decoder_heads),
    ):
        p = f"stt.whisper.{stack}"
        m += [
            Meta(f"{p}.n_layers", "UINT32", n_layers),
            Meta(f"{p}.d_model", "UINT32", hp["d"]),
            Meta(f"{p}.n_heads", "UINT32", heads),
            Meta(f"{p}.ffn_dim", "UINT32", ffn),
        ]
        if stack == "encoder":
            m += [
                Meta(f"{p}.num_mel_bins", "UINT32", hp["n_mels"]),
                Meta(f"{p}.max_source_positions", "UINT32", hp["n_src"]),
            ]
        else:
            m += [
                Meta(f"{p}.max_target_positions", "UINT32", hp["n_tgt"]),
                Meta(f"{p}.vocab_size", "UINT32", hp["vocab"]),
            ]
        m.append(Meta(f"{p}.activation", "STRING", source.activation))
    m += [
        Meta("stt.whisper.decoder.tie_word_embeddings", "BOOL", True),
        Meta("stt.whisper.decoder.scale_embedding", "BOOL", source.scale_embedding),
        Meta("stt.whisper.decoder_start_token_id", "UINT32", sot),
        Meta("stt.whisper.no_timestamps_token_id", "UINT32", token("<|notimestamps|>")),
        Meta("stt.whisper.sot_token_id", "UINT32", sot),
    ]
    for key, content in (
        ("transcribe_token_id", "<|transcribe|>"),
        ("translate_token_id", "<|translate|>"),
        ("prev_sot_token_id", "<|startofprev|>"),
    ):
        i = token(content, required=False)
        if i is not None:
            m.append(Meta(f"stt.whisper.{key}", "UINT32", i))
    if source.suppress_tokens:
        m.append(Meta("stt.whisper.suppress_tokens", "ARRAY[INT32]", source.suppress_tokens))
    if source.begin_suppress_tokens:
        m.append(Meta("stt.whisper.begin_suppress_tokens", "ARRAY[INT32]", source.begin_suppress_tokens))
    n_samples = CHUNK_SECONDS * SAMPLE_RATE
    m += [
        Meta("stt.frontend.type", "STRING", "mel"),
        Meta("stt.frontend.num_mels", "UINT32", hp["n_mels"]),
        Meta("stt.frontend.sample_rate", "UINT32", SAMPLE_RATE),
        Meta("stt.frontend.n_fft", "UINT32", N_FFT),
        Meta("stt.frontend.win_length", "UINT32", N_FFT),
        Meta("stt.frontend.hop_length", "UINT32", HOP_LENGTH),
        Meta("stt.frontend.window", "STRING", "hann_periodic"),
        Meta("stt.frontend.normalize", "STRING", "whisper_logmel"),
        Meta("stt.frontend.dither", "FLOAT32", 0.0),
        Meta("stt.frontend.pre_emphasis", "FLOAT32", 0.0),
        Meta("stt.frontend.f_min", "FLOAT32", 0.0),
        Meta("stt.frontend.f_max", "FLOAT32", SAMPLE_RATE / 2),
        Meta("stt.frontend.pad_mode", "STRING", "reflect"),
        Meta("stt.frontend.center", "BOOL", True),
        Meta("stt.frontend.mel_norm", "STRING", "slaney"),
        Meta("stt.frontend.chunk_length", "UINT32", CHUNK_SECONDS),
        Meta("stt.frontend.n_samples", "UINT32", n_samples),
        Meta("stt.frontend.nb_max_frames", "UINT32", n_samples // HOP_LENGTH),
    ]
    return m + vocabulary_metadata(vocab)
