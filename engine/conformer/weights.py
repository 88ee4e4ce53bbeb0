"""Getting Conformer weights out of a GGUF file and onto a backend, in the shapes the ops want.

Linear and convolution weights keep their GGUF type (F32, F16, Q8_0) where the backend takes it;
other types (K-quants in some published files) are dequantized to F32 once at load. Slicing a
weight by rows (the halves of the conv module's first pointwise conv) and stacking rows
(``WeightSource.rows``, ``WeightSource.stacked``) work on the raw GGUF blocks, so quantized weights
stay quantized. The containers (``Linear``, ``Norm``) and the small-tensor loaders are the ones every
family uses (``engine.layers``).
"""

from __future__ import annotations

from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.layers import Linear, optional_vector
from sayso.engine.ops import Ops, WeightSource

NATIVE_TYPES = ("F32", "F16", "Q8_0")
"""Weight types every backend keeps as they are (``Ops.weight``)."""


def matrix_source(model_file: ModelFile, name: str) -> WeightSource:
    """Tensor ``name`` as a 2-D [N, K] weight: trailing axes (a conv kernel's [C_in, k]) flattened
    into K, in a type the backends take (others dequantized to F32)."""
    source = model_file.tensor(name)
    rows = source.shape[0]
    if source.ggml_type not in NATIVE_TYPES:
        values = model_file.array(name).reshape(rows, -1)
        return WeightSource(name, "F32", values.shape, values)
    return source.flattened()


def linear(model_file: ModelFile, ops: Ops, prefix: str) -> Linear:
    """``prefix.weight`` (any rank, flattened to [N, K]) and ``prefix.bias`` when the file has it."""
    return Linear(ops.weight(matrix_source(model_file, f"{prefix}.weight")),
                  optional_vector(model_file, ops, f"{prefix}.bias"))


def require_shape(model_file: ModelFile, name: str, shape: tuple[int, ...]) -> None:
    """A ModelFileError naming the tensor when it is missing or has another shape than the keys say."""
    actual = model_file.shape(name)
    if tuple(actual) != tuple(shape):
        raise ModelFileError(model_file.path, f"tensor '{name}' has shape {list(actual)}, expected {list(shape)}")
