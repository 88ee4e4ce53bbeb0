"""The code's pointers to the figures behind its rules resolve: every pointer to an entry of
docs/PERFORMANCE.md (the file's name, a colon and the entry's name, in parentheses) in the source, the
shaders, the packaging and the tests names one of its headings, so a reader who follows one finds the
entry, and an entry renamed or moved to the archive shows up here.
"""

from __future__ import annotations

import re

from support.data import ROOT

PERFORMANCE = ROOT / "docs" / "PERFORMANCE.md"
SOURCES = ("app", "engine", "packaging", "sayso", "shaders", "tests")
POINTER = re.compile(r"docs/PERFORMANCE\.md:\s+([^)]+)\)")
CONTINUATION = re.compile(r"\s*\n\s*(?:#|//)?\s*")  # a pointer wrapped onto the next comment line


def pointers() -> list[tuple[str, str]]:
    """(where, NAME) of every pointer in the source files."""
    found = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in (".py", ".wgsl", ".sh") and "__pycache__" not in path.parts:
                for match in POINTER.finditer(path.read_text(encoding="utf-8")):
                    name = CONTINUATION.sub(" ", match.group(1)).strip().rstrip(".")
                    found.append((f"{path.relative_to(ROOT)}: {name}", name))
    return found


def test_every_pointer_names_a_heading_of_performance_md():
    headings = {line.lstrip("#").strip() for line in PERFORMANCE.read_text(encoding="utf-8").splitlines()
                if line.startswith("#")}
    found = pointers()
    assert found, "no pointer found: the pattern no longer matches how the code names the entries"
    assert [where for where, name in found if name not in headings] == []
