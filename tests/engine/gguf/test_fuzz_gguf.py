"""Fuzzing the GGUF reader: whatever a model file holds, opening it gives a ModelFile or one ModelFileError.

Three sources of broken files, all through ``ModelFile`` as the app opens a model:

* the reference file (transcribe.cpp's Whisper tiny.en, 45 MB) cut at any length;
* the reference file with one header field replaced (a count, a string or array length, a value or item
  type, a tensor's dimension count, dimension, type or data offset) by a value that lies, or with raw bytes
  of its header overwritten;
* headers built from scratch: any version, counts that don't match the entries, values written as another
  type than the one declared, lengths that lie, alignments that aren't powers of two, tensors of any type,
  shape and offset, and a data section of any length.

For every example: only ModelFileError comes out (anything else fails the test), no example runs past
``DEADLINE_S`` (a timer interrupts it), and the peak of memory allocated while opening it (tracemalloc) stays
below the file's size plus ``SLACK`` (20 MiB): a lying count or length never makes the reader allocate for
items that aren't there, nor more than the file justifies for items that are. When a file opens, every
metadata value, tensor and (small) dequantized array is read too.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import struct
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.data import TINY_EN_GGUF
from sayso.engine.errors import ModelFileError
from sayso.engine.gguf.header import HEADER_SLACK
from sayso.engine.gguf.reader import ModelFile

DEADLINE_S = 10.0  # per example; many times what opening the reference file takes under tracemalloc
SLACK = HEADER_SLACK + 4 * 2**20  # allowed beyond the file's size: what the reader promises, plus the interpreter's own
FUZZ = settings(
    deadline=None,  # the timer below is the deadline: hypothesis's own would only flag slowness afterwards
    database=None,  # nothing written into the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# GGUF value types: code -> struct format of a scalar (8 = STRING, 9 = ARRAY)
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
GGML_TYPES = {0: 4, 1: 2, 8: 34 / 32}  # F32, F16, Q8_0: bytes per value
LIES = [0, 1, 2, 3, 7, 8, 31, 32, 33, 0x7F, 0xFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1,
        2**64 - 1]  # fmt: skip


class TookTooLong(Exception):
    """Raised by the per-example timer: opening the file ran past DEADLINE_S."""


@contextlib.contextmanager
def deadline(seconds: float):
    def expire(*_):
        raise TookTooLong(f"opening the file took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Outcomes:
    """What the examples of one test did, printed at the module's end (run with -s to see them)."""

    def __init__(self, name: str):
        self.name, self.opened, self.refused, self.peak, self.slowest = name, 0, 0, 0, 0.0
        self.problems: dict[str, int] = {}

    def report(self) -> None:
        common = sorted(self.problems.items(), key=lambda kv: -kv[1])[:4]
        print(
            f"\n{self.name}: {self.opened} opened, {self.refused} refused with ModelFileError; "
            f"peak allocation {self.peak / 2**20:.1f} MiB, slowest {self.slowest:.2f} s; most common: {common}"
        )


def open_and_check(path: Path, outcomes: Outcomes) -> None:
    """Open ``path`` as the app would and read everything it offers; only ModelFileError may escape."""
    size = path.stat().st_size
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    started = time.monotonic()
    try:
        with deadline(DEADLINE_S):
            model = ModelFile(path)
            for key in model.metadata:
                model.value_type(key)
            for name in model.names:
                source = model.tensor(name)
                if np.prod(source.shape) <= 1 << 16:
                    model.array(name)
    except ModelFileError as error:
        assert str(path) in str(error) and error.problem, error
        outcomes.refused += 1
        problem = " ".join(w for w in error.problem.split() if not any(c.isdigit() for c in w))[:60]
        outcomes.problems[problem] = outcomes.problems.get(problem, 0) + 1
    else:
        outcomes.opened += 1
    finally:
        peak = tracemalloc.get_traced_memory()[1] - before
        outcomes.peak = max(outcomes.peak, peak)
        outcomes.slowest = max(outcomes.slowest, time.monotonic() - started)
    assert peak < size + SLACK, f"{peak / 2**20:.1f} MiB allocated opening a {size / 2**20:.1f} MiB file"


OUTCOMES: dict[str, Outcomes] = {}


def outcomes(name: str) -> Outcomes:
    return OUTCOMES.setdefault(name, Outcomes(name))


@pytest.fixture(scope="module")
def traced():
    tracemalloc.start()
    yield
    tracemalloc.stop()
    for result in OUTCOMES.values():
        result.report()


# ---- the reference file -------------------------------------------------------------------------


def header_fields(data: bytes) -> dict[str, list[tuple[int, str]]]:
    """Where each count, length and type of the reference's (valid) header is: kind -> [(offset, format)].

    A plain walk of a file known to be well formed, to aim mutations at the fields that matter.
    """
    fields: dict[str, list[tuple[int, str]]] = {"counts": [(4, "I"), (8, "Q"), (16, "Q")], "keys": [],
                                                "values": [], "strings": [], "tensors": []}  # fmt: skip
    pos = 24

    def string(kind: str) -> None:
        nonlocal pos
        fields[kind].append((pos, "Q"))
        pos += 8 + struct.unpack_from("<Q", data, pos)[0]

    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    for _ in range(n_kv):
        string("keys")
        fields["values"].append((pos, "I"))
        vtype = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        if vtype == STRING:
            string("values")
        elif vtype == ARRAY:
            item, count = struct.unpack_from("<IQ", data, pos)
            fields["values"] += [(pos, "I"), (pos + 4, "Q")]
            pos += 12
            for _ in range(count):
                if item == STRING:
                    string("strings")
                else:
                    pos += struct.calcsize(SCALARS[item])
        else:
            fields["values"].append((pos, SCALARS[vtype]))
            pos += struct.calcsize(SCALARS[vtype])
    for _ in range(n_tensors):
        string("tensors")
        n_dims = struct.unpack_from("<I", data, pos)[0]
        fields["tensors"] += [(pos, "I"), *[(pos + 4 + 8 * d, "Q") for d in range(n_dims)]]
        pos += 4 + 8 * n_dims
        fields["tensors"] += [(pos, "I"), (pos + 4, "Q")]
        pos += 12
    fields["end"] = [(pos, "")]
    return fields


class Reference(tuple):
    """(private copy that examples patch and restore, the original bytes, the header's fields); its
    repr is short, since hypothesis prints a failing example's arguments."""

    def __repr__(self) -> str:
        return f"Reference({self[0]})"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    work = tmp_path_factory.mktemp("fuzz") / "model.gguf"
    shutil.copyfile(TINY_EN_GGUF, work)
    data = TINY_EN_GGUF.read_bytes()
    return Reference((work, data, header_fields(data)))


@contextlib.contextmanager
def patched(work: Path, original: bytes, offset: int, new: bytes):
    with open(work, "r+b") as f:
        f.seek(offset)
        f.write(new)
    try:
        yield
    finally:
        with open(work, "r+b") as f:
            f.seek(offset)
            f.write(original[offset : offset + len(new)])


def test_reference_file_opens_within_the_bounds(reference, traced):
    work, data, fields = reference
    open_and_check(work, outcomes("reference file"))
    assert outcomes("reference file").opened == 1


@settings(FUZZ, max_examples=30)
@given(cut=st.one_of(st.integers(0, 64), st.integers(0, 1_813_200), st.integers(0, 44_835_391)))
def test_reference_cut_at_any_length(reference, traced, cut):
    work, data, _ = reference
    with open(work, "r+b") as f:
        f.truncate(cut)
    try:
        open_and_check(work, outcomes("cut reference"))
    finally:
        with open(work, "r+b") as f:
            f.seek(cut)
            f.write(data[cut:])
    assert outcomes("cut reference").opened == 0  # every byte of the reference is needed


@settings(FUZZ, max_examples=40)
@given(st.data())
def test_reference_with_a_lying_header_field(reference, traced, data):
    work, original, fields = reference
    kind = data.draw(st.sampled_from(["counts", "keys", "values", "strings", "tensors"]), label="kind")
    offset, fmt = data.draw(st.sampled_from(fields[kind]), label="field")
    bits = 8 * struct.calcsize(fmt)
    was = struct.unpack_from("<" + fmt, original, offset)[0]
    if fmt in "fd":  # a float value: any bit pattern (NaN, inf, denormals)
        new = data.draw(st.binary(min_size=bits // 8, max_size=bits // 8), label="bytes")
    else:
        value = data.draw(
            st.one_of(
                st.sampled_from(LIES),
                st.integers(0, 2**bits - 1),
                st.integers(-40, 40).map(lambda d: int(was) + d),
                st.just(len(original)),
            ),
            label="value",
        )
        new = (value % 2**bits).to_bytes(bits // 8, "little")
    with patched(work, original, offset, new):
        open_and_check(work, outcomes(f"reference with a lying field ({kind})"))


@settings(FUZZ, max_examples=30)
@given(st.data())
def test_reference_with_overwritten_header_bytes(reference, traced, data):
    work, original, fields = reference
    end = fields["end"][0][0]
    offset = data.draw(st.one_of(st.integers(0, 64), st.integers(0, end - 1)), label="offset")
    new = data.draw(st.binary(min_size=1, max_size=16), label="bytes")
    with patched(work, original, offset, new):
        open_and_check(work, outcomes("reference with overwritten header bytes"))


# ---- headers from scratch -----------------------------------------------------------------------


def honest(truth, lies: list) -> st.SearchStrategy:
    """``truth`` four times in five, else one of ``lies``: each field of a built header lies now and then,
    so that most headers get far enough for their later fields to be read."""
    return st.sampled_from([truth] * 4 * len(lies) + lies)


def gguf_string(text: bytes, lie: int = 0) -> bytes:
    return struct.pack("<Q", max(0, len(text) + lie) % 2**64) + text


KEYS = ["general.architecture", "general.alignment", "general.name", "tokenizer.ggml.tokens",
        "stt.whisper.encoder.n_layers", "a", ""]  # fmt: skip


@st.composite
def scalar(draw, code: int) -> bytes:
    fmt = SCALARS[code]
    size = struct.calcsize(fmt)
    if fmt in "fd?":
        return draw(st.binary(min_size=size, max_size=size))
    number = draw(st.sampled_from([0, 1, 3, 32, 64, 2 ** (8 * size) - 1]) | st.integers(0, 2 ** (8 * size) - 1))
    return number.to_bytes(size, "little")


@st.composite
def value(draw, code: int, depth: int = 0) -> bytes:
    """A value encoded as type ``code``: a scalar, a string (whose length may lie) or an array."""
    if code in SCALARS:
        return draw(scalar(code))
    if code == STRING:
        text = draw(st.binary(max_size=12) | st.text(max_size=8).map(str.encode))
        return gguf_string(text, draw(honest(0, [1, -1, 2**40])))
    item = draw(st.sampled_from([*SCALARS, STRING, STRING, ARRAY if depth == 0 else STRING, 13, 2**31]))
    known = item in SCALARS or item in (STRING, ARRAY)
    items = [draw(value(item, depth + 1)) for _ in range(draw(st.integers(0, 4)))] if known else []
    count = len(items) + draw(honest(0, [1, 2**20, 2**60]))
    return struct.pack("<IQ", item, count % 2**64) + b"".join(items)


@st.composite
def entry(draw) -> bytes:
    """A metadata entry whose value is written as one type and declared as (usually) the same one."""
    key = draw(st.sampled_from(KEYS) | st.text(max_size=10)).encode()
    written = draw(st.sampled_from([*SCALARS, STRING, ARRAY]))
    declared = draw(honest(written, [*SCALARS, STRING, ARRAY, 13, 2**32 - 1]))
    return gguf_string(key, draw(honest(0, [1, -1, 2**63]))) + struct.pack("<I", declared) + draw(value(written))


@st.composite
def tensor(draw) -> tuple[bytes, int]:
    """A tensor info and the bytes its data needs."""
    name = draw(st.sampled_from(["enc.conv.0.weight", "t", ""]) | st.text(max_size=6)).encode()
    n_dims = draw(st.sampled_from([1, 2, 3, 4, 0, 5, 2**32 - 1]))
    ne = [draw(st.sampled_from([1, 2, 32, 64, 33, 0, 2**31, 2**63])) for _ in range(min(n_dims, 5))]
    ggml = draw(st.sampled_from([*GGML_TYPES, *GGML_TYPES, 2, 30, 2**31]))
    offset = draw(st.sampled_from([0, 32, 64, 96, 4, 2**40]))
    need = min(int(np.prod(ne or [0], dtype=object) * GGML_TYPES.get(ggml, 1)), 1 << 16)  # data written for it
    return gguf_string(name) + struct.pack(f"<I{len(ne)}Q", n_dims, *ne) + struct.pack("<IQ", ggml, offset), need


@st.composite
def gguf_file(draw) -> bytes:
    version = draw(honest(3, [2, 1, 4, 0x03000000]))
    entries = draw(st.lists(entry(), max_size=5))
    tensors = draw(st.lists(tensor(), max_size=3))
    n_kv = len(entries) + draw(honest(0, [1, -1, 2**32, 2**63]))
    n_tensors = len(tensors) + draw(honest(0, [1, -1, 2**40]))
    header = b"GGUF" + struct.pack("<IQQ", version, n_tensors % 2**64, n_kv % 2**64)
    header += b"".join(entries) + b"".join(info for info, _ in tensors)
    padding = draw(st.sampled_from([-len(header) % 32, 0, 1, 31]))
    data = sum(need for _, need in tensors) + 96 + draw(st.sampled_from([0, 0, -1, -40, 1000]))
    seed = draw(st.integers(0, 2**32 - 1))
    noise = np.random.default_rng(seed).integers(0, 256, max(0, data), dtype=np.uint8).tobytes()
    return header + b"\0" * padding + noise


@settings(FUZZ, max_examples=300)
@given(blob=gguf_file())
def test_headers_from_scratch(tmp_path_factory, traced, blob):
    path = tmp_path_factory.getbasetemp() / "scratch.gguf"
    path.write_bytes(blob)
    open_and_check(path, outcomes("headers from scratch"))


# ---- files that tell the truth but would cost far more memory than their size ---------------------


@pytest.mark.parametrize(
    "item, count, each",
    [(1, 4_000_000, struct.pack("<b", -100)), (STRING, 3_000_000, gguf_string(b""))],
    ids=["4M int8 items", "3M empty strings"],
)
def test_metadata_that_would_not_fit_in_memory_is_refused(tmp_path, traced, item, count, each):
    """Every item is really in the file, but as Python objects they would take 36 (int8) or 11 (empty
    strings) times the file's size: refused before they are built."""
    path = tmp_path / "greedy.gguf"
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string(b"greedy") + struct.pack("<IIQ", ARRAY, item, count)
    path.write_bytes(header + each * count)
    result = Outcomes("greedy")
    open_and_check(path, result)
    assert result.refused == 1 and "memory" in next(iter(result.problems)), result.problems
