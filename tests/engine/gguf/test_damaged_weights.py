"""Damaged weights are named at load, whatever read them: a file Sayso wrote has each tensor's checksum
beside it (``engine.gguf.sums``), and every file's weights are checked for values that can't be weights
(``reader._Checks``), so that flipped bytes, zeroed weights and NaN never load and transcribe as
"Tomorrow Tomorrow...", "! ! !" with exit 0. transcribe.cpp's own file, which has no checksums, still loads.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from support.data import TINY_EN_GGUF
from sayso.engine.convert.random_whisper import write_random_whisper
from sayso.engine.engine import Engine
from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.gguf.sums import sums_path


def tensor_bytes(path, name: str) -> tuple[int, int]:
    """Where tensor ``name``'s bytes are in the file: offset, size."""
    model = ModelFile(path)
    info = model._tensors[name]
    return model._data_offset + info.offset, info.nbytes


def damage(path, name: str, change) -> None:
    """Replace tensor ``name``'s bytes in the file by ``change(bytes)``."""
    start, size = tensor_bytes(path, name)
    data = bytearray(path.read_bytes())
    data[start : start + size] = change(bytes(data[start : start + size]))
    path.write_bytes(bytes(data))


def flipped_4k(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 4096]) + data[middle + 4096 :]


@pytest.fixture
def written(tmp_path):
    """A small random Whisper as Sayso writes it: its checksums beside it."""
    path = tmp_path / "model.gguf"
    write_random_whisper("whisper-tiny.en", path, small=True, out_type="q8_0")
    assert sums_path(path).is_file()
    return path


def test_4k_flipped_in_a_written_file_is_named_at_load(written):
    Engine(written, device="cpu", vad=False).close()
    damage(written, "dec.token_embd.weight", flipped_4k)  # the Q8_0 scales stay finite: only the sum tells
    with pytest.raises(ModelFileError, match="tensor 'dec.token_embd.weight' isn't what was written") as error:
        Engine(written, device="cpu", vad=False)
    assert str(written) in str(error.value) and "Download or convert the model again" in str(error.value)


def test_the_sum_is_checked_on_rows_read_in_parts_as_a_gpu_reads_them(written):
    damage(written, "dec.token_embd.weight", flipped_4k)
    source = ModelFile(written).tensor("dec.token_embd.weight")
    half = source.shape[0] // 2
    source.read(0, half)
    with pytest.raises(ModelFileError, match="dec.token_embd.weight"):
        source.read(half, source.shape[0])


def test_sums_of_another_file_are_not_held_against_this_one(written):
    """A model written over without its sums (a copy of another file): those sums are ignored."""
    shutil.copy(TINY_EN_GGUF, written)
    Engine(written, device="cpu", vad=False).close()


@pytest.fixture
def theirs(tmp_path):
    """transcribe.cpp's tiny.en (or the same bytes): no checksums beside it."""
    path = tmp_path / "theirs.gguf"
    shutil.copy(TINY_EN_GGUF, path)
    return path


def test_a_file_without_sums_loads_and_all_zero_weights_are_named(theirs):
    Engine(theirs, device="cpu", vad=False).close()
    damage(theirs, "dec.token_embd.weight", lambda data: bytes(len(data)))
    with pytest.raises(ModelFileError, match="tensor 'dec.token_embd.weight' is all zeros"):
        Engine(theirs, device="cpu", vad=False)


def test_nan_in_a_float_tensor_is_named(theirs):
    model = ModelFile(theirs)
    name = next(n for n in model.names if model.tensor(n).ggml_type == "F32" and n.startswith("dec."))
    damage(theirs, name, lambda data: data[:4] + np.float32(np.nan).tobytes() + data[8:])
    with pytest.raises(ModelFileError, match=f"tensor '{name}' holds values that aren't numbers"):
        Engine(theirs, device="cpu", vad=False)


def test_a_nan_scale_in_a_q8_0_tensor_is_named(theirs):
    damage(theirs, "dec.token_embd.weight", lambda data: np.float16(np.inf).tobytes() + data[2:])
    with pytest.raises(ModelFileError, match="tensor 'dec.token_embd.weight' holds values that aren't numbers"):
        Engine(theirs, device="cpu", vad=False)
