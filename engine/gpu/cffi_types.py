"""C type lookups for wgpu-py's cffi FFI without running the C parser: 0.4 s off every start.

wgpu-py names C types by string (``ffi.new("WGPUBufferDescriptor *")``). cffi turns each new string
into a type by running pycparser over the string *and a typedef line for every type in wgpu.h*
(432 of them), about 12 ms a string; a start meets ~32 new strings before the first transcription.
cffi caches the answer, but only in the process.

Every string wgpu-py uses has one of a few plain shapes (``T *``, ``T const *``, ``T []``, ``T``,
and callback types ``void(T, U *, ...)``) whose parts are declared types, so ``install`` gives the
FFI's parser a lookup that builds those shapes from the declarations it already holds, and hands
anything else to the real parser. The types are the same objects either way
(``tests/test_gpu_core.py`` compares both on every string wgpu-py asks for in a transcription).
This reaches into cffi's parser object (cffi has no public hook for it): wgpu is pinned
(pyproject.toml), and a cffi release that changes the parser fails that test rather than the app.
"""

from __future__ import annotations

import re

from cffi import model

_DECLARATION = re.compile(r"(\w+)(?:\s+(const))?\s*(\*|\[\])?\s*")
_CALLBACK = re.compile(r"void\s*\((.*)\)\s*")


def install(ffi) -> None:
    """Let ``ffi`` resolve plain type strings from its declarations (see the module docstring)."""
    parser = ffi._parser
    if getattr(parser.parse_type, "plain_shapes", False):
        return
    parse_type = parser.parse_type

    def fast_parse_type(cdecl: str):
        found = plain_type(parser, cdecl)
        return parse_type(cdecl) if found is None else found

    fast_parse_type.plain_shapes = True
    parser.parse_type = fast_parse_type


def plain_type(parser, cdecl: str):
    """The cffi model type of ``cdecl`` if it has a plain shape, else None."""
    callback = _CALLBACK.fullmatch(cdecl)
    if callback is None:
        return _declaration(parser, cdecl)
    args = [_declaration(parser, arg) for arg in callback[1].split(",")]
    if not args or any(arg is None for arg in args):
        return None
    return model.RawFunctionType(tuple(args), model.void_type, False)


def _declaration(parser, text: str):
    """``T``, ``T *``, ``T const *`` or ``T []`` for a declared or primitive ``T`` (else None)."""
    match = _DECLARATION.fullmatch(text.strip())
    if match is None:
        return None
    name, const, suffix = match.groups()
    if f"typedef {name}" in parser._declarations:
        base, quals = parser._declarations[f"typedef {name}"]
    elif name == "void":
        base, quals = model.void_type, 0
    elif name in model.PrimitiveType.ALL_PRIMITIVE_TYPES:
        base, quals = model.PrimitiveType(name), 0
    else:
        return None
    if const:
        quals |= model.Q_CONST
    if suffix == "*":
        return model.PointerType(base, quals)
    if suffix == "[]" and not const:
        return model.ArrayType(base, None)
    return None if const or quals else base
