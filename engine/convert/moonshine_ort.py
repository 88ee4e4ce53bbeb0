"""Read Moonshine out of the ONNX Runtime files that Moonshine's own packages ship.

``moonshine-voice`` (tiny) and ``moonshine-cpp`` (base) hold the model as ``encoder_model.ort`` and
``decoder_model_merged.ort`` (Hugging Face optimum exports; the decoder is an ``If`` over its first and
its cached steps) with 8-bit weights, and ``tokenizer.bin``. An .ort file is a FlatBuffer whose schema
onnxruntime ships (``ort_flatbuffers_py``), so the graph is read here, not run.

The two packages were made by different tool chains, so the same weight comes in different forms:

* tiny: ``DynamicQuantizeMatMul`` / ``MatMulIntegerToFloat`` nodes holding uint8 weights with one scale
  and zero point per tensor (``(q - zero) * scale``); the embedding as uint8 rows dequantized after
  the ``Gather``; fused LayerNorm and Conv+Tanh nodes.
* base: plain ``MatMul`` / ``Conv`` nodes whose weight is computed from int8 values by
  ``Cast -> Mul(scale) -> Add(offset)``; LayerNorm spelled out as ReduceMean .. Mul; and the names of
  an older transformers (``dense`` for ``o_proj``, ``up_proj``/``down_proj`` for ``fc1``/``fc2``).

So constant sub-graphs are folded (``OrtGraph.constant``), and each weight is named by the module path
the exporter wrote into the name of the node that uses it (``/model/decoder/layers.0/self_attn/q_proj/
MatMul_output_0``) or by its own name (``layers.0.input_layernorm.weight``): transformers' names.

The tokenizer comes from Moonshine's ``tokenizer.json`` beside the model files (``tokenizer.bin`` lists
only the pieces, without the BPE merges); it must agree with ``tokenizer.bin`` piece by piece.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sayso.engine.convert.moonshine import (
    KNOWN_HPARAMS, TIED_OUTPUT, MoonshineSource, gguf_tensors, piece_bytes, read_vocabulary,
)
from sayso.engine.errors import ModelFileError

ENCODER_FILE = "encoder_model.ort"
DECODER_FILE = "decoder_model_merged.ort"
TOKENIZER_BIN = "tokenizer.bin"
TOKENIZER_JSON = "tokenizer.json"

_ONNX_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16}
"""ONNX TensorProto data types -> numpy, for the constants these models hold."""
_INT, _GRAPH, _INTS = 2, 5, 7
"""ORT's AttributeType codes of the attributes read here (Cast's ``to``, Transpose's ``perm``, If's branches)."""
_PARAMETER = re.compile(r"((?:model\.(?:encoder|decoder)\.)?[A-Za-z_][\w.]*?\.(?:weight|bias))(?:_\w+)?")
"""A constant named after a module parameter, with whatever the export appended (``_merged_0``, ``_add_tensor``)."""
_OLD_NAMES = ((".dense.", ".o_proj."), (".mlp.up_proj.", ".mlp.fc1."), (".mlp.down_proj.", ".mlp.fc2."))
"""The names of transformers' first Moonshine (used by the base export) -> today's."""


@dataclass
class Node:
    """One graph node: its operator, the names of its input and output tensors ('' for an omitted
    optional input), and its integer attributes."""

    op: str
    inputs: list[str]
    outputs: list[str]
    attributes: dict[str, object] = field(default_factory=dict)


class OrtGraph:
    """The nodes and constants of an ORT-format model, subgraphs (``If`` branches) included."""

    def __init__(self, path: Path):
        from onnxruntime.tools.ort_format_model.ort_flatbuffers_py.fbs.InferenceSession import InferenceSession

        self.path = path
        try:
            buffer = path.read_bytes()
        except OSError as e:
            raise ModelFileError(path, f"can't be read ({e.strerror or e})") from None
        if not InferenceSession.InferenceSessionBufferHasIdentifier(buffer, 0):
            raise ModelFileError(path, "is not an ONNX Runtime (.ort) model")
        self._initializers: dict[str, object] = {}  # name -> flatbuffer Tensor, decoded when asked for
        self.nodes: list[Node] = []
        self._read_graph(InferenceSession.GetRootAsInferenceSession(buffer, 0).Model().Graph())
        self._producers = {out: node for node in self.nodes for out in node.outputs}
        self._folded: dict[str, np.ndarray | None] = {}

    def _read_graph(self, graph) -> None:
        for i in range(graph.InitializersLength()):
            tensor = graph.Initializers(i)
            self._initializers[tensor.Name().decode()] = tensor
        for i in range(graph.NodesLength()):
            node = graph.Nodes(i)
            attributes = {}
            for j in range(node.AttributesLength()):
                attribute = node.Attributes(j)
                kind = attribute.Type()
                if kind == _GRAPH:  # an If branch: its nodes join the list
                    self._read_graph(attribute.G())
                elif kind == _INT:
                    attributes[attribute.Name().decode()] = attribute.I()
                elif kind == _INTS:
                    attributes[attribute.Name().decode()] = [attribute.Ints(k) for k in range(attribute.IntsLength())]
            self.nodes.append(Node(
                node.OpType().decode(),
                [node.Inputs(j).decode() for j in range(node.InputsLength())],
                [node.Outputs(j).decode() for j in range(node.OutputsLength())],
                attributes,
            ))  # fmt: skip

    def constant(self, name: str) -> np.ndarray | None:
        """The value of tensor ``name`` if it is constant: an initializer, or the output of a node that
        only reshapes, casts or dequantizes constants. None for anything that depends on the inputs."""
        if name not in self._folded:
            self._folded[name] = self._fold(name)
        return self._folded[name]

    def _fold(self, name: str) -> np.ndarray | None:
        if name in self._initializers:
            return self._decode(self._initializers[name])
        node = self._producers.get(name)
        if node is None or node.op not in _FOLDABLE:
            return None
        args = [self.constant(x) for x in node.inputs if x]
        if any(a is None for a in args):
            return None
        return _FOLDABLE[node.op](node, *args)

    def _decode(self, tensor) -> np.ndarray:
        name = tensor.Name().decode()
        dtype = _ONNX_DTYPES.get(tensor.DataType())
        if dtype is None or tensor.RawDataIsNone():
            raise ModelFileError(self.path, f"constant {name} is stored in a way this reader doesn't know "
                                 f"(type {tensor.DataType()})")  # fmt: skip
        dims = [tensor.Dims(j) for j in range(tensor.DimsLength())]
        return tensor.RawDataAsNumpy().view(dtype).reshape(dims)


def _dequantize(x: np.ndarray, scale: np.ndarray, zero: np.ndarray | None) -> np.ndarray:
    """ONNX's (u)int8 -> float: ``(x - zero) * scale``."""
    values = x.astype(np.float32)
    if zero is not None:
        values -= zero.astype(np.float32)
    return values * scale.astype(np.float32)


_FOLDABLE = {
    "Cast": lambda node, x: x.astype(_ONNX_DTYPES[node.attributes["to"]]),
    "Mul": lambda node, a, b: a * b,
    "Add": lambda node, a, b: a + b,
    "Sub": lambda node, a, b: a - b,
    "Transpose": lambda node, x: np.transpose(x, node.attributes.get("perm")),
    "DequantizeLinear": lambda node, x, scale, zero=None: _dequantize(x, scale, zero),
}
"""The node types a weight passes through on its way from an initializer to where it is used."""


# ---- naming --------------------------------------------------------------------------------------


def module_path(output: str) -> str | None:
    """``/model/decoder/layers.0/self_attn/q_proj/MatMul_output_0`` -> ``model.decoder.layers.0.self_attn.q_proj``;
    None when the name carries no module (``logits``, ``/Tanh_output_0`` of a fused node)."""
    return ".".join(output.split("/")[1:-1]) or None


def transformers_name(name: str, scope: str) -> str:
    """A module or parameter path as today's transformers names it, ``scope`` (``model.encoder.``) in front
    when the export left it out."""
    for old, new in _OLD_NAMES:
        name = name.replace(old, new)
    return name if name.startswith("model.") or name == TIED_OUTPUT else scope + name


# ---- reading the weights ---------------------------------------------------------------------------

_LINEAR = {"MatMul": (1, None, None), "DynamicQuantizeMatMul": (1, 2, 3), "MatMulIntegerToFloat": (1, 3, 5)}
"""Product nodes -> input index of the weight [in, out], of its scale and of its zero point (quantized ones)."""


def read_parameters(graph: OrtGraph, scope: str) -> dict[str, np.ndarray]:
    """Every weight of one ORT file as float32 arrays under transformers' names, linear weights [out, in].

    ``scope``: ``model.encoder.`` or ``model.decoder.``, for the names the export wrote without it. A
    weight that the decoder's two branches both use is read once (they must agree).

    First the weights that nodes use in their own way (products, the embedding table, GroupNorm's
    affine), then every other constant named after a parameter (norms, convolutions, biases) where a
    node computes with it; nodes whose output is itself constant only prepare a weight (dequantize,
    transpose) and are skipped.
    """
    found: dict[str, np.ndarray] = {}

    def put(name: str, value: np.ndarray) -> None:
        name = transformers_name(name, scope)
        value = np.ascontiguousarray(value, dtype=np.float32)
        if name not in found:
            found[name] = value
        elif not np.array_equal(found[name], value):
            raise ModelFileError(graph.path, f"holds two different values for {name}")

    dequantizers = {node.inputs[0]: node for node in graph.nodes if node.op == "DequantizeLinear"}
    used: set[str] = set()  # constants read above as something other than a named parameter
    for node in graph.nodes:
        if node.op in _LINEAR:
            indices = [i for i in _LINEAR[node.op] if i is not None and i < len(node.inputs)]
            weight, *quantization = (graph.constant(node.inputs[i]) if node.inputs[i] else None for i in indices)
            if weight is None or weight.ndim != 2:  # attention's products (of activations, or of an empty cache)
                continue
            if quantization:
                weight = _dequantize(weight, *quantization)
            module = module_path(node.outputs[0])
            put(f"{module}.weight" if module else TIED_OUTPUT, weight.T)  # no module: the logits' product
            used.update(node.inputs[i] for i in indices)
        elif node.op == "Gather" and graph.constant(node.inputs[0]) is not None:  # the token embedding
            table = graph.constant(node.inputs[0])
            dequantizer = dequantizers.get(node.outputs[0])  # quantized rows, dequantized once gathered
            if dequantizer is not None:
                table = _dequantize(table, *(graph.constant(x) for x in dequantizer.inputs[1:]))
                used.update(dequantizer.inputs[1:])
            put(_parameter(graph, node.inputs[0]), table)
            used.add(node.inputs[0])
        elif node.op in ("Mul", "Add") and module_path(node.outputs[0]) == "groupnorm":  # GroupNorm's affine
            for x in node.inputs:
                if graph.constant(x) is not None:
                    put(f"groupnorm.{'weight' if node.op == 'Mul' else 'bias'}", graph.constant(x).reshape(-1))
                    used.add(x)
    for node in graph.nodes:
        if graph.constant(node.outputs[0]) is not None:
            continue
        for x in node.inputs:
            if x not in used and _PARAMETER.fullmatch(x) and graph.constant(x) is not None:
                put(_parameter(graph, x), graph.constant(x))
    return found


def _parameter(graph: OrtGraph, constant: str) -> str:
    match = _PARAMETER.fullmatch(constant)
    if match is None:
        raise ModelFileError(graph.path, f"constant {constant} is not named after a model parameter")
    return match.group(1)


def rotary_dims(graph: OrtGraph) -> tuple[int, float]:
    """(rotary dims per head, base) from the graph's inverse frequencies ``base**(-2i/dims)``."""
    for node in graph.nodes:
        if any("rotary_emb/" in out for out in node.outputs):
            for x in node.inputs:
                values = graph.constant(x) if x else None
                if values is not None and values.dtype == np.float32 and values.size > 1:
                    inv_freq = values.reshape(-1)
                    dims = 2 * inv_freq.size
                    return dims, float(inv_freq[1] ** (-dims / 2))
    raise ModelFileError(graph.path, "has no rotary embedding")


# ---- the directory -------------------------------------------------------------------------------


def read_ort_moonshine(model_dir: Path) -> MoonshineSource:
    """A directory with Moonshine's ``encoder_model.ort``, ``decoder_model_merged.ort``, ``tokenizer.bin``
    and ``tokenizer.json``, as a MoonshineSource."""
    graphs = {scope: OrtGraph(model_dir / file) for scope, file in
              (("model.encoder.", ENCODER_FILE), ("model.decoder.", DECODER_FILE))}  # fmt: skip
    hf_tensors: dict[str, np.ndarray] = {}
    for scope, graph in graphs.items():
        hf_tensors.update(read_parameters(graph, scope))
    tensors = gguf_tensors(hf_tensors, model_dir)
    d_model = tensors["enc.conv.0.weight"].shape[0]
    hparams = KNOWN_HPARAMS.get(d_model)
    if hparams is None:
        raise ModelFileError(model_dir, f"holds a Moonshine of width {d_model}, not tiny (288) or base (416)")
    for stack, heads in (("model.encoder.", hparams.encoder_heads), ("model.decoder.", hparams.decoder_heads)):
        dims, base = rotary_dims(graphs[stack])
        if dims != int(d_model // heads * hparams.partial_rotary_factor) or not np.isclose(base, hparams.rope_theta):
            raise ModelFileError(graphs[stack].path, f"turns {dims} dims per head with base {base:.0f}, "
                                 "not what Moonshine's config says")  # fmt: skip
    vocabulary = read_vocabulary(model_dir / TOKENIZER_JSON, tensors["dec.token_embd.weight"].shape[0])
    _check_pieces(model_dir / TOKENIZER_BIN, vocabulary.tokens)
    return MoonshineSource(model_dir, tensors, hparams, vocabulary)


def read_tokenizer_bin(path: Path) -> list[bytes]:
    """``tokenizer.bin``: per id, the piece's length (one byte, or two when it is 128 or more: the low
    seven bits, then the rest) and its UTF-8 bytes (a byte-fallback piece is the byte itself)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelFileError(path, f"can't be read ({e.strerror or e})") from None
    pieces, i = [], 0
    while i < len(data):
        n = data[i]
        i += 1
        if n >= 128 and i < len(data):
            n = (n & 127) | (data[i] << 7)
            i += 1
        if i + n > len(data):
            raise ModelFileError(path, f"ends in the middle of piece {len(pieces)}")
        pieces.append(data[i : i + n])
        i += n
    return pieces


def _check_pieces(tokenizer_bin: Path, tokens: list[str]) -> None:
    """tokenizer.json must be the model's own tokenizer: every piece that tokenizer.bin spells out (it
    leaves some empty) must be the same text, or for a ``<0xNN>`` piece the same byte."""
    for i, piece in enumerate(read_tokenizer_bin(tokenizer_bin)):
        if piece and (i >= len(tokens) or piece != piece_bytes(tokens[i])):
            token = tokens[i] if i < len(tokens) else None
            raise ModelFileError(tokenizer_bin.parent / TOKENIZER_JSON,
                                 f"is not this model's tokenizer: id {i} is {token!r}, tokenizer.bin says {piece!r}")
