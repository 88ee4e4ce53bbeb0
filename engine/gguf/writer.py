"""Write a GGUF file with metadata and tensors in a given order and with exact types.

transcribe.cpp's loader reads keys by name but checks their types (a UINT32 is not an INT32), and
files are compared key by key with the ones its converter writes, so the caller states every
value's GGUF type and the order; nothing is inferred. The file is written next to its destination
and renamed into place, so a crash or a full disk never leaves a half-written model behind; each
tensor's checksum is recorded beside it (``sums``).
"""

from __future__ import annotations

import errno
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter
from gguf.quants import quantize

from sayso.engine.files import atomic_output
from sayso.engine.gguf.header import StringArray
from sayso.engine.gguf.sums import write_sums


@dataclass(frozen=True)
class Meta:
    """One metadata entry. ``type`` is a GGUF value type name (``"UINT32"``, ``"STRING"``, ``"BOOL"``,
    ``"FLOAT32"``...) or ``"ARRAY[<item type>]"`` (``"ARRAY[INT32]"``, ``"ARRAY[STRING]"``)."""

    key: str
    type: str
    value: object


@dataclass(frozen=True)
class TensorOut:
    """One tensor to write: float values (any float dtype) in their logical numpy shape, stored as
    ``ggml_type``. ``"F32"`` and ``"F16"`` store the values cast; ``"Q8_0"`` quantizes each row in
    blocks of 32 (the last axis must be a multiple of 32). Values are only converted when the file
    is written, so memory-mapped float16 sources are not copied to float32 first.
    """

    name: str
    values: np.ndarray
    ggml_type: str  # "F32" | "F16" | "Q8_0"


def encode(tensor: TensorOut) -> np.ndarray:
    """The bytes GGUF stores for ``tensor``: float32, float16, or Q8_0 blocks (uint8 [..., K/32*34])."""
    if tensor.ggml_type == "F32":
        return np.ascontiguousarray(tensor.values, dtype=np.float32)
    if tensor.ggml_type == "F16":
        return np.ascontiguousarray(tensor.values, dtype=np.float16)
    if tensor.ggml_type == "Q8_0":
        if tensor.values.shape[-1] % 32:
            raise ValueError(f"{tensor.name}: Q8_0 needs rows that are a multiple of 32, got {tensor.values.shape}")
        return quantize(np.asarray(tensor.values, dtype=np.float32), GGMLQuantizationType.Q8_0)
    raise ValueError(f"{tensor.name}: can't write type {tensor.ggml_type!r} (F32, F16 or Q8_0)")


def _parse_type(name: str) -> tuple[GGUFValueType, GGUFValueType | None]:
    if name.startswith("ARRAY[") and name.endswith("]"):
        return GGUFValueType.ARRAY, GGUFValueType[name[6:-1]]
    return GGUFValueType[name], None


def _plain(value: object) -> object:
    """numpy scalars and arrays, and a read file's ``StringArray``, as Python values, which is what
    GGUFWriter packs."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple, StringArray)):
        return [_plain(v) for v in value]
    return value


def write_gguf(path: str | os.PathLike, architecture: str, metadata: list[Meta], tensors: list[TensorOut]) -> None:
    """Write ``path``: ``general.architecture`` first (GGUFWriter puts it there), then ``metadata``
    and ``tensors`` in the order given. Replaces ``path`` atomically."""
    path = Path(path)
    try:
        with atomic_output(path) as tmp:
            writer = GGUFWriter(tmp, architecture)
            for m in metadata:
                if m.key == "general.architecture":
                    raise ValueError("general.architecture is written from the architecture argument")
                vtype, sub_type = _parse_type(m.type)
                writer.add_key_value(m.key, _plain(m.value), vtype, sub_type)
            sums = {}
            for t in tensors:
                data = encode(t)
                sums[t.name] = zlib.crc32(data)
                writer.add_tensor(t.name, data, raw_dtype=GGMLQuantizationType[t.ggml_type])
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
            writer.close()
        write_sums(path, sums)
    except OSError as error:
        if error.errno is None:  # numpy's tofile says only "N requested and M written": the disk took no more
            raise OSError(errno.ENOSPC, f"the disk took only part of the model ({error})", str(path)) from None
        raise
