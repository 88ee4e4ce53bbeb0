"""The layers' import rule (docs/ARCHITECTURE.md), read from the source: every import statement,
function-level ones included.

* ``engine`` imports no Qt and nothing of ``app``: it runs in a command line, a test, a worker process.
* ``app`` names no WGSL: no shader module, no kernel declaration; it reaches the GPU through the engine.
* In ``app``: ``platform`` imports neither ``core`` nor ``ui``, ``core`` doesn't import ``ui``, and only
  ``ui`` itself and the entry points at ``app``'s top (``main``, ``cli``, ``doctor``) import ``ui``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP, ENGINE = ROOT / "app", ROOT / "engine"
GPU_INTERNALS = ("sayso.shaders", "sayso.engine.gpu.entry_points", "sayso.engine.gpu.kernels",
                 "sayso.engine.gpu.recorder", "sayso.engine.gpu.ops.")


def sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a.b import c`` gives ``a.b`` and ``a.b.c``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def layer(path: Path) -> str:
    """``app``'s layer of ``path``: platform, core, ui, or top (the entry points)."""
    parts = path.relative_to(APP).parts
    return parts[0] if len(parts) > 1 else "top"


def starts(name: str, prefixes) -> bool:
    return any(name == p.rstrip(".") or name.startswith(p if p.endswith(".") else p + ".") for p in prefixes)


@pytest.mark.parametrize("path", sources(ENGINE), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_engine_imports_no_qt_and_no_app(path):
    bad = sorted(n for n in imported(path) if starts(n, ("PySide6", "shiboken6", "sayso.app")))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize("path", sources(APP), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_app_names_no_wgsl_and_keeps_its_layers(path):
    where = layer(path)
    names = imported(path)
    wgsl = sorted(n for n in names if starts(n, GPU_INTERNALS))
    assert not wgsl and ".wgsl" not in path.read_text(), f"{path.relative_to(ROOT)} reaches into the kernels {wgsl}"
    below = {"platform": ("sayso.app.core", "sayso.app.ui"), "core": ("sayso.app.ui",), "ui": (), "top": ()}[where]
    upward = sorted(n for n in names if starts(n, below))
    assert not upward, f"{path.relative_to(ROOT)} ({where}) imports {upward}"


def test_every_app_module_is_in_a_layer():
    top = sorted(p.stem for p in APP.glob("*.py") if p.stem != "__init__")
    assert top == ["cli", "doctor", "main"]
    assert {p.name for p in APP.iterdir() if p.is_dir() and p.name != "__pycache__"} == {"core", "platform", "ui"}
