"""A bounds-checked walk over a GGUF header, done before ``gguf.GGUFReader`` sees the file.

``GGUFReader`` trusts the header: a count or length that lies (a flipped byte, a truncated
download) makes it loop over billions of empty reads or fail deep inside numpy. This walk reads
the same structure with every length checked against the bytes that are really there, so a bad
file is refused with one sentence that says where it is wrong, and only files whose header is
consistent reach ``GGUFReader``.

GGUF v2/v3, little-endian (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
``"GGUF" u32 version, u64 n_tensors, u64 n_kv``, then n_kv ``(string key, u32 type, value)``,
then n_tensors ``(string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset)``, then the
tensor data from the next multiple of ``general.alignment`` (32 by default). A string is
``u64 length`` plus UTF-8 bytes; an array is ``u32 item type, u64 count`` plus the items.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS

SUPPORTED_TYPES = {
    GGMLQuantizationType.F32: "F32",
    GGMLQuantizationType.F16: "F16",
    GGMLQuantizationType.Q8_0: "Q8_0",
}
"""The tensor types the engine's backends read (see ``engine.ops.WeightSource``)."""

_SCALAR_SIZES = {
    GGUFValueType.UINT8: 1,
    GGUFValueType.INT8: 1,
    GGUFValueType.BOOL: 1,
    GGUFValueType.UINT16: 2,
    GGUFValueType.INT16: 2,
    GGUFValueType.UINT32: 4,
    GGUFValueType.INT32: 4,
    GGUFValueType.FLOAT32: 4,
    GGUFValueType.UINT64: 8,
    GGUFValueType.INT64: 8,
    GGUFValueType.FLOAT64: 8,
}

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
    """What the walk learned: enough to bound-check the tensor data against the file size."""

    version: int
    tensors: list[TensorInfo]
    data_offset: int  # absolute file offset of the tensor data section


class _Cursor:
    """Reads little-endian values from ``buf`` (an mmap or bytes), refusing to read past its end."""

    def __init__(self, buf: bytes | mmap.mmap):
        self.buf = buf
        self.pos = 0

    def left(self) -> int:
        return len(self.buf) - self.pos

    def skip(self, n: int, what: str) -> None:
        if n > self.left():
            raise HeaderError(
                f"{what} at byte {self.pos} needs {n} bytes but the file ends after {self.left()} more "
                "(the file is truncated or its header is corrupt)"
            )
        self.pos += n

    def take(self, n: int, what: str) -> bytes:
        start = self.pos
        self.skip(n, what)
        return self.buf[start : self.pos]

    def unpack(self, fmt: str, what: str) -> int:
        start = self.pos
        self.skip(struct.calcsize(fmt), what)
        return struct.unpack_from("<" + fmt, self.buf, start)[0]

    def string(self, what: str) -> str:
        start = self.pos
        n = self.unpack("Q", f"length of {what}")
        raw = self.take(n, f"{what} ({n} bytes claimed)")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise HeaderError(f"{what} at byte {start} is not valid UTF-8 (corrupt header)") from None


def _value_type(code: int, key: str) -> GGUFValueType:
    try:
        return GGUFValueType(code)
    except ValueError:
        raise HeaderError(f"metadata key '{key}' has unknown value type {code} (corrupt header)") from None


def _skip_value(cur: _Cursor, vtype: GGUFValueType, key: str) -> int | None:
    """Step over one value; returns it when it is a UINT32 (for ``general.alignment``)."""
    if vtype == GGUFValueType.STRING:
        cur.string(f"string value of '{key}'")
        return None
    if vtype == GGUFValueType.ARRAY:
        item_type = _value_type(cur.unpack("I", f"item type of array '{key}'"), key)
        count = cur.unpack("Q", f"length of array '{key}'")
        if item_type == GGUFValueType.ARRAY:
            raise HeaderError(f"metadata key '{key}' is an array of arrays, which no model file uses")
        if item_type == GGUFValueType.STRING:
            if count * 8 > cur.left():
                raise HeaderError(
                    f"array '{key}' claims {count} strings but only {cur.left()} bytes of file remain "
                    "(the file is truncated or its header is corrupt)"
                )
            for i in range(count):
                cur.string(f"item {i} of array '{key}'")
        else:
            cur.skip(count * _SCALAR_SIZES[item_type], f"{count} items of array '{key}'")
        return None
    if vtype == GGUFValueType.UINT32:
        return cur.unpack("I", f"value of '{key}'")
    cur.skip(_SCALAR_SIZES[vtype], f"value of '{key}'")
    return None


def _tensor_info(cur: _Cursor, index: int) -> TensorInfo:
    name = cur.string(f"name of tensor {index}")
    n_dims = cur.unpack("I", f"dimension count of tensor '{name}'")
    if not 1 <= n_dims <= MAX_DIMS:
        raise HeaderError(f"tensor '{name}' claims {n_dims} dimensions (1 to {MAX_DIMS} are valid; corrupt header)")
    ne = tuple(cur.unpack("Q", f"dimension {d} of tensor '{name}'") for d in range(n_dims))
    code = cur.unpack("I", f"type of tensor '{name}'")
    offset = cur.unpack("Q", f"data offset of tensor '{name}'")
    try:
        qtype = GGMLQuantizationType(code)
    except ValueError:
        raise HeaderError(f"tensor '{name}' has unknown ggml type id {code} (corrupt header)") from None
    if qtype not in SUPPORTED_TYPES:
        raise HeaderError(
            f"tensor '{name}' is of type {qtype.name}, which Sayso can't read (only F32, F16 and Q8_0); "
            "convert or quantize the model to Q8_0 or F16"
        )
    if any(n == 0 for n in ne):
        raise HeaderError(f"tensor '{name}' has an empty dimension {list(ne)} (corrupt header)")
    block, block_bytes = GGML_QUANT_SIZES[qtype]
    if ne[0] % block:
        raise HeaderError(
            f"tensor '{name}' of type {qtype.name} has a row of {ne[0]} values, not a multiple of its "
            f"block size {block} (corrupt header)"
        )
    n_elements = 1
    for n in ne:
        n_elements *= n
    return TensorInfo(name, ne, SUPPORTED_TYPES[qtype], offset, n_elements // block * block_bytes)


def read_header(buf: bytes | mmap.mmap) -> Header:
    """Walk the header in ``buf`` (the whole file, memory-mapped) and check the tensor layout.

    Raises HeaderError for a wrong magic, an unsupported version, a count or length that runs
    past the end of the file, an unsupported tensor type, a tensor whose shape does not fit its
    block size, or tensor data that lies outside the file or overlaps another tensor.
    """
    cur = _Cursor(buf)
    file_size = len(buf)
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

    alignment = DEFAULT_ALIGNMENT
    keys: set[str] = set()
    for i in range(n_kv):
        key = cur.string(f"key of metadata entry {i}")
        if key in keys:
            raise HeaderError(f"metadata key '{key}' appears twice (corrupt header)")
        keys.add(key)
        value = _skip_value(cur, _value_type(cur.unpack("I", f"value type of '{key}'"), key), key)
        if key == "general.alignment":
            if value is None or value == 0 or value & (value - 1):
                raise HeaderError(f"general.alignment must be a UINT32 power of two, not {value}")
            alignment = value

    tensors = [_tensor_info(cur, i) for i in range(n_tensors)]
    data_offset = -(-cur.pos // alignment) * alignment
    _check_tensor_data(tensors, data_offset, file_size, alignment)
    return Header(version, tensors, data_offset)


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
