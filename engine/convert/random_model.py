"""Random-weight models in transcribe.cpp's exact GGUF layouts, for tests that need a model of a family
whose real weights are not at hand (Parakeet TDT v2/v3, GigaAM v3 CTC/RNN-T, char and SentencePiece).

The keys, their GGUF types and order, the tensor names, shapes, types (all F32, as the reference
converters ``convert-parakeet.py`` and ``convert-gigaam.py`` write them) and order are the converters';
only the values are random. ``small`` shrinks the dimensions (two layers, d_model 64) so a model runs
in a second on the numpy backend; without it the dimensions are the published ones.

Weights are seeded normal draws scaled by 1/sqrt(fan-in) so activations keep unit scale through the
layers, and the output heads are scaled and biased so the random model emits a varied, deterministic
token sequence with clear argmax margins (blank on most frames, a spread of tokens and durations on
the rest) rather than only blanks or one token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.convert.mel import hann_periodic
from engine.errors import SaysoError
from engine.gguf.writer import Meta, TensorOut, write_gguf

SAMPLE_RATE = 16000
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL = 1, 2, 3  # tokenizer.ggml.token_type values
SP_SPACE = "\u2581"  # SentencePiece's word-start marker

PARAKEET_V3_LANGUAGES = [
    "bg", "hr", "cs", "da", "nl", "en", "et", "fi", "fr", "de", "el", "hu", "it",
    "lv", "lt", "mt", "pl", "pt", "ro", "ru", "sk", "sl", "es", "sv", "uk",
]  # fmt: skip
GIGAAM_CHARS = [" "] + [chr(c) for c in range(ord("а"), ord("я") + 1)]  # space + а..я (no ё): 33 entries


@dataclass(frozen=True)
class Dims:
    """The shape of a Conformer model: encoder, predictor/joint (transducers) and vocabulary."""

    n_layers: int
    d_model: int
    n_heads: int
    d_ff: int
    conv_kernel: int
    pred_hidden: int
    joint_hidden: int
    vocab: int  # tokens without the blank
    sub_channels: int = 0  # Parakeet's 2-D subsampling channels
    pred_layers: int = 1


@dataclass(frozen=True)
class Family:
    """One ``--random`` family: the variant facts the converter takes from its profile."""

    arch: str  # general.architecture
    variant: str  # stt.variant
    head: str  # "tdt", "rnnt" or "ctc"
    tokenizer: str  # "sentencepiece" or "char"
    full: Dims
    small: Dims


def _parakeet_dims(vocab: int, small_vocab: int) -> tuple[Dims, Dims]:
    full = Dims(24, 1024, 8, 4096, 9, 640, 640, vocab, sub_channels=256, pred_layers=2)
    small = Dims(2, 64, 4, 256, 9, 32, 32, small_vocab, sub_channels=16, pred_layers=2)
    return full, small


def _gigaam_dims(vocab: int, small_vocab: int) -> tuple[Dims, Dims]:
    return Dims(16, 768, 16, 3072, 5, 320, 320, vocab), Dims(2, 64, 4, 256, 5, 32, 32, small_vocab)


FAMILIES = {
    "parakeet-tdt-v2": Family("parakeet", "tdt-0.6b-v2", "tdt", "sentencepiece", *_parakeet_dims(1024, 96)),
    "parakeet-tdt-v3": Family("parakeet", "tdt-0.6b-v3", "tdt", "sentencepiece", *_parakeet_dims(8192, 160)),
    "gigaam-v3-ctc": Family("gigaam", "gigaam-v3-ctc", "ctc", "char", *_gigaam_dims(33, 33)),
    "gigaam-v3-rnnt": Family("gigaam", "gigaam-v3-rnnt", "rnnt", "char", *_gigaam_dims(33, 33)),
    "gigaam-v3-e2e-ctc": Family("gigaam", "gigaam-v3-e2e-ctc", "ctc", "sentencepiece", *_gigaam_dims(256, 64)),
    "gigaam-v3-e2e-rnnt": Family("gigaam", "gigaam-v3-e2e-rnnt", "rnnt", "sentencepiece", *_gigaam_dims(1024, 96)),
}
"""``--random`` name -> family facts."""

GIGAAM_DISPLAY_NAMES = {
    "gigaam-v3-ctc": "GigaAM v3 CTC",
    "gigaam-v3-e2e-ctc": "GigaAM v3 E2E-CTC",
    "gigaam-v3-rnnt": "GigaAM v3 RNN-T",
    "gigaam-v3-e2e-rnnt": "GigaAM v3 E2E-RNN-T",
}
TDT_DURATIONS = [0, 1, 2, 3, 4]
TDT_MAX_SYMBOLS = 10
JOINT_GAIN = 6.0  # output-head scale: token logits a few units apart, so argmax decisions are clear
PRED_GAIN = 3.0  # the predictor's weight in the joint: an emitted token reshuffles the next decision
RELU_MEAN = 0.45  # mean of max(0, z) for z ~ N(0, 1.3): the joint's hidden units


def write_random_model(family: str, out: str | Path, small: bool = False, seed: int = 0) -> Path:
    """Write a random-weight model of ``family`` (a key of ``FAMILIES``) to ``out``; returns ``out``."""
    if family not in FAMILIES:
        raise SaysoError(f"Unknown family {family!r} for a random model; use one of {', '.join(FAMILIES)}.")
    spec = FAMILIES[family]
    dims = spec.small if small else spec.full
    draw = _Draw(np.random.default_rng(seed))
    out = Path(out)
    WRITERS[spec.arch](spec, dims, draw, out)
    return out


class _Draw:
    """Seeded random tensors, float32."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def normal(self, shape: tuple[int, ...], std: float, mean: float = 0.0) -> np.ndarray:
        values = self.rng.standard_normal(shape, dtype=np.float32)
        values *= np.float32(std)
        if mean:
            values += np.float32(mean)
        return values

    def linear(self, n_out: int, n_in: int, gain: float = 1.0) -> np.ndarray:
        """A weight [n_out, n_in] that keeps unit-variance inputs at variance ``gain**2``."""
        return self.normal((n_out, n_in), gain / np.sqrt(n_in))

    def uniform(self, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
        return self.rng.uniform(low, high, shape).astype(np.float32)


# ---- vocabularies -------------------------------------------------------------------------------


def sentencepiece_pieces(n: int, alphabet: str) -> list[str]:
    """``n`` distinct SentencePiece-like pieces: ``<unk>`` first, then word starts (``▁`` + letters)
    and continuations (letters), the letters spelling the piece's index in base len(alphabet)."""
    pieces = ["<unk>"]
    i = 0
    while len(pieces) < n:
        number, letters = i // 2 + 1, ""
        while number:
            number, digit = divmod(number - 1, len(alphabet))
            letters = alphabet[digit] + letters
        pieces.append((SP_SPACE if i % 2 == 0 else "") + letters)
        i += 1
    return pieces


@dataclass(frozen=True)
class Vocabulary:
    """tokenizer.ggml.* values: pieces with the blank appended last, as the converters write them."""

    model: str  # tokenizer.ggml.model: "bpe" (SentencePiece) or "char"
    tokens: list[str]
    scores: list[float]
    types: list[int]
    unknown_id: int | None

    @property
    def blank_id(self) -> int:
        return len(self.tokens) - 1


def _vocabulary(kind: str, size: int, alphabet: str) -> Vocabulary:
    if kind == "char":
        tokens = GIGAAM_CHARS[:size] + ["<blank>"]
        return Vocabulary("char", tokens, [0.0] * len(tokens), [TOKEN_NORMAL] * size + [TOKEN_CONTROL], None)
    pieces = sentencepiece_pieces(size, alphabet)
    scores = [0.0] + [-float(i) / 8 for i in range(1, size)] + [0.0]
    types = [TOKEN_UNKNOWN] + [TOKEN_NORMAL] * (size - 1) + [TOKEN_CONTROL]
    return Vocabulary("bpe", pieces + ["<blank>"], scores, types, 0)


def _tokenizer_meta(vocab: Vocabulary) -> tuple[list[Meta], list[Meta], list[Meta]]:
    """(model key, bulk arrays, id keys) so each family can place them where its converter does."""
    model = [Meta("tokenizer.ggml.model", "STRING", vocab.model)]
    bulk = [
        Meta("tokenizer.ggml.tokens", "ARRAY[STRING]", vocab.tokens),
        Meta("tokenizer.ggml.scores", "ARRAY[FLOAT32]", vocab.scores),
        Meta("tokenizer.ggml.token_type", "ARRAY[INT32]", vocab.types),
    ]
    ids = [] if vocab.unknown_id is None else [Meta("tokenizer.ggml.unknown_token_id", "UINT32", vocab.unknown_id)]
    ids.append(Meta("tokenizer.ggml.blank_token_id", "UINT32", vocab.blank_id))
    return model, bulk, ids


# ---- Conformer pieces shared by both families -----------------------------------------------------


def _block(draw: _Draw, d: Dims, prefix: str, norm_name: str, with_bias: bool, gigaam: bool) -> list[tuple[str, np.ndarray]]:
    """One Conformer block's tensors in its converter's order (``gigaam``: GigaAM's table, rotary
    attention and a LayerNorm in the conv module; else Parakeet's, rel-pos attention and BatchNorm)."""
    dm, k = d.d_model, d.conv_kernel
    dh = dm // d.n_heads

    def norm(name: str) -> list[tuple[str, np.ndarray]]:
        return [(f"{name}.weight", draw.normal((dm,), 0.1, 1.0)), (f"{name}.bias", bias(dm))]

    def bias(n: int) -> np.ndarray:
        return draw.normal((n,), 0.02)

    def ffn(name: str) -> list[tuple[str, np.ndarray]]:
        parts = [(f"{name}.linear1.weight", draw.linear(d.d_ff, dm))]
        parts += [(f"{name}.linear1.bias", bias(d.d_ff))] if gigaam else []
        parts += [(f"{name}.linear2.weight", _zero_sum(draw.linear(dm, d.d_ff, np.sqrt(2))))]
        parts += [(f"{name}.linear2.bias", bias(dm))] if gigaam else []
        return parts

    def attn_linear(name: str) -> list[tuple[str, np.ndarray]]:
        weight = [(f"attn.{name}.weight", draw.linear(dm, dm))]
        return weight + ([(f"attn.{name}.bias", bias(dm))] if gigaam else [])

    conv_weights = {
        "pointwise1": draw.linear(2 * dm, dm)[:, :, None],
        "depthwise": draw.normal((dm, 1, k), 1.0 / np.sqrt(k)),
        "pointwise2": _zero_sum(draw.linear(dm, dm, np.sqrt(2)))[:, :, None],
    }
    if gigaam:
        tensors = norm("norm_ff1") + ffn("ff1") + norm("norm_conv")
        for name in ("pointwise1", "depthwise"):
            tensors += [(f"conv.{name}.weight", conv_weights[name]), (f"conv.{name}.bias", bias(conv_weights[name].shape[0]))]
        tensors += [("conv.ln.weight", draw.normal((dm,), 0.1, 1.0)), ("conv.ln.bias", bias(dm))]
        tensors += [("conv.pointwise2.weight", conv_weights["pointwise2"]), ("conv.pointwise2.bias", bias(dm))]
        tensors += norm("norm_attn")
        for name in ("linear_q", "linear_k", "linear_v", "linear_out"):
            tensors += attn_linear(name)
        tensors += norm("norm_ff2") + ffn("ff2") + norm(norm_name)
    else:
        tensors = norm("norm_ff1") + ffn("ff1") + norm("norm_attn")
        for name in ("linear_q", "linear_k", "linear_v", "linear_out", "linear_pos"):
            tensors += attn_linear(name)
        tensors += [("attn.pos_bias_u", draw.normal((d.n_heads, dh), 0.1)),
                    ("attn.pos_bias_v", draw.normal((d.n_heads, dh), 0.1))]
        tensors += norm("norm_conv")
        tensors += [(f"conv.{name}.weight", conv_weights[name]) for name in ("pointwise1", "depthwise", "pointwise2")]
        tensors += [("conv.bn.weight", draw.normal((dm,), 0.1, 1.0)), ("conv.bn.bias", bias(dm)),
                    ("conv.bn.running_mean", bias(dm)),
                    ("conv.bn.running_var", draw.uniform((dm,), 0.5, 1.5))]
        tensors += norm("norm_ff2") + ffn("ff2") + norm(norm_name)
        if with_bias:  # convert-parakeet.py appends the use_bias tensors after the block's table
            tensors += [("ff1.linear1.bias", bias(d.d_ff)), ("ff1.linear2.bias", bias(dm))]
            tensors += [(f"attn.{n}.bias", bias(dm)) for n in ("linear_q", "linear_k", "linear_v", "linear_out")]
            tensors += [("conv.pointwise1.bias", bias(2 * dm)), ("conv.depthwise.bias", bias(dm)),
                        ("conv.pointwise2.bias", bias(dm)), ("ff2.linear1.bias", bias(d.d_ff)),
                        ("ff2.linear2.bias", bias(dm))]
    return [(f"{prefix}.{name}", value) for name, value in tensors]


def _transducer(draw: _Draw, d: Dims, n_outputs: int, n_tokens: int, blank_bias: float,
                duration_bias: list[float] | None = None) -> list[tuple[str, np.ndarray]]:
    """Predictor (embedding + LSTM layers, the two PyTorch biases summed) and joint network.

    The joint's output rows are scaled so token logits spread over several units (clear argmax
    margins); the blank's bias sets how often a frame is left without a token, and the duration
    biases (TDT) spread the frame skips over the durations.
    """
    h, j = d.pred_hidden, d.joint_hidden
    tensors = [("pred.embed.weight", draw.normal((n_tokens, h), 1.0))]
    for i in range(d.pred_layers):
        tensors += [(f"pred.lstm.{i}.Wx", draw.linear(4 * h, h)), (f"pred.lstm.{i}.Wh", draw.linear(4 * h, h)),
                    (f"pred.lstm.{i}.bias", draw.normal((4 * h,), 0.1))]
    out_w = draw.linear(n_outputs, j, gain=JOINT_GAIN)
    # The joint's hidden units are ReLUs of roughly unit-variance sums, so they share a positive mean
    # (about 0.45) that would give every output row a fixed offset, and the same token on every
    # frame; the bias cancels it, leaving the part that follows the audio and the predictor state.
    out_b = -RELU_MEAN * out_w.sum(axis=1) + draw.normal((n_outputs,), 0.2)
    out_b[n_tokens - 1] += blank_bias
    if duration_bias is not None:
        out_b[n_tokens:] += np.asarray(duration_bias, np.float32)
    tensors += [
        ("joint.enc.weight", draw.linear(j, d.d_model)), ("joint.enc.bias", draw.normal((j,), 0.1)),
        ("joint.pred.weight", draw.linear(j, h, PRED_GAIN)), ("joint.pred.bias", draw.normal((j,), 0.1)),
        ("joint.out.weight", out_w), ("joint.out.bias", out_b),
    ]  # fmt: skip
    return tensors


def _ctc_head(draw: _Draw, d: Dims, n_classes: int, blank_bias: float) -> list[tuple[str, np.ndarray]]:
    """The CTC head: a k=1 Conv1d [n_classes, d_model, 1] with bias; blank last."""
    bias = draw.normal((n_classes,), 0.2)
    bias[-1] += blank_bias
    return [("head.ctc.weight", draw.linear(n_classes, d.d_model, gain=JOINT_GAIN)[:, :, None]), ("head.ctc.bias", bias)]


def _size_label(n_params: int) -> str:
    if n_params >= 1_000_000_000:
        return f"{n_params / 1e9:.1f}B"
    return f"{n_params / 1e6:.0f}M" if n_params >= 1_000_000 else f"{n_params / 1e3:.0f}K"


def _f32(tensors: list[tuple[str, np.ndarray]]) -> list[TensorOut]:
    return [TensorOut(name, values, "F32") for name, values in tensors]


# ---- Parakeet ---------------------------------------------------------------------------------------


def _write_parakeet(spec: Family, d: Dims, draw: _Draw, out: Path) -> None:
    v3 = spec.variant.endswith("v3")
    vocab = _vocabulary("sentencepiece", d.vocab, "etaoinshrdlcumwfgypbvkjxqz")
    n_mels, channels = 128, d.sub_channels
    freq_out = n_mels // 8  # three stride-2 convs over the 128 mel bins
    tensors = [
        ("enc.pre_encode.conv.0.weight", draw.normal((channels, 1, 3, 3), 1.0 / 3)),
        ("enc.pre_encode.conv.0.bias", draw.normal((channels,), 0.1)),
    ]
    for dw, pw in ((2, 3), (5, 6)):
        tensors += [
            (f"enc.pre_encode.conv.{dw}.weight", draw.normal((channels, 1, 3, 3), 1.0 / 3)),
            (f"enc.pre_encode.conv.{dw}.bias", draw.normal((channels,), 0.1)),
            (f"enc.pre_encode.conv.{pw}.weight", _zero_sum(draw.linear(channels, channels, np.sqrt(2)))[:, :, None, None]),
            (f"enc.pre_encode.conv.{pw}.bias", draw.normal((channels,), 0.1)),
        ]
    tensors += [("enc.pre_encode.out.weight", _zero_sum(draw.linear(d.d_model, channels * freq_out, np.sqrt(2)))),
                ("enc.pre_encode.out.bias", draw.normal((d.d_model,), 0.1))]
    for i in range(d.n_layers):
        tensors += _block(draw, d, f"enc.blocks.{i}", "norm_out", with_bias=False, gigaam=False)
    n_outputs = d.vocab + 1 + len(TDT_DURATIONS)
    tensors += _transducer(draw, d, n_outputs, d.vocab + 1, blank_bias=9.0, duration_bias=[0.0, 2.0, 1.5, 0.5, 0.0])

    model_key, bulk, ids = _tokenizer_meta(vocab)
    languages = PARAKEET_V3_LANGUAGES if v3 else ["en"]
    meta = [
        Meta("general.basename", "STRING", "parakeet-tdt"),
        Meta("general.size_label", "STRING", "0.6B"),
        Meta("general.version", "STRING", "v3" if v3 else "v2"),
        Meta("general.file_type", "UINT32", 0),  # ALL_F32
        Meta("general.languages", "ARRAY[STRING]", languages),
        Meta("stt.variant", "STRING", spec.variant),
    ]
    if v3:
        meta.append(Meta("stt.capability.lang_detect", "BOOL", True))
    meta += [Meta("stt.parakeet.head_kind", "STRING", spec.head)] + model_key + bulk + ids
    encoder = [("n_layers", d.n_layers), ("d_model", d.d_model), ("n_heads", d.n_heads), ("d_ff", d.d_ff),
               ("conv_kernel", d.conv_kernel), ("subsampling_factor", 8), ("subsampling_channels", channels),
               ("pos_emb_max_len", 5000)]
    meta += [Meta(f"stt.parakeet.encoder.{key}", "UINT32", value) for key, value in encoder]
    meta += [
        Meta("stt.parakeet.encoder.use_bias", "BOOL", False),
        Meta("stt.parakeet.predictor.hidden", "UINT32", d.pred_hidden),
        Meta("stt.parakeet.predictor.n_layers", "UINT32", d.pred_layers),
        Meta("stt.parakeet.predictor.vocab", "UINT32", d.vocab + 1),
        Meta("stt.parakeet.joint.hidden", "UINT32", d.joint_hidden),
        Meta("stt.parakeet.joint.num_extra_outputs", "UINT32", len(TDT_DURATIONS)),
        Meta("stt.parakeet.joint.activation", "STRING", "relu"),
        Meta("stt.parakeet.tdt.durations", "ARRAY[INT32]", TDT_DURATIONS),
        Meta("stt.parakeet.tdt.max_symbols", "UINT32", TDT_MAX_SYMBOLS),
    ]
    meta += _frontend_meta(n_mels=n_mels, n_fft=512, win_length=400, window="hann", normalize="per_feature",
                           dither=1e-5, pre_emphasis=0.97)
    write_gguf(out, "parakeet", meta, _f32(tensors))


def _frontend_meta(n_mels: int, n_fft: int, win_length: int, window: str, normalize: str, dither: float,
                   pre_emphasis: float) -> list[Meta]:
    """The stt.frontend.* keys both converters write, in their order."""
    return [
        Meta("stt.frontend.type", "STRING", "mel"),
        Meta("stt.frontend.num_mels", "UINT32", n_mels),
        Meta("stt.frontend.sample_rate", "UINT32", SAMPLE_RATE),
        Meta("stt.frontend.n_fft", "UINT32", n_fft),
        Meta("stt.frontend.win_length", "UINT32", win_length),
        Meta("stt.frontend.hop_length", "UINT32", 160),
        Meta("stt.frontend.window", "STRING", window),
        Meta("stt.frontend.normalize", "STRING", normalize),
        Meta("stt.frontend.dither", "FLOAT32", dither),
        Meta("stt.frontend.pre_emphasis", "FLOAT32", pre_emphasis),
        Meta("stt.frontend.f_min", "FLOAT32", 0.0),
        Meta("stt.frontend.f_max", "FLOAT32", SAMPLE_RATE / 2),
    ]


# ---- GigaAM -----------------------------------------------------------------------------------------


def _zero_sum(kernel: np.ndarray) -> np.ndarray:
    """``kernel`` [C_out, ...] with each output's weights shifted to sum to zero: GigaAM's log-mel is
    not normalised (it sits around -10, silence at -20.7), and a kernel that ignores the overall level
    answers to the spectrum's shape, which varies from frame to frame, instead of its loudness."""
    return kernel - kernel.mean(axis=tuple(range(1, kernel.ndim)), keepdims=True)


def htk_mel_filterbank(sample_rate: int, n_fft: int, n_mels: int, f_min: float = 0.0,
                       f_max: float | None = None) -> np.ndarray:
    """torchaudio's ``melscale_fbanks`` with mel_scale="htk", norm=None, transposed to
    [n_mels, n_fft // 2 + 1]: the filterbank GigaAM's preprocessor carries."""
    f_max = sample_rate / 2 if f_max is None else f_max
    all_freqs = np.linspace(0, sample_rate // 2, n_fft // 2 + 1)
    m_min, m_max = (2595.0 * np.log10(1.0 + f / 700.0) for f in (f_min, f_max))
    f_pts = 700.0 * (10 ** (np.linspace(m_min, m_max, n_mels + 2) / 2595.0) - 1.0)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return np.maximum(0.0, np.minimum(down, up)).T.astype(np.float32)


def _write_gigaam(spec: Family, d: Dims, draw: _Draw, out: Path) -> None:
    n_mels, n_fft, subs_kernel = 64, 320, 5
    vocab = _vocabulary(spec.tokenizer, d.vocab, "оеаинтсрвлкмдпуяыьгзбчйхжшюцщэфъё.,?!-ОЕАИНТСРВЛКМДПУ")
    n_classes = d.vocab + 1
    tensors = [
        ("enc.pre_encode.conv.0.weight", _zero_sum(draw.normal((d.d_model, n_mels, subs_kernel), 1.0 / np.sqrt(n_mels * subs_kernel)))),
        ("enc.pre_encode.conv.0.bias", draw.normal((d.d_model,), 0.1)),
        ("enc.pre_encode.conv.2.weight", _zero_sum(draw.normal((d.d_model, d.d_model, subs_kernel), np.sqrt(2.0 / (d.d_model * subs_kernel))))),
        ("enc.pre_encode.conv.2.bias", draw.normal((d.d_model,), 0.1)),
    ]  # fmt: skip
    for i in range(d.n_layers):
        tensors += _block(draw, d, f"enc.blocks.{i}", "norm_out", with_bias=True, gigaam=True)
    if spec.head == "rnnt":
        tensors += _transducer(draw, d, n_classes, n_classes, blank_bias=8.0)
    else:
        tensors += _ctc_head(draw, d, n_classes, blank_bias=8.0)
    # The log-mel of speech sits around -5..5 (log of power, unnormalised), so the first conv sees
    # inputs of a few units; the scale above keeps its output near unit variance for such input.
    frontend = [("frontend.mel_filterbank", htk_mel_filterbank(SAMPLE_RATE, n_fft, n_mels)),
                ("frontend.window", hann_periodic(n_fft))]
    n_params = sum(v.size for _, v in tensors)

    model_key, bulk, ids = _tokenizer_meta(vocab)
    meta = [
        Meta("general.name", "STRING", GIGAAM_DISPLAY_NAMES[spec.variant]),
        Meta("general.basename", "STRING", "gigaam-v3"),
        Meta("general.version", "STRING", "v3"),
        Meta("general.size_label", "STRING", _size_label(n_params)),
        Meta("general.author", "STRING", "Salute Developers"),
        Meta("general.organization", "STRING", "ai-sage"),
        Meta("general.license", "STRING", "mit"),
        Meta("general.license.name", "STRING", "MIT License"),
        Meta("general.license.link", "STRING", "https://opensource.org/license/mit"),
        Meta("general.file_type", "UINT32", 0),  # ALL_F32
        Meta("general.languages", "ARRAY[STRING]", ["ru"]),
        Meta("stt.variant", "STRING", spec.variant),
        Meta("stt.gigaam.head_kind", "STRING", spec.head),
    ]
    meta += model_key + ids
    encoder = [("n_layers", d.n_layers), ("d_model", d.d_model), ("n_heads", d.n_heads), ("d_ff", d.d_ff),
               ("conv_kernel", d.conv_kernel), ("subsampling_factor", 4), ("subs_kernel_size", subs_kernel),
               ("pos_emb_max_len", 5000), ("feat_in", n_mels)]
    meta += [Meta(f"stt.gigaam.encoder.{key}", "UINT32", value) for key, value in encoder]
    meta += [Meta("stt.gigaam.encoder.self_attention_model", "STRING", "rotary"),
             Meta("stt.gigaam.encoder.conv_norm_type", "STRING", "layer_norm")]
    if spec.head == "rnnt":
        meta += [
            Meta("stt.gigaam.predictor.hidden", "UINT32", d.pred_hidden),
            Meta("stt.gigaam.predictor.n_layers", "UINT32", d.pred_layers),
            Meta("stt.gigaam.predictor.vocab", "UINT32", n_classes),
            Meta("stt.gigaam.joint.hidden", "UINT32", d.joint_hidden),
            Meta("stt.gigaam.joint.num_classes", "UINT32", n_classes),
            Meta("stt.gigaam.joint.activation", "STRING", "relu"),
        ]
    else:
        meta += [Meta("stt.gigaam.head.feat_in", "UINT32", d.d_model),
                 Meta("stt.gigaam.head.num_classes", "UINT32", n_classes)]
    meta += _frontend_meta(n_mels=n_mels, n_fft=n_fft, win_length=n_fft, window="hann_periodic", normalize="none",
                           dither=0.0, pre_emphasis=0.0)
    meta += [
        Meta("stt.frontend.center", "BOOL", False),
        Meta("stt.frontend.mel_norm", "STRING", "htk"),
        Meta("stt.frontend.log_clamp_min", "FLOAT32", 1e-9),
        Meta("stt.frontend.log_clamp_max", "FLOAT32", 1e9),
    ]
    meta += bulk  # convert-gigaam.py's writer moves the bulk tokenizer arrays after every scalar key
    write_gguf(out, "gigaam", meta, _f32(frontend + tensors))


WRITERS: dict[str, Callable[[Family, Dims, _Draw, Path], None]] = {"parakeet": _write_parakeet, "gigaam": _write_gigaam}
"""general.architecture -> the writer of its layout."""
