"""GigaAM v3's hyperparameters from the ``stt.gigaam.*`` and ``stt.frontend.*`` keys of a model file
(transcribe.cpp's ``read_gigaam_hparams``), with a clear error for variants this engine can't run."""

from __future__ import annotations

from dataclasses import dataclass

from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile

MAX_SYMBOLS = 10  # transcribe.cpp's RNN-T tokens per frame (GigaAM's own decoder uses the same cap)


@dataclass(frozen=True)
class GigaamConfig:
    name: str
    variant: str
    languages: tuple[str, ...]
    head: str  # "rnnt" or "ctc"
    n_layers: int
    d_model: int
    n_heads: int
    d_ff: int
    conv_kernel: int
    subsampling_factor: int
    subs_kernel: int
    rotary_base: float  # pos_emb_max_len: GigaAM passes it as the rotary base
    n_mels: int
    n_fft: int
    win_length: int
    hop_length: int
    log_clamp_min: float
    log_clamp_max: float
    # RNN-T head
    pred_layers: int
    n_classes: int  # vocabulary + blank
    joint_activation: str

    @property
    def frame_seconds(self) -> float:
        """Seconds per encoder frame: 4 x 10 ms = 40 ms."""
        return self.subsampling_factor * self.hop_length / 16000

    @classmethod
    def from_model_file(cls, model_file: ModelFile) -> GigaamConfig:
        get = model_file.get
        variant = str(get("stt.variant", "gigaam-v3-e2e-rnnt"))

        def fail(problem: str) -> ModelFileError:
            return ModelFileError(model_file.path, f"holds the GigaAM variant '{variant}', {problem}",
                                  "This version of Sayso runs GigaAM v3 with CTC or RNN-T heads.")

        def need(key: str) -> int:
            return int(model_file.require(f"stt.gigaam.{key}"))

        head = str(model_file.require("stt.gigaam.head_kind"))
        if head not in ("rnnt", "ctc"):
            raise fail(f"whose decoder head '{head}' Sayso can't run")
        attention = str(model_file.require("stt.gigaam.encoder.self_attention_model"))
        if attention != "rotary":
            raise fail(f"with '{attention}' attention; only rotary is supported")
        conv_norm = str(model_file.require("stt.gigaam.encoder.conv_norm_type"))
        if conv_norm != "layer_norm":
            raise fail(f"with '{conv_norm}' in its conv modules; only layer_norm is supported")
        d_model, n_heads = need("encoder.d_model"), need("encoder.n_heads")
        if d_model % n_heads:
            raise fail(f"with d_model {d_model} not divisible by {n_heads} heads")
        factor = need("encoder.subsampling_factor")
        if factor != 4:
            raise fail(f"with {factor}x subsampling; only 4x (two stride-2 convolutions) is supported")
        rate = int(model_file.require("stt.frontend.sample_rate"))
        n_fft = int(model_file.require("stt.frontend.n_fft"))
        win_length = int(model_file.require("stt.frontend.win_length"))
        if rate != 16000 or bool(get("stt.frontend.center", False)) or win_length != n_fft:
            raise fail(f"with a frontend Sayso can't compute ({rate} Hz, center={get('stt.frontend.center')}, "
                       f"{n_fft}-point FFT of {win_length} samples)")
        if head == "rnnt":
            n_classes = need("predictor.vocab")
            if n_classes != need("joint.num_classes"):
                raise fail("whose predictor and joint disagree on the vocabulary size")
        else:
            n_classes = need("head.num_classes")
            if need("head.feat_in") != d_model:
                raise fail("whose CTC head doesn't take the encoder's width")
        return cls(
            name=str(get("general.name", f"GigaAM {variant}")),
            variant=variant,
            languages=tuple(str(x) for x in get("general.languages", ["ru"])),
            head=head,
            n_layers=need("encoder.n_layers"),
            d_model=d_model,
            n_heads=n_heads,
            d_ff=need("encoder.d_ff"),
            conv_kernel=need("encoder.conv_kernel"),
            subsampling_factor=factor,
            subs_kernel=need("encoder.subs_kernel_size"),
            rotary_base=float(need("encoder.pos_emb_max_len")),
            n_mels=int(model_file.require("stt.frontend.num_mels")),
            n_fft=n_fft,
            win_length=win_length,
            hop_length=int(model_file.require("stt.frontend.hop_length")),
            log_clamp_min=float(model_file.require("stt.frontend.log_clamp_min")),
            log_clamp_max=float(model_file.require("stt.frontend.log_clamp_max")),
            pred_layers=need("predictor.n_layers") if head == "rnnt" else 0,
            n_classes=n_classes,
            joint_activation=str(model_file.require("stt.gigaam.joint.activation")) if head == "rnnt" else "",
        )
