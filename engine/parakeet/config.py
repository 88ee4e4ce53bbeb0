"""Parakeet's hyperparameters from the ``stt.parakeet.*`` and ``stt.frontend.*`` keys of a model file,
with a clear error for every variant this engine can't run (streaming, prompt-conditioned, speaker
kernels) rather than a wrong transcript.

Keys and their defaults follow transcribe.cpp's ``read_parakeet_hparams``: ``head_kind`` absent
means TDT (the first v2/v3 files), ``use_bias`` and ``xscaling`` absent mean false, a missing
``tdt.max_symbols`` means 10.
"""

from __future__ import annotations

from dataclasses import dataclass

from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile

HEAD_KINDS = ("tdt", "rnnt", "ctc")
FULL_ATTENTION_WINDOW = 256
"""Local-attention context (frames each side) that transcribe.cpp 0.4.1 gives checkpoints trained
with full attention ("full-attention checkpoint; using local attention [256, 256]"). It only matters
past 257 encoder frames (20.5 s); NeMo's full attention and this agree on anything shorter."""
RNNT_MAX_SYMBOLS = 10  # transcribe.cpp's per-frame cap for RNN-T heads (no key carries it)


@dataclass(frozen=True)
class ParakeetConfig:
    name: str
    variant: str
    languages: tuple[str, ...]
    head: str  # "tdt", "rnnt" or "ctc"
    # encoder
    n_layers: int
    d_model: int
    n_heads: int
    d_ff: int
    conv_kernel: int
    subsampling_factor: int
    subsampling_channels: int
    use_bias: bool
    xscaling: bool
    attention_window: tuple[int, int]  # (left, right) frames a query sees
    conv_norm: str  # "batch_norm" or "layer_norm"
    conv_pad_left: int
    # decoder (transducer heads)
    pred_hidden: int
    pred_layers: int
    pred_vocab: int
    joint_hidden: int
    joint_activation: str
    durations: tuple[int, ...] | None
    max_symbols: int
    # frontend
    n_mels: int
    n_fft: int
    win_length: int
    hop_length: int
    normalize: str
    pre_emphasis: float
    f_min: float
    f_max: float

    @property
    def frame_seconds(self) -> float:
        """Seconds per encoder frame: 8 x 10 ms = 80 ms."""
        return self.subsampling_factor * self.hop_length / 16000

    @classmethod
    def from_model_file(cls, model_file: ModelFile) -> ParakeetConfig:
        get = model_file.get
        variant = str(get("stt.variant", "tdt-0.6b-v2"))

        def fail(problem: str, hint: str = "This version of Sayso runs the offline Parakeet TDT, RNN-T and CTC models.") -> ModelFileError:
            return ModelFileError(model_file.path, f"holds the Parakeet variant '{variant}', {problem}", hint)

        def need(key: str) -> int:
            return int(model_file.require(f"stt.parakeet.{key}"))

        head = str(get("stt.parakeet.head_kind", "tdt"))
        if head not in HEAD_KINDS:
            raise fail(f"whose decoder head '{head}' Sayso can't run")
        style = str(get("stt.parakeet.encoder.att_context_style", "regular"))
        if style != "regular":
            raise fail(f"a streaming model (att_context_style={style}), which Sayso can't run yet")
        if int(get("stt.parakeet.prompt.num_prompts", 0)) > 0:
            raise fail("a prompt-conditioned multilingual model, which Sayso can't run yet")
        if get("stt.parakeet.encoder.spk_kernel_layers") or get("stt.parakeet.diarizer.embedded"):
            raise fail("a speaker-conditioned (multitalker) model, which Sayso can't run")
        factor = need("encoder.subsampling_factor")
        if factor != 8:
            raise fail(f"with {factor}x subsampling; only 8x (every published Parakeet) is supported")
        d_model, n_heads = need("encoder.d_model"), need("encoder.n_heads")
        if d_model % n_heads:
            raise fail(f"with d_model {d_model} not divisible by {n_heads} heads")

        left = int(get("stt.parakeet.encoder.att_context_left", -1))
        right = int(get("stt.parakeet.encoder.att_context_right", -1))
        window = (left, right) if left >= 0 and right >= 0 else (FULL_ATTENTION_WINDOW, FULL_ATTENTION_WINDOW)
        kernel = need("encoder.conv_kernel")
        conv_left = int(get("stt.parakeet.encoder.conv_context_left", -1))
        conv_right = int(get("stt.parakeet.encoder.conv_context_right", -1))
        pad_left = (kernel - 1) // 2
        if conv_left >= 0 and conv_right >= 0:
            if conv_left + conv_right != kernel - 1:
                raise fail(f"with conv context [{conv_left}, {conv_right}] that doesn't fit kernel {kernel}")
            pad_left = conv_left

        transducer = head != "ctc"
        durations = None
        if head == "tdt":
            durations = tuple(int(d) for d in model_file.require("stt.parakeet.tdt.durations"))
            extra = need("joint.num_extra_outputs")
            if not durations or len(durations) != extra or min(durations) < 0:
                raise fail(f"with TDT durations {list(durations)} that don't match its {extra} duration outputs")
        max_symbols = int(get("stt.parakeet.tdt.max_symbols", 10)) if head == "tdt" else RNNT_MAX_SYMBOLS

        frontend_type = str(model_file.require("stt.frontend.type"))
        window_kind = str(model_file.require("stt.frontend.window"))
        normalize = str(model_file.require("stt.frontend.normalize"))
        rate = int(model_file.require("stt.frontend.sample_rate"))
        if frontend_type != "mel" or window_kind != "hann" or normalize not in ("per_feature", "none") or rate != 16000:
            raise fail(f"with a frontend Sayso can't compute (type {frontend_type}, window {window_kind}, "
                       f"normalize {normalize}, {rate} Hz)")
        n_fft = int(model_file.require("stt.frontend.n_fft"))
        win_length = int(model_file.require("stt.frontend.win_length"))
        if n_fft & (n_fft - 1) or win_length > n_fft:
            raise fail(f"with an STFT of {n_fft} points over {win_length} samples")

        return cls(
            name=str(get("general.name", f"Parakeet {variant}")),
            variant=variant,
            languages=tuple(str(x) for x in get("general.languages", [])),
            head=head,
            n_layers=need("encoder.n_layers"),
            d_model=d_model,
            n_heads=n_heads,
            d_ff=need("encoder.d_ff"),
            conv_kernel=kernel,
            subsampling_factor=factor,
            subsampling_channels=need("encoder.subsampling_channels"),
            use_bias=bool(get("stt.parakeet.encoder.use_bias", False)),
            xscaling=bool(get("stt.parakeet.encoder.xscaling", False)),
            attention_window=window,
            conv_norm=str(get("stt.parakeet.encoder.conv_norm_type", "batch_norm")),
            conv_pad_left=pad_left,
            pred_hidden=need("predictor.hidden") if transducer else 0,
            pred_layers=need("predictor.n_layers") if transducer else 0,
            pred_vocab=need("predictor.vocab") if transducer else 0,
            joint_hidden=need("joint.hidden") if transducer else 0,
            joint_activation=str(model_file.require("stt.parakeet.joint.activation")) if transducer else "",
            durations=durations,
            max_symbols=max_symbols,
            n_mels=int(model_file.require("stt.frontend.num_mels")),
            n_fft=n_fft,
            win_length=win_length,
            hop_length=int(model_file.require("stt.frontend.hop_length")),
            normalize=normalize,
            pre_emphasis=float(model_file.require("stt.frontend.pre_emphasis")),
            f_min=float(model_file.require("stt.frontend.f_min")),
            f_max=float(model_file.require("stt.frontend.f_max")),
        )
