"""Just enough of a WGSL reader to check the kernels' declarations (``engine.gpu.entry_points``) against
the shaders: each entry point's uniform parameter struct and the storage buffers it binds."""

from __future__ import annotations

import re
from dataclasses import dataclass

BINDING = re.compile(r"@group\(0\)\s*@binding\((\d+)\)\s*var<([^>]*)>\s*(\w+)\s*:\s*([\w<>, ]+?)\s*;")
STRUCT = re.compile(r"struct\s+(\w+)\s*\{([^}]*)\}")
FIELD = re.compile(r"(\w+)\s*:\s*([\w<>]+)")
FUNCTION = re.compile(r"(@compute[^\n]*\n)?\s*fn\s+(\w+)\s*\(")
IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


@dataclass
class EntryPointText:
    """What an entry point reaches: its parameter struct's fields and its storage bindings by number."""

    params: list[tuple[str, str]]
    bindings: dict[int, set[str]]  # binding number -> names of the variables it is read through


def _without_comments(source: str) -> str:
    return re.sub(r"//[^\n]*", "", source)


def _bodies(source: str) -> dict[str, tuple[bool, str]]:
    """Every function's name -> (whether it is a compute entry point, its text from the name on)."""
    found = {}
    matches = list(FUNCTION.finditer(source))
    for match in matches:
        depth, start = 0, source.index("{", match.end())
        for i in range(start, len(source)):
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            if depth == 0:
                found[match.group(2)] = (match.group(1) is not None, source[match.start(2) : i + 1])
                break
    return found


def storage_bindings(source: str) -> dict[str, int]:
    """Each storage buffer variable of a WGSL source -> its binding number, read or not."""
    return {name: int(binding) for binding, kind, name, _ in BINDING.findall(_without_comments(source))
            if kind.startswith("storage")}


def entry_points(source: str) -> dict[str, EntryPointText]:
    """Each compute entry point of a WGSL source with the uniform struct and storage buffers it uses,
    through the functions it calls too."""
    source = _without_comments(source)
    structs = {name: FIELD.findall(body) for name, body in STRUCT.findall(source)}
    variables = {name: (int(binding), kind, type_) for binding, kind, name, type_ in BINDING.findall(source)}
    bodies = _bodies(source)
    result = {}
    for name, (is_entry, _) in bodies.items():
        if not is_entry:
            continue
        used, todo, seen = set(), [name], set()
        while todo:
            function = todo.pop()
            if function in seen:
                continue
            seen.add(function)
            words = set(IDENTIFIER.findall(bodies[function][1]))
            used |= words
            todo += [word for word in words if word in bodies and word != function]
        params, bindings = [], {}
        for variable in used & variables.keys():
            binding, kind, type_ = variables[variable]
            if kind == "uniform":
                params = structs[type_]
            else:
                bindings.setdefault(binding, set()).add(variable)
        result[name] = EntryPointText(params, bindings)
    return result
