"""The constant tensors of an ONNX file, read straight from its protobuf encoding.

Silero VAD ships as ONNX with its weights in ``Constant`` nodes (inside ``If`` branches, one per
sample rate). Reading them needs nothing of the ``onnx`` package but the wire format: a message is a
run of (field number, wire type) keys, each followed by a varint, a fixed 4 or 8 bytes, or a
length-prefixed run of bytes (strings, packed numbers, nested messages). Only the fields on the way
to a constant are decoded:

    ModelProto.graph (7) -> GraphProto.node (1) -> NodeProto.output (2), .op_type (4), .attribute (5)
    AttributeProto.t (5): a TensorProto; AttributeProto.g (6): a subgraph, walked the same way
    TensorProto: dims (1), data_type (2), float_data (4), int64_data (7), raw_data (9)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from sayso.engine.errors import ModelFileError

# TensorProto.DataType -> numpy little-endian type (the ones a model's weights and shapes use)
_DTYPES = {1: "<f4", 6: "<i4", 7: "<i8", 10: "<f2", 11: "<f8"}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a message: ints for varints and fixed fields, bytes else."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 1:
            value, at = int.from_bytes(data[at : at + 8], "little"), at + 8
        elif wire == 2:
            size, at = _varint(data, at)
            value, at = data[at : at + size], at + size
        elif wire == 5:
            value, at = int.from_bytes(data[at : at + 4], "little"), at + 4
        else:
            raise ValueError(f"protobuf wire type {wire} (groups) is not used by ONNX")
        yield number, wire, value


def _tensor(data: bytes) -> np.ndarray:
    dims, dtype, raw, floats, ints = [], 1, None, b"", []
    for number, wire, value in _fields(data):
        if number == 1:  # dims: packed (wire 2) or one varint each
            if wire == 2:
                at = 0
                while at < len(value):
                    dim, at = _varint(value, at)
                    dims.append(dim)
            else:
                dims.append(value)
        elif number == 2:
            dtype = value
        elif number == 9:
            raw = value
        elif number == 4 and wire == 2:
            floats += value  # packed float32s
        elif number == 7 and wire == 2:
            at = 0
            while at < len(value):
                item, at = _varint(value, at)
                ints.append(item - (1 << 64) if item >= 1 << 63 else item)
    if dtype not in _DTYPES:
        raise ValueError(f"ONNX tensor type {dtype} is not supported here")
    if raw is not None:
        array = np.frombuffer(raw, _DTYPES[dtype])
    elif floats:
        array = np.frombuffer(floats, "<f4")
    else:
        array = np.array(ints, _DTYPES[dtype])
    return array.reshape(dims).copy()


def _walk(graph: bytes) -> Iterator[tuple[str, np.ndarray]]:
    for number, _, node in _fields(graph):
        if number != 1:
            continue
        outputs, op_type, attributes = [], b"", []
        for field, _, value in _fields(node):
            if field == 2:
                outputs.append(value.decode())
            elif field == 4:
                op_type = value
            elif field == 5:
                attributes.append(value)
        for attribute in attributes:
            for field, _, value in _fields(attribute):
                if field == 5 and op_type == b"Constant":
                    yield outputs[0], _tensor(value)
                elif field == 6:  # a subgraph (an If's branch)
                    yield from _walk(value)


def constants(path: Path) -> dict[str, np.ndarray]:
    """Every ``Constant`` node's tensor in the model at ``path`` and its subgraphs, by output name."""
    try:
        data = Path(path).read_bytes()
        graph = next(value for number, _, value in _fields(data) if number == 7)
        return dict(_walk(graph))
    except (OSError, StopIteration, ValueError, IndexError) as error:
        raise ModelFileError(path, f"not a readable ONNX model ({error or 'no graph'})") from None
