"""The layers' import rule (docs/ARCHITECTURE.md), read from the source: every import statement,
function-level ones included.

* ``engine`` imports no Qt and nothing of ``app``: it runs in a command line, a test, a worker process.
* ``app`` names no WGSL: no shader module, no kernel declaration; it reaches the GPU through the engine.
* ``app`` imports only the engine's face: names of ``sayso.engine.__all__``, and for the developer commands
  of ``sayso.engine.tools.__all__``. The face tells analysers what it gives: each name is imported under
  ``TYPE_CHECKING`` from the module it comes from at run time.
* ``engine`` stands on floors (``ENGINE_FLOORS``): a module imports only modules of its own floor or lower.
* In ``app``: ``platform`` imports neither ``core`` nor ``ui``, ``core`` doesn't import ``ui``, and only
  ``ui`` itself and the entry points at ``app``'s top (``main``, ``cli``, ``doctor``) import ``ui``.
* No two modules of ``engine`` or of ``app`` import each other, directly or round a circle: every module
  stands on a floor of those it imports. An import counts for the module it names (``from a.b import c``
  is ``a.b.c`` where that is a module, else ``a.b``), wherever it stands: in a function (it runs there
  too, later) or under ``TYPE_CHECKING`` (the floors are read by type checkers as well). A package's
  ``__init__`` is not counted for its submodules: Python runs it before them whatever imports what.
* A checkout is read as it stands: ``python -m sayso`` runs in it with nothing installed, and a static
  analyser (basedpyright, configured in pyproject.toml) resolves every import of a ``sayso`` module and
  every name imported from one.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from support.data import ROOT

APP, ENGINE = ROOT / "app", ROOT / "engine"
FACES = ("sayso.engine", "sayso.engine.tools")
"""The engine's face and its developer entry: the only engine modules the app imports."""
ENGINE_FLOORS = (  # bottom first; a module's floor is that of the longest name that starts it
    ("base", ("errors", "files", "changes", "background", "heap", "transcript", "options", "spectrum",
              "segmenter", "windows", "audio", "formats", "catalogue",
              "convert.mel")),  # the mel filterbank: the converter's and Parakeet's frontend's
    ("model files", ("gguf", "onnx_graph", "onnx_constants")),
    ("backends", ("ops", "layers", "cpu", "gpu", "backend",
                  "gguf.reader")),  # it hands weights over as the backend contract's ``WeightSource``
    ("families", ("families", "whisper", "moonshine", "parakeet", "gigaam", "conformer", "silero", "vad")),
    ("model store", ("models", "hub", "download", "convert")),
    ("runtime", ("engine", "stream")),
    ("tools", ("bench", "bench_gemm", "accuracy", "reference", "wer")),
    ("face", ("", "tools")),  # ``sayso.engine`` itself and its developer entry
)
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


def module_name(path: Path) -> str:
    """The import name of the source ``path`` (``engine/gpu/__init__.py`` is ``sayso.engine.gpu``)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("sayso", *parts[: -1 if parts[-1] == "__init__" else None]))


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The ``modules`` that ``path`` imports, each import counted for the module it names."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                         for a in node.names)
    return (names & modules) - {module_name(path)}


def import_graph(folder: Path) -> dict[str, set[str]]:
    """Each module of ``folder`` with the modules of ``folder`` it imports."""
    paths = {module_name(p): p for p in sources(folder)}
    return {name: imported_modules(path, set(paths)) for name, path in paths.items()}


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


@pytest.mark.parametrize("path", sources(APP), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_app_imports_only_the_engines_face(path):
    faces = {name: set(importlib.import_module(name).__all__) for name in FACES}
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if starts(a.name, ("sayso.engine",)) and a.name not in faces]
        elif isinstance(node, ast.ImportFrom) and starts(node.module or "", ("sayso.engine",)):
            bad += [f"{node.module}.{a.name}" for a in node.names if a.name not in faces.get(node.module, ())]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}, not of the engine's face: add what it needs to {FACES}"


def declared(path: Path) -> dict[str, str]:
    """Each name imported under ``if TYPE_CHECKING:`` in ``path``, with the module it comes from."""
    blocks = [node for node in ast.parse(path.read_text()).body
              if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    return {a.asname or a.name: node.module for block in blocks for node in block.body
            if isinstance(node, ast.ImportFrom) for a in node.names}


@pytest.mark.parametrize("name", FACES)
def test_the_face_tells_analysers_what_it_gives(name):
    """Its own submodules (``sayso.engine.models``) an analyser finds as files; every other name is declared."""
    face = importlib.import_module(name)
    given = {n: module for module, names in face._FACE.items() for n in names}
    given |= {module.rpartition(".")[2]: module.rpartition(".")[0] for module in face._MODULES}
    assert sorted(face.__all__) == sorted(given)
    assert declared(Path(face.__file__)) == {n: module for n, module in given.items() if module != name}


def engine_floor(module: str) -> int:
    """The index in ``ENGINE_FLOORS`` of the ``engine`` module ``module`` (``sayso.engine.gguf.reader``)."""
    relative = module.removeprefix("sayso.engine").removeprefix(".")
    matches = [(len(prefix), floor) for floor, (_, prefixes) in enumerate(ENGINE_FLOORS) for prefix in prefixes
               if relative == prefix or (prefix and relative.startswith(prefix + "."))]
    assert matches, f"{module} is on no floor: add it to ENGINE_FLOORS"
    return max(matches)[1]


def test_the_engine_imports_only_its_floor_or_lower():
    upward = [f"{module} ({ENGINE_FLOORS[engine_floor(module)][0]}) imports {other} "
              f"({ENGINE_FLOORS[engine_floor(other)][0]})"
              for module, imports in sorted(import_graph(ENGINE).items()) for other in sorted(imports)
              if engine_floor(other) > engine_floor(module)]
    assert not upward, "\n".join(upward)


def test_every_app_module_is_in_a_layer():
    top = sorted(p.stem for p in APP.glob("*.py") if p.stem != "__init__")
    assert top == ["cli", "doctor", "main"]
    assert {p.name for p in APP.iterdir() if p.is_dir() and p.name != "__pycache__"} == {"core", "platform", "ui"}


@pytest.mark.parametrize("folder", [ENGINE, APP], ids=lambda p: p.name)
def test_no_modules_import_each_other_round_a_circle(folder):
    try:
        TopologicalSorter(import_graph(folder)).prepare()
    except CycleError as error:
        circle = error.args[1]
        pytest.fail(f"an import circle in {folder.name}: {' -> '.join(circle)}; move what both need a floor down")


def test_a_checkout_runs_with_nothing_installed():
    """``sayso`` here is the checkout's folder, found first as the current one, and its subpackages its
    links; an installed copy's finder (an editable install's) is taken out of the way first."""
    script = ("import runpy, sys\n"
              "sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith('__editable__')]\n"
              "sys.argv = ['sayso', '--version']\n"
              "runpy.run_module('sayso', run_name='__main__', alter_sys=True)\n")
    child = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0 and child.stdout.startswith("sayso "), child.stderr[-2000:]
    check = "import sayso.app.cli as cli; print(cli.__file__)"
    where = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (ROOT / "sayso" / "app" / "cli.py").samefile(where.stdout.strip()), where.stderr[-2000:]


def unresolved_internal_import(diagnostic: dict) -> bool:
    """Whether an analyser's ``diagnostic`` is about an import of a ``sayso`` module: the module not
    found, or a name it lacks (the statement that holds the diagnostic's line is looked up)."""
    message = diagnostic["message"]
    if diagnostic.get("rule") == "reportMissingImports":
        return message.startswith(('Import "sayso"', 'Import "sayso.'))
    if not message.endswith("is unknown import symbol"):
        return False
    path, line = Path(diagnostic["file"]), diagnostic["range"]["start"]["line"] + 1
    return any(isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sayso")
               and node.lineno <= line <= node.end_lineno for node in ast.walk(ast.parse(path.read_text())))


def test_a_static_analyser_resolves_every_internal_import():
    analyser = Path(sys.executable).with_name("basedpyright")
    command = [str(analyser), "--project", str(ROOT), "--outputjson", "--pythonpath", sys.executable]
    child = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    report = json.loads(child.stdout)
    assert report["summary"]["filesAnalyzed"] > 100, child.stderr[-2000:]
    unresolved = [f"{Path(d['file']).relative_to(ROOT)}:{d['range']['start']['line'] + 1}: {d['message']}"
                  for d in report["generalDiagnostics"] if unresolved_internal_import(d)]
    assert not unresolved, "\n".join(unresolved)
