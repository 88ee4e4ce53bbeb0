"""The Conformer families' tests (GigaAM, Parakeet) on random-weight models in transcribe.cpp's layout:
the models and clips (fixture factories a test module calls), and the comparisons with transcribe.cpp
and with numpy that every family makes alike, told by a ``ConformerFamily`` what differs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sayso.engine.audio import load_audio
from sayso.engine.convert.random_model import write_random_model
from sayso.engine.gguf.reader import ModelFile
from support.data import AUDIO, require_clips
from support.reference import reference_dumps, reference_tokens


@dataclass(frozen=True)
class ConformerFamily:
    """What a family's comparisons differ in."""

    load: Callable[[ModelFile, Any], Any]
    """The family's ``load``: its transcriber for a model file on a backend."""
    mel_dump: str
    """transcribe.cpp's dump of its log-mel."""
    encoder_dump: str
    """transcribe.cpp's dump of its encoder's output."""
    text_only: bool
    """Whether transcribe.cpp's token list leaves out the special tokens (control, unknown, language
    tags) our search emits, so that only text tokens are compared with it."""


def random_model_fixture(families: list[str]):
    """A module-scoped ``model_path`` fixture over ``families``: each one's small random-weight model,
    written once per module."""

    @pytest.fixture(scope="module", params=families)
    def model_path(request, tmp_path_factory) -> Path:
        family = request.param
        return write_random_model(family, tmp_path_factory.mktemp(family) / f"{family}.gguf", small=True)

    return model_path


def clips_fixture(names: list[str]):
    """A module-scoped ``clips`` fixture: each of ``names`` (paths under the audio folder) loaded, in
    order, after ``require_clips`` has checked that the test data holds them."""

    @pytest.fixture(scope="module")
    def clips() -> dict[str, np.ndarray]:
        require_clips(*names)
        return {name: load_audio(AUDIO / name) for name in names}

    return clips


def tokens_matching_transcribe_cpp(family: ConformerFamily, model_path: Path, clips: dict[str, np.ndarray], ops, *,
                                   their_text: Callable[[str], str] = str, language: str | None = None) -> list[int]:
    """The token ids our transcriber emits over ``clips``, once each clip's token ids and start times
    (ms) are checked equal to transcribe.cpp's on ``model_path``, its text equal to ``their_text`` of
    transcribe.cpp's, and its language equal to ``language`` where one is given."""
    transcriber = family.load(ModelFile(model_path), ops)
    emitted = []
    for clip, pcm in clips.items():
        segments, spoken = transcriber.transcribe(pcm)
        ours = [(t.id, round(t.start * 1000)) for s in segments for t in s.tokens]
        theirs, text = reference_tokens(model_path, pcm)
        assert ours == theirs, clip
        assert (segments[0].text if segments else "") == their_text(text), clip
        if language is not None:
            assert spoken == language
        emitted += [token for token, _ in ours]
    return emitted


def check_against_dumps(family: ConformerFamily, model_path: Path, pcm: np.ndarray, ops, folder: Path, *,
                        encoder_atol: float, mel_atol: float | None = None) -> None:
    """transcribe.cpp's own log-mel and encoder output on ``pcm`` (TRANSCRIBE_DUMP_DIR, in a fresh
    process: the dumper reads the variable once) against ours: the log-mel to ``mel_atol`` where given,
    the encoder's output to ``encoder_atol``; and our search on *its* encoder output gives exactly its
    tokens, free of encoder rounding."""
    dumps, tokens = reference_dumps(model_path, pcm, folder)
    transcriber = family.load(ModelFile(model_path), ops)
    mel = transcriber.frontend(pcm)
    if mel_atol is not None:
        np.testing.assert_allclose(mel, dumps[family.mel_dump].reshape(mel.shape), atol=mel_atol)
    encoded = ops.read(transcriber.model.encode(mel))
    np.testing.assert_allclose(encoded, dumps[family.encoder_dump].reshape(encoded.shape), atol=encoder_atol)
    searched = transcriber.model.decode(ops.tensor(dumps["dec.enc_out"]))
    frame_ms = 1000 * transcriber.config.frame_seconds
    assert [(e.id, round(e.frame * frame_ms)) for e in searched
            if not (family.text_only and transcriber.vocabulary.is_special(e.id))] == tokens  # fmt: skip


def check_quantized_file(family: ConformerFamily, name: str, ops, folder: Path) -> None:
    """A file of family ``name`` quantized as published (Q8_0 matrices, F16 conv kernels) on jfk: our
    weights stay Q8_0; transcribe.cpp also rounds the activations of its Q8_0 products to 8 bits, so the
    encoders agree to 0.2 only, and our search on its encoder output gives exactly its tokens."""
    path = write_random_model(name, folder / "q8_0.gguf", small=True, quantized=True)
    assert ModelFile(path).tensor("enc.blocks.0.ff1.linear1.weight").ggml_type == "Q8_0"
    check_against_dumps(family, path, load_audio(AUDIO / "jfk.wav"), ops, folder, encoder_atol=0.2)


def check_gpu_encoder(family: ConformerFamily, model_path: Path, cpu_ops, gpu_ops) -> None:
    """The encoder on the GPU against numpy on a one-second clip (cards/001.wav): states within 1e-4
    (f32 throughout), and the search on each gives the same tokens (id, frame and duration)."""
    pcm = load_audio(AUDIO / "cards" / "001.wav")
    on_cpu, on_gpu = family.load(ModelFile(model_path), cpu_ops), family.load(ModelFile(model_path), gpu_ops)
    mel = on_cpu.frontend(pcm)
    cpu_states, gpu_states = on_cpu.model.encode(mel), on_gpu.model.encode(mel)
    np.testing.assert_allclose(gpu_ops.read(gpu_states), cpu_ops.read(cpu_states), atol=1e-4)

    def tokens(emissions):
        return [(e.id, e.frame, e.duration) for e in emissions]

    assert tokens(on_gpu.model.decode(gpu_states)) == tokens(on_cpu.model.decode(cpu_states))
