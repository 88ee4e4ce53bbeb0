"""The GGUF layer: our reader on transcribe.cpp's reference file, the writer's round trip, and one
clear ModelFileError (never a traceback from inside gguf) for every kind of broken file."""

from __future__ import annotations

import contextlib
import mmap
import os
import random
import struct
import threading
from pathlib import Path

import gguf
import numpy as np
import pytest

from sayso.engine.errors import ModelFileError
from sayso.engine.gguf import reader
from sayso.engine.gguf.header import read_header
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.gguf.writer import Meta, TensorOut, write_gguf
from sayso.engine.ops import WeightSource

from support.data import REFERENCE_GGUF, REFERENCE_GGUF_NAME, TINY_EN_GGUF

REFERENCE = TINY_EN_GGUF  # transcribe.cpp's bytes (or the same made by our converter)

WORDS = ["Ġt", "he", "<|endoftext|>"]
SMALL_METADATA = [
    Meta("general.name", "STRING", "small test model"),
    Meta("test.count", "UINT32", 7),
    Meta("test.offset", "INT32", -3),
    Meta("test.big", "UINT64", 2**40),
    Meta("test.scale", "FLOAT32", 0.5),
    Meta("test.flag", "BOOL", True),
    Meta("test.words", "ARRAY[STRING]", WORDS),
    Meta("test.ids", "ARRAY[INT32]", [1, -2, 50256]),
]


def small_tensors() -> list[TensorOut]:
    rng = np.random.default_rng(0)
    return [
        TensorOut("norm.weight", rng.standard_normal(8).astype(np.float32), "F32"),
        TensorOut("conv.weight", rng.standard_normal((4, 2, 3)).astype(np.float32), "F16"),
        TensorOut("fc.weight", rng.standard_normal((3, 64)).astype(np.float32), "Q8_0"),
    ]


@pytest.fixture(scope="module")
def small_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "small.gguf"
    write_gguf(path, "test", SMALL_METADATA, small_tensors())
    return path


@pytest.fixture(scope="module")
def reference() -> ModelFile:
    return ModelFile(REFERENCE)


def write_bytes(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def expect_model_file_error(path: Path, *words: str) -> ModelFileError:
    """Opening ``path`` raises exactly a ModelFileError that names the file and says one of ``words``."""
    with pytest.raises(ModelFileError) as info:
        ModelFile(path)
    message = str(info.value)
    assert str(path) in message
    assert any(w in message for w in words), message
    return info.value


def tensor_info_offset(data: bytes, name: str) -> int:
    """Byte offset of the tensor info entry of ``name`` (its u64 name length)."""
    needle = struct.pack("<Q", len(name)) + name.encode()
    return data.index(needle)


# ---- the reference file, unchanged -------------------------------------------------------------


@pytest.mark.test_data(REFERENCE_GGUF_NAME)
def test_reader_loads_reference_file_unchanged():
    reference = ModelFile(REFERENCE_GGUF)
    raw = gguf.GGUFReader(REFERENCE_GGUF)
    assert reference.architecture == "whisper"
    assert reference.version == 3
    assert list(reference.metadata) == [k for k in raw.fields if not k.startswith("GGUF.")]
    assert len(reference.metadata) == 66
    for key, field in raw.fields.items():
        if not key.startswith("GGUF."):
            assert reference.metadata[key] == field.contents(), key
    assert reference.names == [t.name for t in raw.tensors]
    assert len(reference.names) == 169

    assert reference.get("stt.variant") == "whisper-tiny.en"
    assert reference.require("stt.whisper.encoder.d_model") == 384
    assert reference.value_type("stt.whisper.encoder.d_model") == "UINT32"
    assert reference.value_type("stt.whisper.suppress_tokens") == "ARRAY[INT32]"
    assert reference.value_type("stt.frontend.dither") == "FLOAT32"
    assert reference.value_type("stt.capability.timestamps") == "BOOL"
    tokens = reference.require("tokenizer.ggml.tokens")
    assert len(tokens) == 51864 and tokens[50256] == "<|endoftext|>"
    assert reference.require("tokenizer.ggml.merges")[:2] == ["Ġ t", "Ġ a"]


def test_reader_gives_weights_in_numpy_layout(reference):
    q = reference.tensor("enc.blocks.0.attn.q.weight")
    assert (q.ggml_type, q.shape, q.data.dtype, q.data.shape) == ("Q8_0", (384, 384), np.uint8, (384, 384 // 32 * 34))
    conv = reference.tensor("enc.conv.0.weight")
    assert (conv.ggml_type, conv.shape, conv.data.dtype) == ("F16", (384, 80, 3), np.float16)
    embd = reference.tensor("dec.token_embd.weight")
    assert (embd.ggml_type, embd.shape) == ("Q8_0", (51864, 384))
    mel = reference.array("frontend.mel_filterbank")
    assert mel.dtype == np.float32 and mel.shape == (80, 201)
    assert reference.array("frontend.window").shape == (400,)

    # Q8_0 blocks dequantize to the same values as gguf's own dequantizer gives
    dense = reference.array("enc.blocks.0.attn.q.weight")
    assert dense.shape == (384, 384)
    np.testing.assert_array_equal(dense, gguf.quants.dequantize(np.asarray(q.data), gguf.GGMLQuantizationType.Q8_0))


def test_a_model_is_read_from_a_private_copy_that_released_weights_leave(tmp_path):
    """For the numpy backend the weights are read from the process's own copy of the file, which
    changes to the file don't reach; a backend that holds a weight of its own frees the copy's pages
    under it, and a second backend that asks for the weight later reads it from the file again.
    Measured on the copy itself, not the machine's shared memory, which other processes move."""
    path = tmp_path / "released.gguf"  # a name of its own: no other model's copy is called so
    path.write_bytes(REFERENCE.read_bytes())
    model = ModelFile(path)
    model.copy_in_background()  # what the numpy backend's load does
    model.tensor(model.names[-1]).data  # the file's last bytes: the copy is whole once it gives them
    assert memfd_bytes(path.name) > 0.9 * path.stat().st_size
    embd = model.tensor("dec.token_embd.weight")  # 21 MB
    values = np.array(embd.data)
    copied = memfd_bytes(path.name)
    embd.release()
    assert copied - memfd_bytes(path.name) > 20_000_000
    np.testing.assert_array_equal(model.tensor("dec.token_embd.weight").data, values)


class HeldCopy:
    """``os.sendfile`` for the copy's thread held until ``go()``: what the load does before the
    background copy has moved a byte, whether the copy is in its first part (``entered``) and how far
    it got (``sent``)."""

    def __init__(self, monkeypatch, cut: tuple[Path, int] | None = None):
        self.opened, self.entered, self.sent, self.cut = threading.Event(), threading.Event(), [], cut
        sendfile = os.sendfile

        def held(out_fd, in_fd, offset, count):
            if threading.current_thread() is not threading.main_thread():
                self.entered.set()
                assert self.opened.wait(30)
                if self.cut:  # what `cp other.gguf model.gguf` does first (the same cut each time)
                    os.truncate(*self.cut)
            sent = sendfile(out_fd, in_fd, offset, count)
            if threading.current_thread() is not threading.main_thread():
                self.sent.append(sent)
            return sent

        monkeypatch.setattr(os, "sendfile", held)

    def go(self) -> None:
        self.opened.set()


def copy_threads(path: Path) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"copy of {path.name}"]


def test_weights_are_the_files_bytes_while_the_copy_goes_on_behind_the_load(tmp_path, monkeypatch):
    """The load reads the header as soon as the copy holds it and goes on while the rest is copied on
    a thread of its own; each weight comes once the copy has passed it, as the file's bytes, and the
    thread ends with the copy."""
    path = tmp_path / "behind.gguf"
    data = REFERENCE.read_bytes()
    path.write_bytes(data)
    monkeypatch.setattr(reader, "COPY_CHUNK", 256 * 1024)
    header = read_header(data)
    held = HeldCopy(monkeypatch)
    model = ModelFile(path)
    assert copy_threads(path) == [] and model.metadata == header.metadata  # a GPU's load would go on
    model.copy_in_background()
    assert held.sent == []  # nothing copied in the background yet
    [thread] = copy_threads(path)  # held in its first sendfile: alive
    held.go()
    for t in header.tensors:
        start = header.data_offset + t.offset
        assert np.asarray(model.tensor(t.name).data).tobytes() == data[start : start + t.nbytes], t.name
    thread.join(10)
    assert not thread.is_alive() and sum(held.sent) == len(data) - reader.FIRST_COPY


def test_a_header_longer_than_the_first_part_copied_waits_for_the_whole_file(tmp_path, monkeypatch):
    path = tmp_path / "longer-header.gguf"
    data = REFERENCE.read_bytes()
    path.write_bytes(data)
    monkeypatch.setattr(reader, "FIRST_COPY", 64 * 1024)  # inside the vocabulary
    header = read_header(data)
    held = HeldCopy(monkeypatch)
    model = ModelFile(path)
    assert model.metadata == header.metadata and model.names == [t.name for t in header.tensors]
    last = header.tensors[-1]
    start = header.data_offset + last.offset
    assert np.asarray(model.tensor(last.name).data).tobytes() == data[start : start + last.nbytes]
    assert held.sent == [] and copy_threads(path) == []


def test_a_file_cut_short_while_its_weights_are_copied_fails_for_the_weights_it_lost(tmp_path, monkeypatch):
    """A file cut short once the load has read its header: the weights the copy got before the cut are
    the file's, each later one a clear ModelFileError (not zeros, not a SIGBUS), every time it is
    asked for."""
    path = tmp_path / "cut-while-copied.gguf"
    data = REFERENCE.read_bytes()
    path.write_bytes(data)
    monkeypatch.setattr(reader, "COPY_CHUNK", 1 << 20)
    header = read_header(data)
    middle = header.tensors[len(header.tensors) // 2]
    cut = header.data_offset + middle.offset + middle.nbytes // 2
    held = HeldCopy(monkeypatch, cut=(path, cut))
    model = ModelFile(path)
    model.copy_in_background()
    held.go()
    lost = []
    for t in header.tensors * 2:
        start = header.data_offset + t.offset
        if start + t.nbytes <= cut:
            assert np.asarray(model.tensor(t.name).data).tobytes() == data[start : start + t.nbytes], t.name
            continue
        with pytest.raises(ModelFileError, match="changed while it was being read") as error:
            model.array(t.name) if t.nbytes < 4096 else model.tensor(t.name).data
        assert f"it was {len(data)} bytes, is {cut} now" in str(error.value) and str(path) in str(error.value)
        lost.append(t.name)
    assert middle.name in lost and len(lost) == 2 * (len(header.tensors) - header.tensors.index(middle))


def test_a_model_dropped_while_it_is_copied_ends_the_copy(tmp_path, monkeypatch):
    """A model let go before its copy is done (the user picked another): the copy stops after the part
    it is moving and closes its files."""
    path = tmp_path / "dropped.gguf"
    path.write_bytes(REFERENCE.read_bytes())
    monkeypatch.setattr(reader, "COPY_CHUNK", 1 << 20)
    held = HeldCopy(monkeypatch)
    model = ModelFile(path)
    model.copy_in_background()
    [thread] = copy_threads(path)
    assert held.entered.wait(10)  # moving its first part
    del model
    held.go()
    thread.join(10)
    assert not thread.is_alive() and len(held.sent) == 1
    assert not [target for target in open_files() if path.name in target]  # the file and the memfd


def open_files() -> list[str]:
    """What this process's file descriptors stand for (a path, ``/memfd:name (deleted)``)."""
    targets = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own
            targets.append(os.readlink(f"/proc/self/fd/{fd}"))
    return targets


def test_a_gpu_reads_weights_from_the_file_and_the_copy_never_holds_them(tmp_path):
    """What a GPU's load does: every weight read from the file in parts (``WeightSource.read``), the
    file's bytes, while the private copy holds no more than the header's first part; a weight asked for
    in the mapping then (``data``) is read into it alone."""
    path = tmp_path / "read.gguf"
    data = REFERENCE.read_bytes()
    path.write_bytes(data)
    header = read_header(data)
    model = ModelFile(path)
    scratch = memoryview(bytearray(1 << 20))  # a GPU's loading thread reads into memory it reuses
    for t in header.tensors:
        source, start = model.tensor(t.name), header.data_offset + t.offset
        rows = source.shape[0] if source.shape else 1
        for into in (None, scratch):  # as a GPU's chunks, ragged
            parts = [source.read(a, min(rows, a + 7), into).tobytes() for a in range(0, rows, 7)]
            assert b"".join(parts) == data[start : start + t.nbytes], t.name
    parts = [model.tensor(f"enc.blocks.2.attn.{p}.weight") for p in "qkv"]  # a step's q, k and v as one
    stack = WeightSource.stacked("qkv", [parts[0].rows(100, 384), parts[1], parts[2].rows(0, 50)])
    whole = np.concatenate([parts[0].read(100, 384), parts[1].read(0, 384), parts[2].read(0, 50)])
    for into in (None, scratch):  # a view of ``into`` lasts until the next read: copied
        chunks = [stack.read(a, min(718, a + 100), into).copy() for a in range(0, 718, 100)]
        assert np.array_equal(np.concatenate(chunks), whole)
    assert copy_threads(path) == [] and memfd_bytes(path.name) == reader.FIRST_COPY
    assert os.path.realpath(path) not in open_files()  # a file deleted while loaded gives its space back
    last = header.tensors[-1]
    start = header.data_offset + last.offset
    assert np.asarray(model.tensor(last.name).data).tobytes() == data[start : start + last.nbytes]
    filled = memfd_bytes(path.name) - reader.FIRST_COPY
    assert last.nbytes <= filled < last.nbytes + 2 * mmap.PAGESIZE


def test_a_copy_begun_after_the_file_was_replaced_fails_for_the_weights_it_lacks(tmp_path):
    """The model holds no descriptor of its file between loads; the background copy opens the file
    again and, finding another file at its path, copies nothing of it."""
    path = tmp_path / "replaced.gguf"
    data = REFERENCE.read_bytes()
    path.write_bytes(data)
    header = read_header(data)
    model = ModelFile(path)
    (tmp_path / "new.gguf").write_bytes(data)
    os.replace(tmp_path / "new.gguf", path)
    model.copy_in_background()
    last = header.tensors[-1]
    with pytest.raises(ModelFileError, match="changed while it was being read") as error:
        model.tensor(last.name).data
    assert str(path) in str(error.value) and "load it again" in str(error.value)
    assert not [target for target in open_files() if path.name in target and "memfd" not in target]


def memfd_bytes(name: str) -> int:
    """Bytes of memory that the memfd called ``name`` (a model's private copy) holds."""
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):
            if os.readlink(f"/proc/self/fd/{fd}") == f"/memfd:{name} (deleted)":
                return os.stat(f"/proc/self/fd/{fd}").st_blocks * 512
    raise AssertionError(f"no memfd called {name}")


@pytest.mark.parametrize("change", ["cut", "rewritten", "replaced"])
def test_a_file_changed_while_a_gpu_reads_it_fails_for_every_weight_after(tmp_path, change):
    """A file cut short, rewritten in place (same size) or replaced under its name after the header was
    read: every later read, from the file or into the mapping, is the clear ModelFileError, never bytes
    of another file mixed in."""
    path = tmp_path / "changed.gguf"
    data = REFERENCE.read_bytes()
    path.write_bytes(data)
    header = read_header(data)
    model = ModelFile(path)
    first, last = header.tensors[0], header.tensors[-1]
    model.tensor(first.name).read(0, 1)
    if change == "cut":
        os.truncate(path, len(data) // 2)
    elif change == "rewritten":
        with open(path, "r+b") as f:
            f.seek(len(data) - 4)
            f.write(b"\0\0\0\0")
        os.utime(path, ns=(0, path.stat().st_mtime_ns + 10**9))  # a later time, however coarse the clock
    else:
        (tmp_path / "new.gguf").write_bytes(data)
        os.replace(tmp_path / "new.gguf", path)
    for ask in (lambda s: s.read(0, 1), lambda s: s.data):
        with pytest.raises(ModelFileError, match="changed while it was being read") as error:
            ask(model.tensor(last.name))
        assert str(path) in str(error.value) and "load it again" in str(error.value)
        if change == "cut":
            assert f"it was {len(data)} bytes, is {len(data) // 2} now" in str(error.value)


def test_a_weight_handed_out_twice_is_never_released():
    """A view another holder still reads keeps its pages: the CPU's weights, then the GPU's upload."""
    model = ModelFile(REFERENCE)
    held = model.tensor("dec.token_embd.weight").data
    values = np.array(held)
    model.tensor("dec.token_embd.weight").release()
    np.testing.assert_array_equal(held, values)


def test_missing_key_and_tensor_name_the_file(reference):
    with pytest.raises(ModelFileError, match="stt.whisper.nope") as info:
        reference.require("stt.whisper.nope")
    assert str(REFERENCE) in str(info.value)
    assert reference.get("stt.whisper.nope", 5) == 5
    with pytest.raises(ModelFileError, match="enc.blocks.9.attn.q.weight"):
        reference.tensor("enc.blocks.9.attn.q.weight")
    assert not reference.has("enc.blocks.9.attn.q.weight")
    assert reference.has("enc.blocks.3.attn.q.weight")


# ---- writer round trip -------------------------------------------------------------------------


def test_writer_round_trip_keeps_order_types_and_values(small_file):
    m = ModelFile(small_file)
    assert list(m.metadata) == ["general.architecture"] + [x.key for x in SMALL_METADATA]
    assert m.architecture == "test"
    for meta in SMALL_METADATA:
        assert m.value_type(meta.key) == meta.type
        got = m.metadata[meta.key]
        assert got == pytest.approx(meta.value) if meta.type == "FLOAT32" else got == meta.value
    assert m.names == ["norm.weight", "conv.weight", "fc.weight"]
    for t in small_tensors():
        source = m.tensor(t.name)
        assert source.ggml_type == t.ggml_type and source.shape == t.values.shape
        values = m.array(t.name)
        if t.ggml_type == "F32":
            np.testing.assert_array_equal(values, t.values)
        elif t.ggml_type == "F16":
            np.testing.assert_array_equal(values, t.values.astype(np.float16).astype(np.float32))
        else:  # Q8_0: within half a quantization step of each block of 32
            step = np.abs(t.values).reshape(-1, 32).max(axis=1, keepdims=True) / 127
            assert np.all(np.abs(values - t.values).reshape(-1, 32) <= step / 2 + 1e-6)


def test_writer_replaces_the_file_atomically(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"old")
    write_gguf(path, "test", SMALL_METADATA[:1], small_tensors()[:1])
    assert ModelFile(path).names == ["norm.weight"]
    # no temp file left behind: the model and its checksums (engine.gguf.sums)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf", "model.gguf.crc32"]


def test_writer_refuses_bad_input_and_leaves_nothing(tmp_path):
    with pytest.raises(ValueError, match="multiple of 32"):
        write_gguf(tmp_path / "bad.gguf", "test", [], [TensorOut("w", np.ones((2, 40), np.float32), "Q8_0")])
    with pytest.raises(ValueError, match="Q4_0"):
        write_gguf(tmp_path / "bad.gguf", "test", [], [TensorOut("w", np.ones((2, 32), np.float32), "Q4_0")])
    assert list(tmp_path.iterdir()) == []


# ---- broken files: one ModelFileError each ------------------------------------------------------


def test_missing_file_and_directory(tmp_path):
    expect_model_file_error(tmp_path / "nothing.gguf", "no such file")
    expect_model_file_error(tmp_path, "is a directory")
    expect_model_file_error(write_bytes(tmp_path, "empty.gguf", b""), "empty")


def test_wrong_magic_and_garbage(tmp_path, small_file):
    data = small_file.read_bytes()
    expect_model_file_error(write_bytes(tmp_path, "magic.gguf", b"GGML" + data[4:]), "not a GGUF file")
    garbage = np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    expect_model_file_error(write_bytes(tmp_path, "garbage.gguf", garbage), "not a GGUF file")
    text = write_bytes(tmp_path, "text.gguf", b"this is a text file, not a model\n")
    expect_model_file_error(text, "not a GGUF file")
    version = data[:4] + struct.pack("<I", 99) + data[8:]
    expect_model_file_error(write_bytes(tmp_path, "version.gguf", version), "version 99")


@pytest.mark.parametrize("cut", [2, 4, 12, 24, 40, 5_000, 1_000_000, -1, 0, 70_000, "last"])
def test_truncated_reference_file(tmp_path, cut):
    """Cut the reference at several points: in the magic, the counts, the metadata (tokens),
    just before and after the data section starts, inside a tensor, and one byte short."""
    data = REFERENCE.read_bytes()
    data_offset = 1_813_120  # where the reference's tensor data starts
    end = {-1: data_offset - 1, 0: data_offset, 70_000: data_offset + 70_000, "last": len(data) - 1}.get(cut, cut)
    path = write_bytes(tmp_path, f"cut-{end}.gguf", data[:end])
    expect_model_file_error(path, "truncated")


def test_lying_counts(tmp_path, small_file):
    data = small_file.read_bytes()
    tensors = data[:8] + struct.pack("<Q", 10**12) + data[16:]
    error = expect_model_file_error(write_bytes(tmp_path, "tensors.gguf", tensors), "claims 1000000000000 tensors")
    assert "corrupt" in error.problem
    kv = data[:16] + struct.pack("<Q", 2**62) + data[24:]
    expect_model_file_error(write_bytes(tmp_path, "kv.gguf", kv), "metadata entries")
    one_more = data[:8] + struct.pack("<Q", 4) + data[16:]  # a fourth tensor that isn't there
    expect_model_file_error(write_bytes(tmp_path, "plus-one.gguf", one_more), "truncated", "corrupt")


def test_lying_lengths_in_the_header(tmp_path, small_file):
    data = bytearray(small_file.read_bytes())
    first_key = bytearray(data)
    first_key[24 + 7] = 0x7F  # the first key's length becomes ~9e18
    expect_model_file_error(write_bytes(tmp_path, "key.gguf", bytes(first_key)), "truncated", "corrupt")

    words = data.index(b"test.words") + len(b"test.words") + 4 + 4  # past key, value type, item type
    array = bytearray(data)
    array[words : words + 8] = struct.pack("<Q", 2**40)
    expect_model_file_error(write_bytes(tmp_path, "array.gguf", bytes(array)), "claims 1099511627776 strings")

    for lie in (2**40, 2**63 - 1, 2**64 - 1):  # an item's length, each: past the end, past int64
        for item in (0, 1, 2):
            at = words + 8 + sum(8 + len(w.encode()) for w in WORDS[:item])
            item_lie = bytearray(data)
            item_lie[at : at + 8] = struct.pack("<Q", lie)
            expect_model_file_error(write_bytes(tmp_path, "item.gguf", bytes(item_lie)), f"item {item} of array 'test.words'")

    ids = data.index(b"test.ids") + len(b"test.ids") + 4 + 4
    ints = bytearray(data)
    ints[ids : ids + 8] = struct.pack("<Q", 2**61)
    expect_model_file_error(write_bytes(tmp_path, "ints.gguf", bytes(ints)), "truncated", "corrupt")

    vtype = bytearray(data)
    vtype[data.index(b"test.count") + len(b"test.count")] = 200
    expect_model_file_error(write_bytes(tmp_path, "vtype.gguf", bytes(vtype)), "unknown value type 200")


def test_strings_that_are_utf8_only_when_joined_are_refused(tmp_path, small_file):
    """A vocabulary is checked for UTF-8 in one decode of all its items joined (``StringArray``): an item
    that ends inside a character, which the next one completes, must still be refused."""
    data = small_file.read_bytes()
    # "Ġt", "he" become b"\xc4\xa0\xc4", b"\xa0e": neither is UTF-8, but joined they spell "ĠĠe"
    broken = data.replace("Ġt".encode() + struct.pack("<Q", 2) + b"he", b"\xc4\xa0\xc4" + struct.pack("<Q", 2) + b"\xa0e")
    assert broken != data and (b"\xc4\xa0\xc4" + b"\xa0e").decode() == "ĠĠe"
    error = expect_model_file_error(write_bytes(tmp_path, "split.gguf", broken), "UTF-8")
    assert "item 0 of array 'test.words'" in error.problem


def test_bad_tensor_infos(tmp_path, small_file):
    data = small_file.read_bytes()
    fc = tensor_info_offset(data, "fc.weight") + 8 + len("fc.weight")  # at its n_dims

    def patched(offset: int, value: bytes) -> bytes:
        return data[:offset] + value + data[offset + len(value) :]

    type_at, offset_at = fc + 4 + 2 * 8, fc + 4 + 2 * 8 + 4
    bad_type = patched(type_at, struct.pack("<I", 77))
    expect_model_file_error(write_bytes(tmp_path, "type.gguf", bad_type), "unknown ggml type id 77")
    big_dim = patched(fc + 4 + 8, struct.pack("<Q", 10**9))
    expect_model_file_error(write_bytes(tmp_path, "dim.gguf", big_dim), "truncated")
    row = patched(fc + 4, struct.pack("<Q", 48))  # a Q8_0 row of 48 values
    expect_model_file_error(write_bytes(tmp_path, "row.gguf", row), "block size 32")
    dims = patched(fc, struct.pack("<I", 9))
    expect_model_file_error(write_bytes(tmp_path, "dims.gguf", dims), "9 dimensions")
    overlap = patched(offset_at, struct.pack("<Q", 0))  # fc.weight's data now starts where norm.weight's does
    expect_model_file_error(write_bytes(tmp_path, "overlap.gguf", overlap), "overlap")
    misaligned = patched(offset_at, struct.pack("<Q", struct.unpack_from("<Q", data, offset_at)[0] + 4))
    expect_model_file_error(write_bytes(tmp_path, "align.gguf", misaligned), "not a multiple of 32")
    bad_name = patched(tensor_info_offset(data, "fc.weight") + 8, b"\xff\xfe")
    expect_model_file_error(write_bytes(tmp_path, "utf8.gguf", bad_name), "UTF-8")


def test_unsupported_tensor_type_is_named(tmp_path):
    path = tmp_path / "q4.gguf"
    writer = gguf.GGUFWriter(path, "test")
    values = np.ones((2, 64), np.float32)
    writer.add_tensor("fc.weight", gguf.quants.quantize(values, gguf.GGMLQuantizationType.Q4_0),
                      raw_dtype=gguf.GGMLQuantizationType.Q4_0)  # fmt: skip
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    error = expect_model_file_error(path, "fc.weight")
    assert "Q4_0" in error.problem and "F32, F16 and Q8_0" in error.problem


def test_random_flips_in_the_header_never_escape_as_other_errors(tmp_path, small_file):
    """Flip random header bytes: the file either still opens or fails with a ModelFileError."""
    data = small_file.read_bytes()
    header_end = gguf.GGUFReader(small_file).data_offset
    rng = random.Random(1234)
    outcomes = {"opened": 0, "refused": 0}
    for i in range(300):
        broken = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 3))):
            broken[rng.randrange(header_end)] ^= 1 << rng.randrange(8)
        path = write_bytes(tmp_path, f"flip-{i}.gguf", bytes(broken))
        try:
            ModelFile(path)
            outcomes["opened"] += 1
        except ModelFileError as e:
            assert str(path) in str(e)
            outcomes["refused"] += 1
        path.unlink()
    assert outcomes["refused"] > 100
