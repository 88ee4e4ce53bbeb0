"""Windows of several files encoded in one pass (``Engine.transcribe_many``, ``WhisperModel.encode_many``)
give each file the transcript it gets alone, on the numpy backend; the GPU's are in
tests/engine/whisper/test_whisper_gpu.py."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from support.data import AUDIO, TINY_EN_GGUF, needs_clips

from sayso.engine.audio import load_audio, save_wav
from sayso.engine.cpu.ops import NumpyOps
from sayso.engine.engine import Engine
from sayso.engine.errors import AudioError

CLIPS = ("jfk.wav", "beckett.wav", "two_cities.wav")  # two_cities: 44 s, two windows


@pytest.fixture(scope="module")
def engine():
    return Engine(TINY_EN_GGUF, device="cpu")


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """The clips, and a file that isn't audio between them: the paths in the order given."""
    folder = tmp_path_factory.mktemp("clips")
    paths = [shutil.copy(AUDIO / clip, folder / clip) for clip in CLIPS]
    broken = folder / "broken.wav"
    broken.write_bytes(b"RIFF and nothing of a wave")
    return [paths[0], broken, *paths[1:]]


@pytest.fixture(scope="module")
def alone(engine, clips):
    """The clips transcribed file by file."""
    return list(engine.transcribe_many(clips, batch=1))


@needs_clips(*CLIPS)
@pytest.mark.parametrize("batch", [3, 4])
def test_batched_windows_give_every_file_its_own_transcript(engine, clips, alone, batch):
    """Batches of 3 take jfk, the broken file and beckett, then two_cities; of 4 all of them."""
    paths = clips
    together = list(engine.transcribe_many(paths, batch=batch))
    assert [path for path, _ in together] == [path for path, _ in alone] == paths
    assert isinstance(together[1][1], AudioError) and str(together[1][1]) == str(alone[1][1])
    for index in (0, 2, 3):
        assert together[index][1] == alone[index][1]  # text, segments, tokens' times and probabilities, duration
        assert together[index][1].text


def test_the_batched_stem_and_attention_keep_to_each_window():
    ops, rng = NumpyOps(), np.random.default_rng(7)
    x = rng.standard_normal((2 * 10, 3)).astype(np.float32)
    stacked = ops.im2col(x, 3, 2, 1, batch=2)
    np.testing.assert_array_equal(stacked, np.concatenate([ops.im2col(x[:10], 3, 2, 1), ops.im2col(x[10:], 3, 2, 1)]))
    q, k, v = (rng.standard_normal((2 * 6, 8)).astype(np.float32) for _ in range(3))
    batched = ops.attention(q, k, v, 2, batch=2)
    np.testing.assert_array_equal(batched[6:], ops.attention(q[6:], k[6:], v[6:], 2))


def test_a_file_of_silence_and_an_empty_batch(engine, tmp_path):
    save_wav(tmp_path / "quiet.wav", np.zeros(16000 * 2, np.float32))
    save_wav(tmp_path / "jfk.wav", load_audio(AUDIO / "jfk.wav")[: 16000 * 3])
    paths = [tmp_path / "quiet.wav", tmp_path / "jfk.wav"]
    assert list(engine.transcribe_many(paths, batch=2)) == list(engine.transcribe_many(paths, batch=1))
    assert list(engine.transcribe_many([], batch=2)) == []


def test_the_batch_is_the_one_asked_for_as_far_as_memory_allows(engine, monkeypatch):
    from sayso.engine import engine as engine_module

    assert engine.encoder_batch() == 1  # longer products transcribed no faster on the CPU or GPUs measured
    assert engine.encoder_batch(8) == 8
    monkeypatch.setattr(engine_module, "ENCODER_BATCH_BYTES", 3 * engine.transcriber.window_bytes + 1)
    assert engine.encoder_batch(8) == 3
    monkeypatch.setattr(engine.ops, "max_tensor_bytes", 2 * engine.transcriber.window_largest_bytes)  # a GPU's binding
    assert engine.encoder_batch(8) == 2


@needs_clips("beckett.wav")
def test_windows_encoded_before_the_model_moved_to_the_cpu_are_encoded_again(engine, tmp_path, monkeypatch):
    """A GPU lost while a batch is decoded: the rest of the batch's windows were the GPU's, so each file's
    first window is encoded again on the backend the model moved to (here the move is only counted)."""
    paths = []
    for clip in ("jfk.wav", "beckett.wav"):
        save_wav(tmp_path / clip, load_audio(AUDIO / clip)[: 16000 * 3])
        paths.append(tmp_path / clip)
    alone = list(engine.transcribe_many(paths, batch=1))
    given, transcribe_window = [], engine.transcribe_window

    def moving_after_the_first(*args, **kwargs):
        given.append(args[-1] if len(args) == 5 else kwargs.get("encoded"))
        engine.backend_serial += 1
        return transcribe_window(*args, **kwargs)

    monkeypatch.setattr(engine, "transcribe_window", moving_after_the_first)
    assert list(engine.transcribe_many(paths, batch=2)) == alone
    assert given[0] is not None and given[1:] == [None]
