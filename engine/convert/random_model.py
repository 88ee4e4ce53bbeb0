"""Random-weight models in transcribe.cpp's exact GGUF layouts, for tests that need a model of a family
whose real weights are not at hand (Parakeet TDT v2/v3, GigaAM v3 CTC/RNN-T, char and SentencePiece).

The keys, their GGUF types and order, the tensor names, shapes, types (all F32 by default, as the
reference converters ``convert-parakeet.py`` and ``convert-gigaam.py`` write them) and order are the converters';
only the values are random. ``small`` shrinks the dimensions (two layers, d_model 64) so a model runs
in a fraction of a second on the numpy backend; without it the dimensions are the published ones.

Weights are seeded normal draws scaled by 1/sqrt(fan-in), layers that follow a ReLU or SiLU with
rows summing to zero (so the activations' positive mean doesn't pile up as a constant offset), and
queries and keys drawn larger so attention is peaked rather than an average over all frames.

The output head is then calibrated on the model itself: it is run (numpy backend) on a synthetic
speech-like signal, every output's mean over the frames is subtracted (a random encoder's output has
a large part that is the same on every frame, which would make one token win everywhere), and the
blank's bias is set for a share of blank frames (CTC) or a rate of tokens (RNN-T). Transducers get a
joint whose hidden units are split between the encoder and the predictor, the predictor's half fit
so that it lowers the logits of the last few tokens: the model moves on after a token instead of
repeating it, as a trained one does. TDT's durations mostly follow fixed preferences (1 or 2 frames,
rarely 0). The result emits a varied, deterministic token sequence. ``quantized`` writes the
matrices in Q8_0 and the conv kernels in F16, as transcribe.cpp's published files are.

Calibration uses a synthetic signal, so how many tokens a model emits varies between real clips (a
few have none); the tests pick clips on which every family has plenty to say.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sayso.engine.convert.layout import size_label
from sayso.engine.convert.mel import hann_periodic
from sayso.engine.errors import SaysoError
from sayso.engine.gguf.writer import Meta, TensorOut, write_gguf

SAMPLE_RATE = 16000
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL = 1, 2, 3  # tokenizer.ggml.token_type values
SP_SPACE = "\u2581"  # SentencePiece's word-start marker

PARAKEET_V3_LANGUAGES = [
    "bg", "hr", "cs", "da", "nl", "en", "et", "fi", "fr", "de", "el", "hu", "it",
    "lv", "lt", "mt", "pl", "pt", "ro", "ru", "sk", "sl", "es", "sv", "uk",
]  # fmt: skip
GIGAAM_CHARS = [" "] + [chr(c) for c in range(ord("а"), ord("я") + 1)]  # space + а..я (no ё): 33 entries
GIGAAM_DISPLAY_NAMES = {
    "gigaam-v3-ctc": "GigaAM v3 CTC",
    "gigaam-v3-e2e-ctc": "GigaAM v3 E2E-CTC",
    "gigaam-v3-rnnt": "GigaAM v3 RNN-T",
    "gigaam-v3-e2e-rnnt": "GigaAM v3 E2E-RNN-T",
}
TDT_DURATIONS = [0, 1, 2, 3, 4]
TDT_MAX_SYMBOLS = 10

ATTENTION_GAIN = 2.0  # query and key scale: scores of a few units, attention on a few frames
HEAD_GAIN = 6.0  # output-head scale: token logits several units apart, so argmax decisions are clear
SELF_SUPPRESSION = 20.0  # logit units the predictor takes off the token it was just fed
SUPPRESSION_DECAY = (1.0, 0.8, 0.6, 0.4, 0.2)  # share of it for the last token, the one before, ...
BLANK_SHARE = 0.75  # CTC: frames on which blank wins after calibration
TOKEN_RATE = 0.5  # RNN-T: tokens per encoder frame after calibration
DURATION_SCALE = 0.25  # TDT: duration outputs follow the audio a little...
DURATION_PREFERENCE = [-4.0, 2.0, 1.0, 0.0, -1.0]  # ...and mostly these logits: 1 and 2 frames, rarely 0
CALIBRATION_SECONDS = 8.0


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
    small = Dims(2, 64, 4, 256, 9, 48, 2 * small_vocab + 32, small_vocab, sub_channels=16, pred_layers=2)
    return full, small


def _gigaam_dims(vocab: int, small_vocab: int) -> tuple[Dims, Dims]:
    return Dims(16, 768, 16, 3072, 5, 320, 320, vocab), Dims(2, 64, 4, 256, 5, 48, 2 * small_vocab + 32, small_vocab)


FAMILIES = {
    "parakeet-tdt-v2": Family("parakeet", "tdt-0.6b-v2", "tdt", "sentencepiece", *_parakeet_dims(1024, 64)),
    "parakeet-tdt-v3": Family("parakeet", "tdt-0.6b-v3", "tdt", "sentencepiece", *_parakeet_dims(8192, 96)),
    "gigaam-v3-ctc": Family("gigaam", "gigaam-v3-ctc", "ctc", "char", *_gigaam_dims(33, 33)),
    "gigaam-v3-rnnt": Family("gigaam", "gigaam-v3-rnnt", "rnnt", "char", *_gigaam_dims(33, 33)),
    "gigaam-v3-e2e-ctc": Family("gigaam", "gigaam-v3-e2e-ctc", "ctc", "sentencepiece", *_gigaam_dims(256, 48)),
    "gigaam-v3-e2e-rnnt": Family("gigaam", "gigaam-v3-e2e-rnnt", "rnnt", "sentencepiece", *_gigaam_dims(1024, 64)),
}
"""``--random`` name -> family facts."""


@dataclass
class Layout:
    """A model file before writing: metadata in order, tensors in order (float32 values)."""

    arch: str
    meta: list[Meta]
    tensors: dict[str, np.ndarray]  # insertion order is file order

    def write(self, path: Path, quantized: bool = False) -> None:
        """Write ``path`` in F32, as the reference converters do, or ``quantized`` the way
        transcribe.cpp's published files are: matrices Q8_0, convolution kernels F16, the rest F32."""
        types = {name: _published_type(name, v) if quantized else "F32" for name, v in self.tensors.items()}
        write_gguf(path, self.arch, self.meta, [TensorOut(name, v, types[name]) for name, v in self.tensors.items()])


def _published_type(name: str, values: np.ndarray) -> str:
    """transcribe-quantize's Q8_0 policy: norms, biases, BatchNorm statistics, rel-pos biases and the
    frontend stay F32; convolution kernels (3-D, 4-D) go to F16; matrices to Q8_0 (F16 when a row
    isn't a whole number of 32-value blocks)."""
    if values.ndim < 2 or name.startswith("frontend.") or "pos_bias" in name:
        return "F32"
    if values.ndim > 2 or values.shape[-1] % 32:
        return "F16"
    return "Q8_0"


def random_layout(family: str, small: bool = False, seed: int = 0) -> Layout:
    """The drawn model of ``family`` (a key of ``FAMILIES``) before its head is calibrated."""
    if family not in FAMILIES:
        raise SaysoError(f"Unknown family {family!r} for a random model; use one of {', '.join(FAMILIES)}.")
    spec = FAMILIES[family]
    build = _parakeet if spec.arch == "parakeet" else _gigaam
    return build(spec, spec.small if small else spec.full, Draw(np.random.default_rng(seed)))


def write_random_model(family: str, out: str | Path, small: bool = False, seed: int = 0,
                       quantized: bool = False) -> Path:
    """Write a calibrated random-weight model of ``family`` (a key of ``FAMILIES``) to ``out``, in F32
    or ``quantized`` as published files are (``Layout.write``)."""
    layout = random_layout(family, small, seed)
    out = Path(out)
    layout.write(out)  # first with the drawn head, to run the encoder it describes
    _calibrate_head(layout, out, FAMILIES[family].head)
    layout.write(out, quantized)
    return out


class Draw:
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

    def after_activation(self, n_out: int, n_in: int) -> np.ndarray:
        """A weight taking ReLU/SiLU outputs: gain sqrt(2) for the halved variance, rows summing to
        zero so the activations' shared positive mean adds no constant offset."""
        return _zero_sum(self.linear(n_out, n_in, np.sqrt(2)))

    def small(self, n: int) -> np.ndarray:
        """A bias or norm shift: close to zero."""
        return self.normal((n,), 0.02)

    def uniform(self, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
        return self.rng.uniform(low, high, shape).astype(np.float32)


def _zero_sum(kernel: np.ndarray) -> np.ndarray:
    """``kernel`` [C_out, ...] with each output's weights shifted to sum to zero."""
    return kernel - kernel.mean(axis=tuple(range(1, kernel.ndim)), keepdims=True)


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


def _tokenizer_meta(kind: str, size: int, alphabet: str) -> tuple[list[Meta], list[Meta], list[Meta]]:
    """(model key, bulk arrays, id keys) of a vocabulary of ``size`` tokens plus the blank (last), so
    each family can place them where its converter does."""
    if kind == "char":
        tokens, model, unknown = GIGAAM_CHARS[:size] + ["<blank>"], "char", None
        scores, types = [0.0] * (size + 1), [TOKEN_NORMAL] * size + [TOKEN_CONTROL]
    else:
        tokens, model, unknown = sentencepiece_pieces(size, alphabet) + ["<blank>"], "bpe", 0
        scores = [0.0] + [-float(i) / 8 for i in range(1, size)] + [0.0]
        types = [TOKEN_UNKNOWN] + [TOKEN_NORMAL] * (size - 1) + [TOKEN_CONTROL]
    bulk = [
        Meta("tokenizer.ggml.tokens", "ARRAY[STRING]", tokens),
        Meta("tokenizer.ggml.scores", "ARRAY[FLOAT32]", scores),
        Meta("tokenizer.ggml.token_type", "ARRAY[INT32]", types),
    ]
    ids = [] if unknown is None else [Meta("tokenizer.ggml.unknown_token_id", "UINT32", unknown)]
    ids.append(Meta("tokenizer.ggml.blank_token_id", "UINT32", size))
    return [Meta("tokenizer.ggml.model", "STRING", model)], bulk, ids


# ---- Conformer pieces shared by both families -----------------------------------------------------


def _block(draw: Draw, d: Dims, prefix: str, gigaam: bool, use_bias: bool) -> dict[str, np.ndarray]:
    """One Conformer block's tensors in its converter's order: GigaAM's table (rotary attention,
    LayerNorm in the conv module, every linear biased), or Parakeet's (rel-pos attention, BatchNorm,
    the ``use_bias`` biases appended after the table)."""
    dm, k, dh = d.d_model, d.conv_kernel, d.d_model // d.n_heads

    def norm(name: str) -> dict[str, np.ndarray]:
        return {f"{name}.weight": draw.normal((dm,), 0.1, 1.0), f"{name}.bias": draw.small(dm)}

    def ffn(name: str) -> dict[str, np.ndarray]:
        parts = {f"{name}.linear1.weight": draw.linear(d.d_ff, dm)}
        parts |= {f"{name}.linear1.bias": draw.small(d.d_ff)} if gigaam else {}
        parts |= {f"{name}.linear2.weight": draw.after_activation(dm, d.d_ff)}
        return parts | ({f"{name}.linear2.bias": draw.small(dm)} if gigaam else {})

    def attn_linear(name: str) -> dict[str, np.ndarray]:
        # Queries and keys drawn larger so that attention is peaked: a near-uniform attention would
        # add the average over all frames, the same on every frame, to every frame.
        gain = ATTENTION_GAIN if name in ("linear_q", "linear_k") else 1.0
        weight = {f"attn.{name}.weight": draw.linear(dm, dm, gain)}
        return weight | ({f"attn.{name}.bias": draw.small(dm)} if gigaam else {})

    pointwise1 = draw.linear(2 * dm, dm)[:, :, None]
    depthwise = draw.normal((dm, 1, k), 1.0 / np.sqrt(k))
    pointwise2 = draw.after_activation(dm, dm)[:, :, None]
    if gigaam:
        t = norm("norm_ff1") | ffn("ff1") | norm("norm_conv")
        t |= {"conv.pointwise1.weight": pointwise1, "conv.pointwise1.bias": draw.small(2 * dm),
              "conv.depthwise.weight": depthwise, "conv.depthwise.bias": draw.small(dm),
              "conv.ln.weight": draw.normal((dm,), 0.1, 1.0), "conv.ln.bias": draw.small(dm),
              "conv.pointwise2.weight": pointwise2, "conv.pointwise2.bias": draw.small(dm)}
        t |= norm("norm_attn")
        for name in ("linear_q", "linear_k", "linear_v", "linear_out"):
            t |= attn_linear(name)
        t |= norm("norm_ff2") | ffn("ff2") | norm("norm_out")
    else:
        t = norm("norm_ff1") | ffn("ff1") | norm("norm_attn")
        for name in ("linear_q", "linear_k", "linear_v", "linear_out", "linear_pos"):
            t |= attn_linear(name)
        t |= {"attn.pos_bias_u": draw.normal((d.n_heads, dh), 0.1), "attn.pos_bias_v": draw.normal((d.n_heads, dh), 0.1)}
        t |= norm("norm_conv")
        t |= {"conv.pointwise1.weight": pointwise1, "conv.depthwise.weight": depthwise,
              "conv.pointwise2.weight": pointwise2,
              "conv.bn.weight": draw.normal((dm,), 0.1, 1.0), "conv.bn.bias": draw.small(dm),
              "conv.bn.running_mean": draw.small(dm), "conv.bn.running_var": draw.uniform((dm,), 0.5, 1.5)}
        t |= norm("norm_ff2") | ffn("ff2") | norm("norm_out")
        if use_bias:
            sizes = {"ff1.linear1": d.d_ff, "ff1.linear2": dm, "attn.linear_q": dm, "attn.linear_k": dm,
                     "attn.linear_v": dm, "attn.linear_out": dm, "conv.pointwise1": 2 * dm,
                     "conv.depthwise": dm, "conv.pointwise2": dm, "ff2.linear1": d.d_ff, "ff2.linear2": dm}
            t |= {f"{name}.bias": draw.small(n) for name, n in sizes.items()}
    return {f"{prefix}.{name}": value for name, value in t.items()}


def _transducer(draw: Draw, d: Dims, n_tokens: int, n_durations: int) -> dict[str, np.ndarray]:
    """Predictor (embedding + LSTM layers, the two PyTorch biases summed) and joint network.

    The joint's hidden units are split in two: the first half sees only the encoder, the second only
    the predictor, so a logit is (what the frame says) + (what the last tokens say). The LSTM gates
    are biased (input and output gates open, forget gate half open) so its output reflects the last
    few tokens. The output weights of the predictor half and every output bias are set by calibration.
    """
    h, j = d.pred_hidden, d.joint_hidden
    half = j // 2
    t = {"pred.embed.weight": draw.normal((n_tokens, h), 1.0)}
    gate_bias = np.concatenate([np.full(h, 3.0), np.full(h, 0.0), np.zeros(h), np.full(h, 3.0)]).astype(np.float32)
    for i in range(d.pred_layers):
        t |= {f"pred.lstm.{i}.Wx": draw.linear(4 * h, h, 2.0), f"pred.lstm.{i}.Wh": draw.linear(4 * h, h, 0.3),
              f"pred.lstm.{i}.bias": gate_bias + draw.small(4 * h)}
    enc_w, enc_b = draw.linear(j, d.d_model), draw.normal((j,), 0.1)
    pred_w, pred_b = draw.linear(j, h, 2.0), draw.normal((j,), 0.1)
    enc_w[half:], enc_b[half:], pred_w[:half], pred_b[:half] = 0, 0, 0, 0
    out_w = draw.linear(n_tokens + n_durations, half, HEAD_GAIN)
    out_w[n_tokens:] *= np.float32(DURATION_SCALE)  # durations: mostly their calibrated preference
    return t | {
        "joint.enc.weight": enc_w, "joint.enc.bias": enc_b, "joint.pred.weight": pred_w, "joint.pred.bias": pred_b,
        "joint.out.weight": np.concatenate([out_w, np.zeros_like(out_w)], axis=1),
        "joint.out.bias": np.zeros(n_tokens + n_durations, np.float32),
    }  # fmt: skip


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


# ---- Parakeet ---------------------------------------------------------------------------------------


def _parakeet(spec: Family, d: Dims, draw: Draw) -> Layout:
    v3 = spec.variant.endswith("v3")
    n_mels, channels = 128, d.sub_channels
    t = {"enc.pre_encode.conv.0.weight": draw.normal((channels, 1, 3, 3), 1.0 / 3),
         "enc.pre_encode.conv.0.bias": draw.small(channels)}
    for dw, pw in ((2, 3), (5, 6)):
        t |= {f"enc.pre_encode.conv.{dw}.weight": draw.normal((channels, 1, 3, 3), 1.0 / 3),
              f"enc.pre_encode.conv.{dw}.bias": draw.small(channels),
              f"enc.pre_encode.conv.{pw}.weight": draw.after_activation(channels, channels)[:, :, None, None],
              f"enc.pre_encode.conv.{pw}.bias": draw.small(channels)}
    t |= {"enc.pre_encode.out.weight": draw.after_activation(d.d_model, channels * (n_mels // 8)),
          "enc.pre_encode.out.bias": draw.small(d.d_model)}
    for i in range(d.n_layers):
        t |= _block(draw, d, f"enc.blocks.{i}", gigaam=False, use_bias=False)
    t |= _transducer(draw, d, d.vocab + 1, len(TDT_DURATIONS))

    model_key, bulk, ids = _tokenizer_meta("sentencepiece", d.vocab, "etaoinshrdlcumwfgypbvkjxqz")
    meta = [
        Meta("general.basename", "STRING", "parakeet-tdt"),
        Meta("general.size_label", "STRING", "0.6B"),
        Meta("general.version", "STRING", "v3" if v3 else "v2"),
        Meta("general.file_type", "UINT32", 0),  # ALL_F32
        Meta("general.languages", "ARRAY[STRING]", PARAKEET_V3_LANGUAGES if v3 else ["en"]),
        Meta("stt.variant", "STRING", spec.variant),
    ]
    meta += [Meta("stt.capability.lang_detect", "BOOL", True)] if v3 else []
    meta += [Meta("stt.parakeet.head_kind", "STRING", spec.head)] + model_key + bulk + ids
    encoder = {"n_layers": d.n_layers, "d_model": d.d_model, "n_heads": d.n_heads, "d_ff": d.d_ff,
               "conv_kernel": d.conv_kernel, "subsampling_factor": 8, "subsampling_channels": channels,
               "pos_emb_max_len": 5000}
    meta += [Meta(f"stt.parakeet.encoder.{key}", "UINT32", value) for key, value in encoder.items()]
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
    return Layout("parakeet", meta, t)


# ---- GigaAM -----------------------------------------------------------------------------------------


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


def _gigaam(spec: Family, d: Dims, draw: Draw) -> Layout:
    n_mels, n_fft, k = 64, 320, 5
    n_classes = d.vocab + 1
    # GigaAM's log-mel is not normalised (it sits around -10, silence at -20.7): a first kernel whose
    # weights sum to zero answers to the spectrum's shape, which changes from frame to frame, not its level.
    t = {"frontend.mel_filterbank": htk_mel_filterbank(SAMPLE_RATE, n_fft, n_mels),
         "frontend.window": hann_periodic(n_fft),
         "enc.pre_encode.conv.0.weight": _zero_sum(draw.normal((d.d_model, n_mels, k), 1.0 / np.sqrt(n_mels * k))),
         "enc.pre_encode.conv.0.bias": draw.small(d.d_model),
         "enc.pre_encode.conv.2.weight": draw.after_activation(d.d_model, d.d_model * k).reshape(d.d_model, d.d_model, k),
         "enc.pre_encode.conv.2.bias": draw.small(d.d_model)}
    for i in range(d.n_layers):
        t |= _block(draw, d, f"enc.blocks.{i}", gigaam=True, use_bias=True)
    if spec.head == "rnnt":
        t |= _transducer(draw, d, n_classes, 0)
    else:
        t |= {"head.ctc.weight": draw.linear(n_classes, d.d_model, HEAD_GAIN)[:, :, None],
              "head.ctc.bias": np.zeros(n_classes, np.float32)}
    n_params = sum(v.size for name, v in t.items() if not name.startswith("frontend."))

    model_key, bulk, ids = _tokenizer_meta(spec.tokenizer, d.vocab, "оеаинтсрвлкмдпуяыьгзбчйхжшюцщэфъ.,?!-ОЕАИНТСРВ")
    meta = [
        Meta("general.name", "STRING", GIGAAM_DISPLAY_NAMES[spec.variant]),
        Meta("general.basename", "STRING", "gigaam-v3"),
        Meta("general.version", "STRING", "v3"),
        Meta("general.size_label", "STRING", size_label(n_params)),
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
    encoder = {"n_layers": d.n_layers, "d_model": d.d_model, "n_heads": d.n_heads, "d_ff": d.d_ff,
               "conv_kernel": d.conv_kernel, "subsampling_factor": 4, "subs_kernel_size": k,
               "pos_emb_max_len": 5000, "feat_in": n_mels}
    meta += [Meta(f"stt.gigaam.encoder.{key}", "UINT32", value) for key, value in encoder.items()]
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
    return Layout("gigaam", meta, t)


# ---- calibration ------------------------------------------------------------------------------------


def calibration_audio(seconds: float = CALIBRATION_SECONDS, seed: int = 7) -> np.ndarray:
    """A deterministic speech-like signal, float32 [seconds·16000]: 50-300 ms stretches of voiced
    sound (a 90-250 Hz harmonic series under random formant-like gains), hiss and near-silence, at
    levels from soft to loud."""
    rng = np.random.default_rng(seed)
    parts, total = [], int(seconds * SAMPLE_RATE)
    while sum(len(p) for p in parts) < total:
        n = int(rng.uniform(0.05, 0.3) * SAMPLE_RATE)
        t = np.arange(n) / SAMPLE_RATE
        kind = rng.choice(["voiced", "voiced", "hiss", "quiet"])
        if kind == "voiced":
            f0 = rng.uniform(90, 250)
            harmonics = np.arange(1, int(4000 / f0))
            gains = np.exp(-((harmonics * f0 - rng.uniform(300, 3000)) ** 2) / 2e5) + 0.1 * rng.random(len(harmonics))
            sound = (gains[:, None] * np.sin(2 * np.pi * f0 * harmonics[:, None] * t)).sum(axis=0)
        elif kind == "hiss":
            sound = rng.standard_normal(n) * rng.uniform(0.2, 1.0)
        else:
            sound = rng.standard_normal(n) * 0.01
        level = np.exp(rng.uniform(np.log(0.02), np.log(0.5)))  # soft and loud stretches
        parts.append(level * sound * np.hanning(n) / (np.abs(sound).max() + 1e-9))
    return np.concatenate(parts)[:total].astype(np.float32)


def _calibrate_head(layout: Layout, path: Path, head: str) -> None:
    """Set the output head from the encoder's output on ``calibration_audio`` (module docstring): the
    model at ``path`` is loaded on the numpy backend and run as the engine runs it."""
    from sayso.engine.cpu.ops import NumpyOps
    from sayso.engine.gguf.reader import ModelFile

    ops = NumpyOps()
    transcriber = importlib.import_module(f"sayso.engine.{layout.arch}").load(ModelFile(path), ops)
    encoded = ops.read(transcriber.model.encode(transcriber.frontend(calibration_audio())))
    t = layout.tensors
    if head == "ctc":
        logits = encoded @ t["head.ctc.weight"][:, :, 0].T
        t["head.ctc.bias"] = _centred_bias(logits, logits.shape[1] - 1)
        return
    n_tokens = len(t["pred.embed.weight"])
    half = t["joint.out.weight"].shape[1] // 2
    projected = encoded @ t["joint.enc.weight"].T + t["joint.enc.bias"]
    logits = np.maximum(projected, 0) @ t["joint.out.weight"].T  # the encoder half; the other adds 0 at the start
    t["joint.out.weight"][:, half:] = _self_suppression(transcriber.model.head.predictor, t, n_tokens)
    bias = _centred_bias(logits[:, :n_tokens], n_tokens - 1)
    if head == "tdt":
        bias = np.concatenate([bias, -logits[:, n_tokens:].mean(axis=0) + np.asarray(DURATION_PREFERENCE, np.float32)])
        t["joint.out.bias"] = bias.astype(np.float32)  # durations move the search on: no runs of tokens
    else:
        t["joint.out.bias"] = _blank_for_rate(transcriber.model.head, t["joint.out.weight"], bias, projected, n_tokens - 1)


def _blank_for_rate(search_head, out_weight: np.ndarray, bias: np.ndarray, projected: np.ndarray, blank: int) -> np.ndarray:
    """``bias`` with the blank's entry raised (bisection) until the greedy search emits at most
    ``TOKEN_RATE`` tokens per encoder frame of the calibration audio."""
    search_head.out_weight = out_weight
    lift = np.zeros_like(bias)
    low, high = -10.0, 40.0
    for _ in range(20):
        lift[blank] = (low + high) / 2
        search_head.out_bias = bias + lift
        if len(search_head.search(projected)) > TOKEN_RATE * len(projected):
            low = lift[blank]
        else:
            high = lift[blank]
    lift[blank] = high
    return (bias + lift).astype(np.float32)


def _self_suppression(predictor, t: dict[str, np.ndarray], n_tokens: int, history: int = 12,
                      max_steps: int = 1024, seed: int = 5) -> np.ndarray:
    """Output weights [V (+ durations), J/2] of the joint's predictor half, fit by least squares over
    random token histories (``history`` tokens from the start state, up to ``max_steps`` in all) so
    that the predictor lowers the logits of the last few tokens by ``SELF_SUPPRESSION`` times
    ``SUPPRESSION_DECAY`` and adds nothing in the start state; the blank and TDT's durations are left
    to the encoder. The random model moves on after a token instead of repeating it, as a trained
    transducer does."""
    rng = np.random.default_rng(seed)
    half = t["joint.out.weight"].shape[1] // 2
    blank = n_tokens - 1
    start = predictor.initial_state()
    outputs = [predictor.step(-1, start)[0]]
    targets = [np.zeros(t["joint.out.weight"].shape[0], np.float32)]
    order = rng.permutation(blank)[:max_steps]
    for first in range(0, len(order), history):
        past, state = [], start
        for token in order[first : first + history].tolist():
            output, state = predictor.step(token, state)
            past.insert(0, token)
            target = np.zeros_like(targets[0])
            for weight, earlier in zip(SUPPRESSION_DECAY, past):
                target[earlier] -= weight * SELF_SUPPRESSION
            outputs.append(output)
            targets.append(target)
    features = np.maximum(np.stack(outputs) @ t["joint.pred.weight"][half:].T + t["joint.pred.bias"][half:], 0)
    weights = np.zeros((len(targets[0]), half), np.float32)  # blank and durations: left to the encoder half
    fit, *_ = np.linalg.lstsq(features, np.stack(targets)[:, :blank], rcond=None)  # features @ fit ≈ targets
    weights[:blank] = fit.T
    return weights


def _centred_bias(logits: np.ndarray, blank: int) -> np.ndarray:
    """A bias [V] that gives every output zero mean over the frames, then lifts the blank until it
    wins ``BLANK_SHARE`` of them."""
    bias = -logits.mean(axis=0)
    centred = logits + bias
    best_token = np.delete(centred, blank, axis=1).max(axis=1)
    bias[blank] += np.quantile(best_token - centred[:, blank], BLANK_SHARE)
    return bias.astype(np.float32)
