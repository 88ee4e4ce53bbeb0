"""Read a CTranslate2 Whisper directory (``model.bin``, ``config.json``, ``tokenizer.json``).

``model.bin`` layout (CTranslate2's ``ModelSpec._serialize`` / ``models::Model::load``), little-endian:
``u32 binary_version`` (we read 4 to 6), ``string spec_name`` ("WhisperSpec"), ``u32 revision``,
``u32 n_variables``, then per variable ``string name, u8 rank, u32 dims[rank], u8 dtype, u32 nbytes,
bytes``; then ``u32 n_aliases`` and ``(string alias, string target)`` pairs. A string is
``u16 length`` (including a trailing NUL) plus the bytes and the NUL. dtype ids: 0 float32, 1 int8,
2 int16, 3 int32, 4 float16, 5 bfloat16.

CTranslate2 fuses Whisper's projections: self-attention ``linear_0`` is q, k, v stacked [3D, D]
(its k bias rows are zeros: Whisper's k has no bias), cross-attention ``linear_0`` is q and
``linear_1`` k, v stacked [2D, D]; the last linear of each attention is the output projection.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from sayso.engine.convert.checkpoint_json import load_json
from sayso.engine.convert.source import WhisperSource
from sayso.engine.convert.tokenizer import read_vocabulary
from sayso.engine.errors import ModelFileError

_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16, 5: np.uint16}
_BFLOAT16 = 5
_SUPPORTED_BINARY_VERSIONS = range(4, 7)
_ACTIVATIONS = {0: "relu", 1: "gelu_tanh", 2: "silu", 3: "gelu", 4: "gelu_sigmoid", 5: "tanh"}
"""CTranslate2's ActivationType enum."""


def read_model_bin(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    """The spec name and the variables of a ``model.bin`` (arrays are views of a memory map)."""
    try:
        raw = np.memmap(path, dtype=np.uint8, mode="r")
    except (OSError, ValueError) as e:
        raise ModelFileError(path, f"can't be read ({e})") from None
    pos = 0

    def take(n: int, what: str) -> np.ndarray:
        nonlocal pos
        if pos + n > len(raw):
            raise ModelFileError(path, f"{what} at byte {pos} runs past the end of the file (truncated?)")
        pos += n
        return raw[pos - n : pos]

    def unpack(fmt: str, what: str) -> int:
        return struct.unpack("<" + fmt, take(struct.calcsize(fmt), what).tobytes())[0]

    def string(what: str) -> str:
        n = unpack("H", f"length of {what}")
        return take(n, what).tobytes().rstrip(b"\0").decode("utf-8", errors="replace")

    version = unpack("I", "binary version")
    if version not in _SUPPORTED_BINARY_VERSIONS:
        raise ModelFileError(path, f"is a CTranslate2 model of binary version {version}, only 4 to 6 are read")
    spec = string("spec name")
    unpack("I", "spec revision")
    variables: dict[str, np.ndarray] = {}
    for _ in range(unpack("I", "variable count")):
        name = string("variable name")
        rank = unpack("B", f"rank of {name}")
        shape = tuple(unpack("I", f"shape of {name}") for _ in range(rank))
        dtype_id = unpack("B", f"dtype of {name}")
        nbytes = unpack("I", f"size of {name}")
        if dtype_id not in _DTYPES:
            raise ModelFileError(path, f"variable {name} has unknown dtype id {dtype_id}")
        dtype = np.dtype(_DTYPES[dtype_id])
        if nbytes != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise ModelFileError(path, f"variable {name} of shape {list(shape)} claims {nbytes} bytes")
        data = take(nbytes, f"data of {name}").view(dtype).reshape(shape)
        if dtype_id == _BFLOAT16:  # the high half of a float32
            data = (data.astype(np.uint32) << 16).view(np.float32)
        variables[name] = data
    return spec, variables


def read_ct2_whisper(model_dir: Path) -> WhisperSource:
    """A CTranslate2 Whisper model as GGUF-named float arrays, plus its tokenizer and decoding config."""
    spec, variables = read_model_bin(model_dir / "model.bin")
    if spec != "WhisperSpec":
        raise ModelFileError(model_dir / "model.bin", f"is a CTranslate2 {spec or 'unnamed'} model, not Whisper")
    config = load_json(model_dir / "config.json")

    def var(name: str) -> np.ndarray:
        if name not in variables:
            raise ModelFileError(model_dir / "model.bin", f"has no variable {name}")
        value = variables[name]
        if value.dtype not in (np.float16, np.float32):
            raise ModelFileError(
                model_dir / "model.bin",
                f"variable {name} is {value.dtype}; only float16/float32 CTranslate2 models are read "
                "(this one is quantized: use its float16 version)",
            )
        return value

    tensors: dict[str, np.ndarray] = {}

    def norm(src: str, dst: str) -> None:
        tensors[f"{dst}.weight"] = var(f"{src}/gamma")
        tensors[f"{dst}.bias"] = var(f"{src}/beta")

    def linear(src: str, dst: str) -> None:
        tensors[f"{dst}.weight"] = var(f"{src}/weight")
        tensors[f"{dst}.bias"] = var(f"{src}/bias")

    def split(src: str, dsts: list[str]) -> None:
        """Unstack a fused projection; the ``k`` part keeps no bias (it must be zero)."""
        weights = np.split(var(f"{src}/weight"), len(dsts))
        biases = np.split(var(f"{src}/bias"), len(dsts))
        for dst, w, b in zip(dsts, weights, biases):
            tensors[f"{dst}.weight"] = w
            if dst.endswith(".k"):
                if np.any(b):
                    raise ModelFileError(model_dir / "model.bin", f"{src} has a non-zero key bias")
            else:
                tensors[f"{dst}.bias"] = b

    linear("encoder/conv1", "enc.conv.0")
    linear("encoder/conv2", "enc.conv.1")
    tensors["enc.pos_emb.weight"] = var("encoder/position_encodings/encodings")
    norm("encoder/layer_norm", "enc.final_norm")
    for i in range(_count_layers(variables, "encoder")):
        src, dst = f"encoder/layer_{i}", f"enc.blocks.{i}"
        norm(f"{src}/self_attention/layer_norm", f"{dst}.norm_attn")
        split(f"{src}/self_attention/linear_0", [f"{dst}.attn.q", f"{dst}.attn.k", f"{dst}.attn.v"])
        linear(f"{src}/self_attention/linear_1", f"{dst}.attn.out")
        norm(f"{src}/ffn/layer_norm", f"{dst}.norm_ffn")
        linear(f"{src}/ffn/linear_0", f"{dst}.ffn.fc1")
        linear(f"{src}/ffn/linear_1", f"{dst}.ffn.fc2")
    tensors["dec.token_embd.weight"] = var("decoder/embeddings/weight")
    tensors["dec.pos_emb.weight"] = var("decoder/position_encodings/encodings")
    norm("decoder/layer_norm", "dec.final_norm")
    for i in range(_count_layers(variables, "decoder")):
        src, dst = f"decoder/layer_{i}", f"dec.blocks.{i}"
        norm(f"{src}/self_attention/layer_norm", f"{dst}.norm_self")
        split(f"{src}/self_attention/linear_0", [f"{dst}.self_attn.q", f"{dst}.self_attn.k", f"{dst}.self_attn.v"])
        linear(f"{src}/self_attention/linear_1", f"{dst}.self_attn.out")
        norm(f"{src}/attention/layer_norm", f"{dst}.norm_cross")
        linear(f"{src}/attention/linear_0", f"{dst}.cross_attn.q")
        split(f"{src}/attention/linear_1", [f"{dst}.cross_attn.k", f"{dst}.cross_attn.v"])
        linear(f"{src}/attention/linear_2", f"{dst}.cross_attn.out")
        norm(f"{src}/ffn/layer_norm", f"{dst}.norm_ffn")
        linear(f"{src}/ffn/linear_0", f"{dst}.ffn.fc1")
        linear(f"{src}/ffn/linear_1", f"{dst}.ffn.fc2")

    def scalar(name: str, default: int | None = None) -> int:
        if name not in variables and default is None:
            raise ModelFileError(model_dir / "model.bin", f"has no variable {name}")
        return int(variables.get(name, default))

    return WhisperSource(
        path=model_dir,
        tensors=tensors,
        encoder_heads=scalar("encoder/num_heads"),
        decoder_heads=scalar("decoder/num_heads"),
        scale_embedding=bool(scalar("decoder/scale_embeddings", 0)),
        activation=_ACTIVATIONS.get(scalar("decoder/activation", 3), "unknown"),
        vocabulary=read_vocabulary(model_dir, tensors["dec.token_embd.weight"].shape[0]),
        suppress_tokens=[int(t) for t in config.get("suppress_ids", [])],
        begin_suppress_tokens=[int(t) for t in config.get("suppress_ids_begin", [])],
    )


def _count_layers(variables: dict[str, np.ndarray], stack: str) -> int:
    n = 0
    while f"{stack}/layer_{n}/ffn/linear_0/weight" in variables:
        n += 1
    return n
