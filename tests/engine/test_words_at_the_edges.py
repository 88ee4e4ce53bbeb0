"""No word is lost to voice detection: for every shared clip, made harder in two ways that soften its
onset (telephone band: 8 kHz, 300-3400 Hz, back to 16 kHz; and the first word 12 dB quieter), Whisper
tiny.en and Moonshine tiny give the same text with voice detection on as with it off, transcribing the
file and dictating it in the app's 50 ms chunks (a dictation cut into pieces at its pauses: within the
word error rate against the clip's reference that the cuts may add). Trimming pieces to Silero's speech with a 0.1 s margin
lost "Go" of "Go forward 10 meters" and "He" of "He was not an ill-disposed young man" here."""

from __future__ import annotations

import numpy as np
import pytest

from support.data import AUDIO, TINY_EN_GGUF
from support.texts import STREAM_WER_MARGIN, one_piece
from sayso.engine.audio import load_audio
from sayso.engine.accuracy import read_clips, telephone_band
from sayso.engine.segmenter import SAMPLE_RATE
from sayso.engine.stream import FEED_SECONDS
from sayso.engine.wer import count_errors

REFERENCES = {clip.file: clip.reference for clip in read_clips(AUDIO)}
CLIPS = list(REFERENCES)
MODELS = ("whisper-tiny.en", "moonshine-tiny")
QUIETER_DB = 12.0


def first_word_quieter(pcm: np.ndarray, reference) -> np.ndarray:
    """``pcm`` with everything before its second word ``QUIETER_DB`` quieter; the words' times come from
    ``reference`` (an engine without voice detection): the start of the second token that opens a word."""
    openings = [token.start for segment in reference.transcribe(pcm).segments for token in segment.tokens
                if token.text.startswith(" ")]
    end = int(openings[1] * SAMPLE_RATE) if len(openings) > 1 else len(pcm)
    quieter = pcm.copy()
    quieter[:end] *= np.float32(10 ** (-QUIETER_DB / 20))
    return quieter


@pytest.fixture(scope="module")
def engines(moonshine_tiny):
    """(with voice detection, without) for each model."""
    from sayso.engine.engine import Engine

    paths = {"whisper-tiny.en": TINY_EN_GGUF, "moonshine-tiny": moonshine_tiny}
    return {model: (Engine(path, device="cpu"), Engine(path, device="cpu", vad=False)) for model, path in paths.items()}


@pytest.fixture(scope="module")
def variants(engines):
    """``variants(clip)``: the clip's telephone-band and quieter-first-word versions, made once."""
    made = {}

    def variant(clip: str) -> dict[str, np.ndarray]:
        if clip not in made:
            pcm = load_audio(AUDIO / clip)
            made[clip] = {"telephone band": telephone_band(pcm),
                          "first word quieter": first_word_quieter(pcm, engines["whisper-tiny.en"][1])}
        return made[clip]

    return variant


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("clip", CLIPS)
def test_voice_detection_loses_no_word(engines, variants, model, clip):
    with_vad, without_vad = engines[model]
    for name, pcm in variants(clip).items():
        expected = without_vad.transcribe(pcm).text
        assert expected, f"{clip}, {name}: no text even without voice detection"
        assert with_vad.transcribe(pcm).text == expected, f"{clip}, {name}: file"
        session = with_vad.stream(background=False, partials=False)
        chunk = int(FEED_SECONDS * SAMPLE_RATE)
        for start in range(0, len(pcm), chunk):
            session.feed(pcm[start : start + chunk])
        dictated = session.finish().text
        where = f"{clip}, {name}: dictated in {FEED_SECONDS * 1000:.0f} ms chunks"
        if one_piece(pcm):
            assert dictated == expected, where
        else:  # cut at its pauses: a model's words may change with what it hears around them
            reference = REFERENCES[clip]
            assert count_errors(reference, dictated).rate <= count_errors(reference, expected).rate + STREAM_WER_MARGIN, where
