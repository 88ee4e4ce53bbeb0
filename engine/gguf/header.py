"""Reads a GGUF header with every length checked against the bytes that are really there.

``gguf.GGUFReader`` trusts the header: a count or length that lies (a flipped byte, a truncated
download) makes it loop over billions of empty reads or fail deep inside numpy. It is also slow and
greedy on a real vocabulary: a small numpy view for every item (docs/PERFORMANCE.md: GGUF header
reader). So
this walk is the only reader of the header: it checks each count before using it, refuses a bad file
with one sentence that says where it is wrong, and builds the metadata values as it goes, costing each
string and array before building it so that a header never takes more memory than the file can justify
(its size plus ``HEADER_SLACK``). An array of strings (a vocabulary, its merges) is checked whole but
kept as a ``StringArray`` that decodes an item when it is read: a transcription reads a few dozen of
Whisper's 100 000 tokens and merges, and building them all as Python strings was a noticeable part of
every load.

The GGUF codes it needs are spelled out here (``ValueType``, ``TENSOR_TYPES``) rather than taken from
the ``gguf`` package: importing that package (its tables, YAML, the writer) costs every start time and
memory; the converter, which writes files, uses it.

GGUF v2/v3, little-endian (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
``"GGUF" u32 version, u64 n_tensors, u64 n_kv``, then n_kv ``(string key, u32 type, value)``,
then n_tensors ``(string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset)``, then the
tensor data from the next multiple of ``general.alignment`` (32 by default). A string is
``u64 length`` plus UTF-8 bytes; an array is ``u32 item type, u64 count`` plus the items.
"""

from __future__ import annotations

import mmap
import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from sayso.engine.gguf.q8_0 import Q8_0_BLOCK, Q8_0_BLOCK_BYTES

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS



class ValueType(IntEnum):
    """GGUF's metadata value types (``gguf_type`` in ggml's gguf.h)."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


TENSOR_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 8: ("Q8_0", Q8_0_BLOCK, Q8_0_BLOCK_BYTES)}
"""The ggml tensor types the engine's backends read (see ``engine.ops.WeightSource``): code -> (name,
values per block, bytes per block)."""

_SCALAR_FORMATS = {  # struct format of each scalar type (little-endian)
    ValueType.UINT8: "B",
    ValueType.INT8: "b",
    ValueType.BOOL: "?",
    ValueType.UINT16: "H",
    ValueType.INT16: "h",
    ValueType.UINT32: "I",
    ValueType.INT32: "i",
    ValueType.FLOAT32: "f",
    ValueType.UINT64: "Q",
    ValueType.INT64: "q",
    ValueType.FLOAT64: "d",
}
_SCALAR_SIZES = {vtype: struct.calcsize(fmt) for vtype, fmt in _SCALAR_FORMATS.items()}

HEADER_SLACK = 16 * 2**20
"""What the walk builds (keys, values, names) may take as much memory as the file's size plus this. A
real model's header (its vocabulary) is small beside its weights; a
file whose header is millions of one-byte items would otherwise cost 8 to 40 times its size in Python
objects, and a lying string length as much as the rest of the file, several times over."""
_U64 = struct.Struct("<Q")
_NUMBER_COST = 8 + 32  # a list slot and an int or float object, at most
_STRING_COST = 8 + 80  # a list slot and an empty str object, at most ...
_STRING_BYTE_COST = 5  # ... plus per byte of UTF-8: up to 4 in the str, 1 in a transient copy
_ENTRY_COST = 200  # a metadata entry in two dicts, with its type's name
_TENSOR_COST = 1000  # a TensorInfo with its shape, and its places in the lists and dicts that index it

_MIN_KV_BYTES = 8 + 4 + 1  # empty key, type, the smallest value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # empty name, n_dims 0, type, offset


class HeaderError(Exception):
    """The header is inconsistent; the message says what and where (ModelFile adds the path)."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header describes it. ``ne`` is in ggml order (fastest axis first)."""

    name: str
    ne: tuple[int, ...]
    ggml_type: str
    offset: int  # from the start of the data section
    nbytes: int


@dataclass(frozen=True)
class Header:
    """What the walk read. ``metadata`` maps each key, in file order, to str, int, float, bool, a list
    of numbers or a ``StringArray`` (arrays); ``types`` maps each key to its GGUF type (``"UINT32"``, ``"ARRAY[STRING]"``)."""

    version: int
    metadata: dict[str, object]
    types: dict[str, str]
    tensors: list[TensorInfo]
    data_offset: int  # absolute file offset of the tensor data section


class _Cursor:
    """Reads little-endian values from ``buf`` (an mmap or bytes), refusing to read past its end, and
    counts the memory of what it builds, refusing to build past ``limit`` bytes. A string or an array
    is costed before it is built, so a file can't make the walk allocate more than it pays for."""

    def __init__(self, buf: bytes | mmap.mmap, limit: int):
        self.buf = buf
        self.pos = 0
        self.limit = limit
        self.spent = 0

    def left(self) -> int:
        return len(self.buf) - self.pos

    def spend(self, nbytes: int, what: str) -> None:
        self.spent += nbytes
        if self.spent > self.limit:
            raise HeaderError(
                f"{what} would bring the memory its header takes to over {self.spent // 2**20} MB, more than "
                f"a file of {self.limit - HEADER_SLACK} bytes can justify (corrupt header)"
            )

    def skip(self, n: int, what: str) -> None:
        if n > self.left():
            raise HeaderError(
                f"{what} at byte {self.pos} needs {n} bytes but the file ends after {self.left()} more "
                "(the file is truncated or its header is corrupt)"
            )
        self.pos += n

    def unpack(self, fmt: str, what: str):
        start = self.pos
        self.skip(struct.calcsize(fmt), what)
        return struct.unpack_from("<" + fmt, self.buf, start)[0]

    def string(self, what: str) -> str:
        start = self.pos
        n = self.unpack("Q", f"length of {what}")
        self.skip(n, f"{what} ({n} bytes claimed)")
        self.spend(_STRING_COST + _STRING_BYTE_COST * n, what)
        try:
            return str(self.buf[self.pos - n : self.pos], "utf-8")
        except UnicodeDecodeError:
            raise HeaderError(f"{what} at byte {start} is not valid UTF-8 (corrupt header)") from None

    def strings(self, count: int, key: str) -> StringArray:
        """The ``count`` strings of array ``key``, checked (lengths, memory, UTF-8) but not decoded. A
        vocabulary has 50 000 to 250 000 of them, so the walk is as short a loop as can be: it checks
        nothing per item beyond what ``unpack_from`` does (a length that runs past the file's end
        makes the next read fail), and the checks that need every item run after it, on numpy
        arrays. The item that fails is read again by ``string``, which says why."""
        if count * 8 > self.left():
            raise HeaderError(
                f"array '{key}' claims {count} strings but only {self.left()} bytes of file remain "
                "(the file is truncated or its header is corrupt)"
            )
        # Charged as if every item were built: a reader of the array may well build them all.
        self.spend(count * _STRING_COST, f"array '{key}' of {count} strings")
        buf, pos, unpack = self.buf, self.pos, _U64.unpack_from
        starts = array("q", [0]) * count  # where each item's bytes begin, after its length
        try:
            for i in range(count):
                pos += 8
                starts[i] = pos
                pos += unpack(buf, pos - 8)[0]
            bad = count - 1 if pos > len(buf) else None  # the last item's bytes run past the end
        except struct.error:  # item i's length lies (partly) past the end: its own fault, or the
            bad = i if pos - 8 <= len(buf) else i - 1  # previous item's, whose bytes ran past it
        except OverflowError:  # pos passed 2**63: the previous item's length lies
            bad = i - 1
        starts_array = np.frombuffer(starts, np.int64)
        lengths = np.diff(starts_array, append=min(pos, len(buf)) + 8) - 8  # past a lie: not read
        text = np.cumsum(lengths)  # bytes of the strings up to each item
        room = (self.limit - self.spent) // _STRING_BYTE_COST
        if bad is None and count and text[-1] > room:
            bad = int(np.argmax(text > room))
        if bad is None:
            strings = StringArray(buf, starts_array, pos)
            bad = strings.first_invalid()
            if bad is None:
                self.pos = pos
                self.spend(_STRING_BYTE_COST * int(text[-1]) if count else 0, f"array '{key}'")
                return strings
        self.pos = starts[bad] - 8
        self.spend(_STRING_BYTE_COST * int(text[bad - 1]) if bad else 0, f"array '{key}'")
        self.spent -= _STRING_COST  # ``string`` charges the item again
        self.string(f"item {bad} of array '{key}'")  # this raises
        raise AssertionError("unreachable")


class StringArray(Sequence[str]):
    """A GGUF array of strings left in the file's mapping: an item is decoded when it is read (each
    read builds a new ``str``). Equal to a list of the same strings. The header's walk has checked
    every length and that every item is UTF-8 (``first_invalid``)."""

    def __init__(self, buf: bytes | mmap.mmap, starts: np.ndarray, end: int):
        self._buf = buf
        self._starts = starts  # where each item's bytes begin: after its u64 length
        self._ends = np.append(starts[1:] - 8, end) if len(starts) else starts

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return str(self._buf[self._starts[index] : self._ends[index]], "utf-8")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (StringArray, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # mutable-looking like the list it stands for

    def __repr__(self) -> str:
        return f"StringArray({len(self)} strings: {self[:3]!r}...)"

    def first_invalid(self) -> int | None:
        """The index of the first item that isn't UTF-8, or None. All items' bytes (from the array's
        first length field on) are decoded at once, with the length fields left out, and
        each non-empty item must start on a character (not on a continuation byte, 10xxxxxx): then
        every item is whole UTF-8 exactly when the joined bytes are, since an item that ended inside
        a character would need the next one to continue it. One decode instead of one per item."""
        if not len(self):
            return None
        first = int(self._starts[0]) - 8
        region = np.frombuffer(self._buf, np.uint8, int(self._ends[-1]) - first, first)
        text = np.ones(len(region), bool)
        fields = self._starts - 8 - first
        for byte in range(8):  # the length fields' bytes
            text[fields + byte] = False
        try:
            region[text].tobytes().decode("utf-8")
            filled = self._ends > self._starts
            if not np.any(region[self._starts[filled] - first] & 0xC0 == 0x80):
                return None
        except UnicodeDecodeError:
            pass
        for i in range(len(self)):  # a corrupt file: find the item, for the message
            try:
                self[i]
            except UnicodeDecodeError:
                return i
        raise AssertionError("unreachable: an item that starts on a continuation byte isn't UTF-8")


def _value_type(code: int, key: str) -> ValueType:
    try:
        return ValueType(code)
    except ValueError:
        raise HeaderError(f"metadata key '{key}' has unknown value type {code} (corrupt header)") from None


def _read_value(cur: _Cursor, vtype: ValueType, key: str) -> tuple[object, str]:
    """Read one value; returns it with its type name (``"ARRAY[INT32]"`` for an array of INT32)."""
    if vtype == ValueType.STRING:
        return cur.string(f"string value of '{key}'"), vtype.name
    if vtype != ValueType.ARRAY:
        return cur.unpack(_SCALAR_FORMATS[vtype], f"value of '{key}'"), vtype.name
    item_type = _value_type(cur.unpack("I", f"item type of array '{key}'"), key)
    count = cur.unpack("Q", f"length of array '{key}'")
    type_name = f"ARRAY[{item_type.name}]"
    if item_type == ValueType.ARRAY:
        raise HeaderError(f"metadata key '{key}' is an array of arrays, which no model file uses")
    if item_type == ValueType.STRING:
        return cur.strings(count, key), type_name
    start = cur.pos
    cur.skip(count * _SCALAR_SIZES[item_type], f"{count} items of array '{key}'")
    cur.spend(count * _NUMBER_COST, f"array '{key}' of {count} numbers")
    dtype = np.dtype("<" + _SCALAR_FORMATS[item_type])
    return np.frombuffer(cur.buf, dtype, count, start).tolist(), type_name


def _tensor_info(cur: _Cursor, index: int) -> TensorInfo:
    cur.spend(_TENSOR_COST, f"tensor {index}")
    name = cur.string(f"name of tensor {index}")
    n_dims = cur.unpack("I", f"dimension count of tensor '{name}'")
    if not 1 <= n_dims <= MAX_DIMS:
        raise HeaderError(f"tensor '{name}' claims {n_dims} dimensions (1 to {MAX_DIMS} are valid; corrupt header)")
    ne = tuple(cur.unpack("Q", f"dimension {d} of tensor '{name}'") for d in range(n_dims))
    code = cur.unpack("I", f"type of tensor '{name}'")
    offset = cur.unpack("Q", f"data offset of tensor '{name}'")
    if code not in TENSOR_TYPES:
        raise HeaderError(_unreadable_type(name, code))
    type_name, block, block_bytes = TENSOR_TYPES[code]
    if any(n == 0 for n in ne):
        raise HeaderError(f"tensor '{name}' has an empty dimension {list(ne)} (corrupt header)")
    if ne[0] % block:
        raise HeaderError(
            f"tensor '{name}' of type {type_name} has a row of {ne[0]} values, not a multiple of its "
            f"block size {block} (corrupt header)"
        )
    n_elements = 1
    for n in ne:
        n_elements *= n
    return TensorInfo(name, ne, type_name, offset, n_elements // block * block_bytes)


def _unreadable_type(name: str, code: int) -> str:
    """Why tensor ``name`` of ggml type ``code`` can't be read. The ``gguf`` package, imported only
    here, names the types that exist (a K-quant, Q4_0) apart from codes that are corrupt."""
    from gguf import GGMLQuantizationType

    try:
        type_name = GGMLQuantizationType(code).name
    except ValueError:
        return f"tensor '{name}' has unknown ggml type id {code} (corrupt header)"
    return (f"tensor '{name}' is of type {type_name}, which Sayso can't read (only F32, F16 and Q8_0); "
            "convert or quantize the model to Q8_0 or F16")


def read_header(buf: bytes | mmap.mmap) -> Header:
    """Walk the header in ``buf`` (the whole file, memory-mapped) and check the tensor layout.

    Raises HeaderError for a wrong magic, an unsupported version, a count or length that runs
    past the end of the file, an unsupported tensor type, a tensor whose shape does not fit its
    block size, or tensor data that lies outside the file or overlaps another tensor.
    """
    file_size = len(buf)
    cur = _Cursor(buf, file_size + HEADER_SLACK)
    if file_size < len(MAGIC) and MAGIC.startswith(buf[:file_size]):
        raise HeaderError(f"the file is truncated: it has only {file_size} bytes")
    if buf[:4] != MAGIC:
        raise HeaderError(f"not a GGUF file: it starts with {bytes(buf[:4])!r} instead of {MAGIC!r}")
    cur.pos = 4
    version = cur.unpack("I", "version")
    if version not in SUPPORTED_VERSIONS:
        hint = " (a big-endian file?)" if version & 0xFFFF == 0 else ""
        raise HeaderError(f"GGUF version {version}{hint} is not supported (only 2 and 3)")
    n_tensors = cur.unpack("Q", "tensor count")
    n_kv = cur.unpack("Q", "metadata count")
    if n_kv * _MIN_KV_BYTES + n_tensors * _MIN_TENSOR_INFO_BYTES > cur.left():
        raise HeaderError(
            f"header claims {n_tensors} tensors and {n_kv} metadata entries, more than the "
            f"{file_size} bytes of the file can hold (corrupt header or truncated file)"
        )

    metadata: dict[str, object] = {}
    types: dict[str, str] = {}
    for i in range(n_kv):
        key = cur.string(f"key of metadata entry {i}")
        if key in metadata:
            raise HeaderError(f"metadata key '{key}' appears twice (corrupt header)")
        cur.spend(_ENTRY_COST, f"metadata entry '{key}'")
        metadata[key], types[key] = _read_value(cur, _value_type(cur.unpack("I", f"value type of '{key}'"), key), key)

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if types.get("general.alignment", "UINT32") != "UINT32" or alignment == 0 or alignment & (alignment - 1):
        raise HeaderError(f"general.alignment must be a UINT32 power of two, not {alignment!r}")
    tensors = [_tensor_info(cur, i) for i in range(n_tensors)]
    data_offset = -(-cur.pos // alignment) * alignment
    _check_tensor_data(tensors, data_offset, file_size, alignment)
    return Header(version, metadata, types, tensors, data_offset)


def _check_tensor_data(tensors: list[TensorInfo], data_offset: int, file_size: int, alignment: int) -> None:
    """Every tensor's bytes lie inside the file, aligned, and no two tensors share a byte."""
    names: set[str] = set()
    for t in tensors:
        if t.name in names:
            raise HeaderError(f"tensor '{t.name}' appears twice (corrupt header)")
        names.add(t.name)
        if t.offset % alignment:
            raise HeaderError(f"tensor '{t.name}' starts at offset {t.offset}, not a multiple of {alignment}")
        end = data_offset + t.offset + t.nbytes
        if end > file_size:
            raise HeaderError(
                f"tensor '{t.name}' ({t.ggml_type} {list(t.ne)}) ends at byte {end} but the file has only "
                f"{file_size} bytes (the file is truncated)"
            )
    ordered = sorted(tensors, key=lambda t: t.offset)
    for a, b in zip(ordered, ordered[1:]):
        if a.offset + a.nbytes > b.offset:
            raise HeaderError(f"tensors '{a.name}' and '{b.name}' overlap in the file (corrupt header)")
