"""The developer tools the command line runs (``sayso convert``, ``sayso bench``): the second module of
the engine's face (``sayso.engine``), kept apart from what the app itself uses. Each name is imported
from its module on first use, so one tool doesn't load the others.

``SHAPES`` names the Whisper sizes ``write_random_whisper`` draws; any other family goes to
``write_random_model``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sayso.engine import lazy_face

_FACE = {
    "sayso.engine.convert": ("convert",),
    "sayso.engine.convert.random_model": ("write_random_model",),
    "sayso.engine.convert.random_whisper": ("SHAPES", "write_random_whisper"),
}
"""Module -> the names taken from it; the imports under ``TYPE_CHECKING`` below say the same for analysers."""

_MODULES = ("sayso.engine.bench",)

__all__ = [*(module.rpartition(".")[2] for module in _MODULES), *(name for names in _FACE.values() for name in names)]
__getattr__ = lazy_face(__name__, _FACE, _MODULES)

if TYPE_CHECKING:
    from sayso.engine import bench
    from sayso.engine.convert import convert
    from sayso.engine.convert.random_model import write_random_model
    from sayso.engine.convert.random_whisper import SHAPES, write_random_whisper
