"""One-node ONNX Runtime sessions, for the CPU work that numpy does badly: an int8 matrix product
(``engine.cpu.q8_matmul``), an encoder's attention (``engine.cpu.ops``) and a recurrent layer's loop
over time (``engine.silero``).

The model is written here in ONNX's protobuf wire format (the ``onnx`` package is not a
dependency; ``engine.onnx_constants`` reads the same format): ``ModelProto`` -> ``GraphProto`` ->
one node, its weights as initializers, its inputs and outputs. Field numbers are those of
onnx.proto3. The weights are declared as external data and handed to the session as numpy arrays
(``add_external_initializers``), so they are neither copied into the protobuf nor parsed out of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_DATA_TYPES = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2}  # TensorProto.DataType
_ATTRIBUTE_FLOAT, _ATTRIBUTE_INT = 1, 2  # AttributeProto.AttributeType


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _bytes(number: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _attribute(name: str, value: int | float) -> bytes:
    """An AttributeProto: an int (field i, 3) or a float (field f, 2: fixed 32 bits)."""
    if isinstance(value, int):
        return _bytes(1, name) + _int(3, value) + _int(20, _ATTRIBUTE_INT)
    return _bytes(1, name) + _varint(2 << 3 | 5) + np.float32(value).tobytes() + _int(20, _ATTRIBUTE_FLOAT)


def _external_tensor(name: str, array: np.ndarray) -> bytes:
    """A TensorProto whose data the session is given apart (data_location EXTERNAL, "location" = name)."""
    dims = b"".join(_int(1, d) for d in array.shape)
    location = _bytes(1, "location") + _bytes(2, name)  # StringStringEntryProto
    return dims + _int(2, _DATA_TYPES[array.dtype]) + _bytes(8, name) + _bytes(13, location) + _int(14, 1)


def _value_info(name: str, dims: tuple[int | str, ...]) -> bytes:
    """A float32 input or output; a str dim is symbolic (any size)."""
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _bytes(2, d)) for d in dims)
    tensor_type = _int(1, _DATA_TYPES[np.dtype(np.float32)]) + _bytes(2, shape)
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


@dataclass
class Node:
    """One operator: its inputs in order ("" for an optional one left out), float32 graph inputs
    with their shapes, weights by name, outputs, int or float attributes, and its opset domain."""

    op_type: str
    inputs: list[str]
    graph_inputs: dict[str, tuple[int | str, ...]]
    weights: dict[str, np.ndarray]
    outputs: dict[str, tuple[int | str, ...]]
    attributes: dict[str, int | float] = field(default_factory=dict)
    domain: str = ""

    def model(self) -> bytes:
        node = b"".join(_bytes(1, name) for name in self.inputs) + b"".join(_bytes(2, name) for name in self.outputs)
        node += _bytes(4, self.op_type)
        node += b"".join(_bytes(5, _attribute(key, value)) for key, value in self.attributes.items())
        node += _bytes(7, self.domain)
        graph = _bytes(1, node) + _bytes(2, self.op_type.lower())
        graph += b"".join(_bytes(5, _external_tensor(name, array)) for name, array in self.weights.items())
        graph += b"".join(_bytes(11, _value_info(name, dims)) for name, dims in self.graph_inputs.items())
        graph += b"".join(_bytes(12, _value_info(name, dims)) for name, dims in self.outputs.items())
        opsets = _bytes(8, _bytes(1, "") + _int(2, 17)) + _bytes(8, _bytes(1, "com.microsoft") + _int(2, 1))
        return _int(1, 8) + opsets + _bytes(7, graph)  # ir_version 8


def session(node: Node, threads: int):
    """An ONNX Runtime session running ``node`` on ``threads`` CPU threads. Its threads sleep when
    idle rather than spin: our own threads run between its calls."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    values = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a)) for a in node.weights.values()]
    options.add_external_initializers(list(node.weights), values)
    runner = ort.InferenceSession(node.model(), options, providers=["CPUExecutionProvider"])
    runner.weights = values  # the session reads the arrays it was given: keep them alive with it
    return runner
