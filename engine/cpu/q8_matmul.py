"""Vocabulary-sized Q8_0 weights kept in 8 bits on the CPU, multiplied by ONNX Runtime's int8 kernel.

A decoder step reads every weight once for one row of activations, so its time is the time to read
the weights. The largest by far is the vocabulary projection (Whisper tiny: 51864 x 384, 80 MB in
float32, two thirds of a step's reads). Kept as the file's Q8_0 blocks it is 21 MB, and
ONNX Runtime's ``MatMulNBits`` (8 bits, blocks of 32, ``accuracy_level`` 4) multiplies it straight
from them on int8 units, quantizing the activations to 8 bits per block of 32 as transcribe.cpp's CPU
build does: 1.4 ms per step here instead of 3.9 ms for numpy's float32 GEMV. numpy has no int8
matrix product, hence the library; it is already a dependency (the Moonshine converter reads ORT files).

The graph is one node, written here in ONNX's protobuf wire format (the ``onnx`` package is not a
dependency): ``ModelProto`` -> ``GraphProto`` -> the node, the two weight tensors as initializers, and
the input and output. Field numbers are those of onnx.proto3. The initializers are declared as
external data and handed over as numpy arrays (``add_external_initializers``), so the 20 MB of
weights are neither copied into the protobuf nor parsed out of it again.

Embedding lookups read a few rows of the same table (``rows``), dequantized as they are asked for.
"""

from __future__ import annotations

import os

import numpy as np

Q8_0_BLOCK = 32  # values per Q8_0 block: one float16 scale, then 32 int8
Q8_0_BLOCK_BYTES = 2 + Q8_0_BLOCK
VOCABULARY_ROWS = 16384  # a Q8_0 weight with at least this many rows is a token table (Q8Weight)

_FLOAT, _UINT8 = 1, 2  # TensorProto.DataType
_ATTRIBUTE_INT = 2  # AttributeProto.AttributeType


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


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _external_tensor(name: str, data_type: int, shape: tuple[int, ...]) -> bytes:
    """A TensorProto whose data the session is given apart (data_location EXTERNAL, "location" = name)."""
    dims = b"".join(_int(1, d) for d in shape)
    location = _bytes(1, "location") + _bytes(2, name)  # StringStringEntryProto
    return dims + _int(2, data_type) + _bytes(8, name) + _bytes(13, location) + _int(14, 1)


def _value_info(name: str, elem_type: int, dims: tuple[int | str, ...]) -> bytes:
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _bytes(2, d)) for d in dims)
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


def matmul_nbits_model(n: int, k: int) -> bytes:
    """An ONNX model computing ``y[M, N] = a[M, K] @ W.T`` for W in 8-bit blocks of 32, given apart:
    "quants", uint8 [N, K/32, 32], each value its int8 plus 128 (the default zero point of 8-bit
    ``MatMulNBits``), and "scales", float32 [N * K/32]."""
    n_blocks = k // Q8_0_BLOCK
    attributes = [("K", k), ("N", n), ("bits", 8), ("block_size", Q8_0_BLOCK), ("accuracy_level", 4)]
    node = (
        _bytes(1, "a") + _bytes(1, "quants") + _bytes(1, "scales") + _bytes(2, "y") + _bytes(4, "MatMulNBits")
        + b"".join(_bytes(5, _bytes(1, name) + _int(3, value) + _int(20, _ATTRIBUTE_INT)) for name, value in attributes)
        + _bytes(7, "com.microsoft")
    )
    graph = (
        _bytes(1, node) + _bytes(2, "q8_matmul")
        + _bytes(5, _external_tensor("quants", _UINT8, (n, n_blocks, Q8_0_BLOCK)))
        + _bytes(5, _external_tensor("scales", _FLOAT, (n * n_blocks,)))
        + _bytes(11, _value_info("a", _FLOAT, ("m", k))) + _bytes(12, _value_info("y", _FLOAT, ("m", n)))
    )
    opsets = _bytes(8, _bytes(1, "") + _int(2, 17)) + _bytes(8, _bytes(1, "com.microsoft") + _int(2, 1))
    return _int(1, 8) + opsets + _bytes(7, graph)  # ir_version 8


class Q8Weight:
    """A [N, K] weight kept as its GGUF Q8_0 blocks (uint8 [N, K/32, 34]: float16 scale, 32 int8)."""

    def __init__(self, blocks: np.ndarray, name: str = "weight"):
        import onnxruntime as ort

        n, n_blocks, _ = blocks.shape
        self.name = name
        self.shape = (n, n_blocks * Q8_0_BLOCK)
        self.blocks = blocks
        quants = np.bitwise_xor(blocks[:, :, 2:], 0x80)  # int8 + 128 as uint8, in one uint8 pass
        scales = self._scales(slice(None)).reshape(-1)
        options = ort.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        # Our own block threads run between these calls: ORT's must sleep, not spin, when idle.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._initializers = [ort.OrtValue.ortvalue_from_numpy(quants), ort.OrtValue.ortvalue_from_numpy(scales)]
        options.add_external_initializers(["quants", "scales"], self._initializers)
        self.session = ort.InferenceSession(matmul_nbits_model(*self.shape), options, providers=["CPUExecutionProvider"])

    def _scales(self, rows) -> np.ndarray:
        return self.blocks[rows, :, :2].copy().view(np.float16).astype(np.float32)[..., 0]

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """The float32 rows ``ids`` [T] of the weight, [T, K] (an embedding lookup)."""
        blocks = self.blocks[ids]
        values = blocks[:, :, 2:].view(np.int8) * self._scales(ids)[..., None]
        return values.reshape(len(ids), self.shape[1]).astype(np.float32)

    def matmul(self, a: np.ndarray) -> np.ndarray:
        """``a [M, K] @ W.T`` -> float32 [M, N], the activations quantized per block of 32."""
        return self.session.run(None, {"a": np.ascontiguousarray(a, np.float32)})[0]
