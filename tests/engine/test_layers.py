"""Shared layer loaders (engine/layers.py): a stacked projection is its parts side by side."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from sayso.engine.gguf.reader import ModelFile
from sayso.engine.layers import apply, linear, stacked_linear

K = 64


def write_projections(path, kinds: dict[str, str]) -> ModelFile:
    """A GGUF holding ``{name}.weight`` [8, K] of the given type per name, and a bias for all but "k"."""
    rng = np.random.default_rng(7)
    writer = gguf.GGUFWriter(path, "test")
    for name, kind in kinds.items():
        values = rng.standard_normal((8, K)).astype(np.float32)
        quant = gguf.GGMLQuantizationType[kind]
        data = values.astype(np.float16) if kind == "F16" else gguf.quants.quantize(values, quant)
        writer.add_tensor(f"{name}.weight", data, raw_dtype=quant)
        if name != "k":
            writer.add_tensor(f"{name}.bias", rng.standard_normal(8).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return ModelFile(path)


@pytest.mark.parametrize("kinds", [{"q": "Q8_0", "k": "Q8_0", "v": "Q8_0"}, {"q": "F16", "k": "F32", "v": "Q8_0"}],
                         ids=["one type", "mixed types"])
@pytest.mark.parametrize("backend", ["cpu_ops", "gpu_ops"])
def test_stacked_projection_equals_its_parts(tmp_path, request, backend, kinds):
    ops = request.getfixturevalue(backend)
    model_file = write_projections(tmp_path / "qkv.gguf", kinds)
    x = ops.tensor(np.random.default_rng(1).standard_normal((3, K)).astype(np.float32))
    stacked = ops.read(apply(ops, x, stacked_linear(model_file, ops, list(kinds))))
    parts = np.concatenate([ops.read(apply(ops, x, linear(model_file, ops, name))) for name in kinds], axis=1)
    np.testing.assert_allclose(stacked, parts, rtol=1e-5, atol=1e-5)
