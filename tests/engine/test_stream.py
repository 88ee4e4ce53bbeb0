"""Streaming dictation on the numpy backend: a take is cut into pieces at its pauses, each closed piece is
transcribed final before the key-up, and the final transcript loses no word of the offline transcription
of the same audio: equal to it (text, segments, token times and probabilities) where the take is one
piece (in text where Whisper's take ends in a pause), word for word where it is several, for every shared clip and both Moonshine tiny and Whisper
tiny.en, fed in chunks of 0.1-0.5 s; partial text shows up while the speaker is still speaking; the
frontends' kept frames equal frames computed at once."""

from __future__ import annotations

import csv
import threading
import time

import numpy as np
import pytest
from support.data import AUDIO, TINY_EN_GGUF, needs_clips
from support.texts import STREAM_WER_MARGIN, one_piece, words

from sayso.engine.audio import load_audio
from sayso.engine.errors import Interrupted
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.segmenter import SAMPLE_RATE
from sayso.engine.stream import KEY_UP_QUIET
from sayso.engine.vad import speech_segments
from sayso.engine.wer import count_errors
from sayso.engine.whisper.frontend import N_FRAMES, LogMel, log_mel

MODELS = ("moonshine-tiny", "whisper-tiny.en")
THREE_CLIPS = ("jfk.wav", "librivox/sense_and_sensibility_01_austen_64kb-0870.wav",
               "librivox/sense_and_sensibility_01_austen_64kb-0920.wav")


def clips() -> dict[str, str]:
    """The shared clips and their reference transcripts."""
    with open(AUDIO / "transcripts.tsv", encoding="utf-8") as f:
        return {row["file"]: row["reference"] for row in csv.DictReader(f, delimiter="\t")}


@pytest.fixture(scope="module")
def engines(moonshine_tiny):
    from sayso.engine.engine import Engine

    return {"moonshine-tiny": Engine(moonshine_tiny, device="cpu"), "whisper-tiny.en": Engine(TINY_EN_GGUF, device="cpu")}


def chunks(pcm: np.ndarray, seed: int):
    """``pcm`` in chunks of 0.1 to 0.5 s, as a microphone's blocks reach the engine."""
    rng, at = np.random.default_rng(seed), 0
    while at < len(pcm):
        size = int(rng.integers(SAMPLE_RATE // 10, SAMPLE_RATE // 2 + 1))
        yield pcm[at : at + size]
        at += size


@pytest.mark.parametrize("model", MODELS)
def test_final_text_of_every_clip(engines, model, monkeypatch):
    """Passes run inside ``feed`` (no thread), so which passes ran before the end is the same on every
    run. Moonshine runs partial passes too, one a second (each reusing the stem rows of the one before);
    for Whisper, whose every pass encodes 30 s, only closed pieces and a piece at a pause are
    transcribed before the end (``partials`` off, to keep the test short). A clip too short for a pause
    to close a piece is one piece: its transcript is the offline one, in text where Whisper's clip ends
    in a pause (``ends_in_a_pause``). A longer one keeps the offline text's word error rate against the
    clip's reference within ``STREAM_WER_MARGIN``."""
    monkeypatch.setattr("sayso.engine.stream.MIN_STEP", 1.0)
    engine = engines[model]
    for seed, (clip, reference) in enumerate(clips().items()):
        pcm = load_audio(AUDIO / clip)
        offline = engine.transcribe(pcm)
        session = engine.stream(background=False, partials=model == "moonshine-tiny")
        for chunk in chunks(pcm, seed):
            session.feed(chunk)
        streamed = session.finish()
        assert offline.text, clip
        if one_piece(pcm):
            assert streamed.text == offline.text, clip
            assert streamed == offline or (engine.reads_windows and ends_in_a_pause(pcm)), clip
        else:
            rate = count_errors(reference, streamed.text).rate
            assert rate <= count_errors(reference, offline.text).rate + STREAM_WER_MARGIN, (clip, streamed.text)


def ends_in_a_pause(pcm: np.ndarray) -> bool:
    """Whether ``pcm``'s last speech is followed by a pause that starts a pass (``KEY_UP_QUIET``): Whisper's
    text of a take that ends so may come from that pass, whose probabilities (and perhaps times) can
    differ a little from the offline ones, since it heard less of the quiet."""
    return speech_segments(pcm)[-1][1] + KEY_UP_QUIET * SAMPLE_RATE <= len(pcm)


def three_clips_with_pauses() -> tuple[np.ndarray, list[np.ndarray]]:
    """A dictation of three clips, each followed by a 2 s pause: the take, and the clips."""
    said = [load_audio(AUDIO / clip) for clip in THREE_CLIPS]
    pause = np.zeros(2 * SAMPLE_RATE, np.float32)
    return np.concatenate([part for clip in said for part in (clip, pause)]), said


def finish_counting_passes(engine, session):
    """``session.finish()``, and where each piece it transcribed at the key-up starts (seconds)."""
    transcribed = []

    def transcribe_piece(pcm, offset, *rest, **named):
        transcribed.append(offset)
        return type(engine).transcribe_piece(engine, pcm, offset, *rest, **named)

    engine.transcribe_piece = transcribe_piece
    try:
        return session.finish(), transcribed
    finally:
        del engine.transcribe_piece


@needs_clips(*THREE_CLIPS)
def test_pieces_closed_by_a_pause_are_final_before_the_key_up(engines):
    """The first two clips' text is there before the key-up with no partial passes, so it came from the
    final passes of the pieces the pauses closed; the key-up transcribes only the last piece; and the
    take's words are those of its three clips, each transcribed alone."""
    engine = engines["moonshine-tiny"]
    take, said = three_clips_with_pauses()
    alone = [words(engine.transcribe(clip).text) for clip in said]
    session = engine.stream(background=False, partials=False)
    for start in range(0, len(take) - 2 * SAMPLE_RATE, 800):  # up to the last clip's end
        session.feed(take[start : start + 800])
    assert words(session.text).startswith(f"{alone[0]} {alone[1]}")
    final, transcribed = finish_counting_passes(engine, session)
    third_begins = (len(said[0]) + len(said[1]) + 4 * SAMPLE_RATE) / SAMPLE_RATE
    assert len(transcribed) == 1 and third_begins - 2 < transcribed[0] < third_begins
    assert words(final.text) == " ".join(alone)


@needs_clips(*THREE_CLIPS, "cards/001.wav")
def test_a_later_pieces_pause_pass_is_the_key_ups_for_moonshine_too(engines):
    """A take of several pieces may differ from the offline text anyway, so there a pause's pass on the
    open piece is the key-up's for Moonshine as for Whisper: with the key-up in the pause after the third
    clip, nothing is left to transcribe, and the take keeps its clips' words. A take of one piece keeps
    the offline text: its key-up transcribes the whole piece, pause and all."""
    engine = engines["moonshine-tiny"]
    take, said = three_clips_with_pauses()
    session = engine.stream(background=False, partials=False)
    for start in range(0, len(take), 800):
        session.feed(take[start : start + 800])
    final, transcribed = finish_counting_passes(engine, session)
    assert transcribed == []
    assert words(final.text) == " ".join(words(engine.transcribe(clip).text) for clip in said)
    alone = np.concatenate([load_audio(AUDIO / "cards/001.wav"), np.zeros(2 * SAMPLE_RATE, np.float32)])
    session = engine.stream(background=False, partials=False)
    for start in range(0, len(alone), 800):
        session.feed(alone[start : start + 800])
    final, transcribed = finish_counting_passes(engine, session)
    assert transcribed == [0.0] and final == engine.transcribe(alone)


@needs_clips(*THREE_CLIPS)
def test_whisper_reads_on_past_the_pause_inside_a_piece(engines):
    """With a second of quiet before it, the take's first piece closes at a pause inside jfk.wav, and the
    pause after jfk.wav comes before the next piece holds enough to close, so one piece holds jfk.wav's
    end, 2 s of digital silence and the next speaker. Whisper ends its text at the silence; the window
    is read on from the speech the voice detector hears after it (``whisper.read_on``), so the streamed
    take keeps the offline take's word error rate against the clips' references."""
    engine = engines["whisper-tiny.en"]
    take = np.concatenate([np.zeros(SAMPLE_RATE, np.float32), three_clips_with_pauses()[0]])
    reference = " ".join(clips()[clip] for clip in THREE_CLIPS)
    session = engine.stream(background=False, partials=False)
    for chunk in chunks(take, seed=3):
        session.feed(chunk)
    streamed = session.finish()
    offline = count_errors(reference, engine.transcribe(take).text).rate
    assert count_errors(reference, streamed.text).rate <= offline + STREAM_WER_MARGIN, streamed.text


@needs_clips("commands/goforward.wav", "cards/001.wav")
def test_whispers_pass_a_pause_starts_is_the_key_ups_unless_something_is_said_after_it(engines):
    """"Go forward ten meters", then a pause in too short a piece for it to close: the pause starts a
    pass on the piece (partials off, as for Whisper on a CPU), whose text is there before the key-up. A
    key-up in that pause runs no pass and gives the offline text of the take; a word after the pause
    ("ten of clubs"), or a syllable too short for the VAD to count as speech, makes the key-up
    transcribe the piece again, whole: the offline transcript, the word in it."""
    engine = engines["whisper-tiny.en"]
    said = load_audio(AUDIO / "commands/goforward.wav")
    pause = np.zeros(SAMPLE_RATE * 6 // 10, np.float32)
    onset = speech_segments(said)[0][0]
    syllable = np.concatenate([said[onset : onset + SAMPLE_RATE * 15 // 100], np.zeros(SAMPLE_RATE // 5, np.float32)])
    before = engine.transcribe(np.concatenate([said, pause]))
    word = load_audio(AUDIO / "cards/001.wav")
    for tail in (np.zeros(0, np.float32), word, syllable):
        take = np.concatenate([said, pause, tail])
        session = engine.stream(background=False, partials=False)
        for start in range(0, len(take), 800):
            session.feed(take[start : start + 800])
            if start + 800 == len(said) + len(pause):
                assert session.text == before.text  # the pass the pause started
        final, transcribed = finish_counting_passes(engine, session)
        offline = engine.transcribe(take) if len(tail) else before
        if len(tail):
            assert transcribed == [0.0] and final == offline
        else:
            assert transcribed == [] and final.text == offline.text
        assert words(final.text).startswith(words(before.text))
        if tail is word:  # its three words after the pause's
            assert len(words(final.text).split()) == len(words(before.text).split()) + 3, final.text


@needs_clips("commands/goforward.wav")
def test_a_key_up_a_third_of_a_second_into_the_pause_finds_its_pass_done(engines):
    """The pause's pass starts after ``KEY_UP_QUIET`` of quiet, before a pause could close a piece: a
    key-up 0.3 s after "Go forward ten meters" runs no pass, and its text is the offline one."""
    engine = engines["whisper-tiny.en"]
    said = load_audio(AUDIO / "commands/goforward.wav")
    take = said[: speech_segments(said)[-1][1] + SAMPLE_RATE * 3 // 10]
    session = engine.stream(background=False, partials=False)
    for start in range(0, len(take), 800):
        session.feed(take[start : start + 800])
    final, transcribed = finish_counting_passes(engine, session)
    assert transcribed == [] and final.text == engine.transcribe(take).text


@needs_clips("commands/goforward.wav", "cards/001.wav")
@pytest.mark.parametrize("where", ["encode", "step_logits"])
def test_a_whisper_pass_the_speaker_made_stale_is_dropped_mid_way(engines, where):
    """"Go forward ten meters", then a pause that starts a pass on the session's thread (partials off).
    That pass is held in its encoder (before its first block) or its decoder (after the first step)
    until "ten of clubs" has arrived, which makes its text no longer final: it stops there
    (``Interrupted``) before the key-up, and the key-up gives the take's offline text."""
    engine = engines["whisper-tiny.en"]
    said, word = load_audio(AUDIO / "commands/goforward.wav"), load_audio(AUDIO / "cards/001.wav")
    pause = np.zeros(SAMPLE_RATE * 6 // 10, np.float32)
    offline = engine.transcribe(np.concatenate([said, pause, word]))
    model = engine.transcriber.model
    inside, go = threading.Event(), threading.Event()
    real = getattr(model, where)
    outcomes = []

    def held(*args, **named):
        if not inside.is_set():
            inside.set()
            go.wait(60)
        return real(*args, **named)

    def transcribe_piece(*args, **named):
        try:
            found = type(engine).transcribe_piece(engine, *args, **named)
        except Interrupted:
            outcomes.append("dropped")
            raise
        outcomes.append("done")
        return found

    setattr(model, where, held)
    engine.transcribe_piece = transcribe_piece
    try:
        session = engine.stream(partials=False)
        session.feed(np.concatenate([said, pause]))
        assert inside.wait(60)  # the pause's pass is under way
        session.feed(word)
        go.set()
        for _ in range(1200):  # until the pass has stopped or ended (a minute at most)
            if outcomes:
                break
            time.sleep(0.05)
        assert outcomes == ["dropped"]
        final = session.finish()
    finally:
        go.set()
        delattr(model, where)
        del engine.transcribe_piece
    assert final.text == offline.text and "done" in outcomes


@needs_clips("jfk.wav")
def test_hands_free_dictation_stops_after_the_whole_pause_across_a_closed_piece(engines):
    """The quiet after jfk.wav's last words closes the piece before the hands-free pause is over, and
    the take counts as ended only once the quiet has lasted that pause."""
    pcm = np.concatenate([load_audio(AUDIO / "jfk.wav"), np.zeros(SAMPLE_RATE // 2, np.float32)])
    session = engines["moonshine-tiny"].stream(background=False, partials=False, pause=1.5)
    for start in range(0, len(pcm), 800):
        session.feed(pcm[start : start + 800])
    assert session.text and not session.status.ended  # closed and transcribed, the pause not over
    ended = []
    for _ in range(20):  # one more second of quiet
        session.feed(np.zeros(800, np.float32))
        ended.append(session.status.ended)
    assert not ended[0] and ended[-1]


@pytest.mark.parametrize("model", MODELS)
def test_partial_text_while_speaking(engines, model):
    pcm = load_audio(AUDIO / "jfk.wav")
    session = engines[model].stream(background=False)
    shown = [session.feed(pcm[start : start + 1600]) for start in range(0, len(pcm) - 1600, 1600)]
    assert any(shown[: len(shown) // 2])  # text within the first half of the speech
    assert "fellow" in " ".join(shown).lower()  # "And so my fellow Americans" before the end
    session.feed(pcm[len(pcm) - 1600 :])
    assert words(session.finish().text) == words(engines[model].transcribe(pcm).text)


@needs_clips("beckett.wav")
def test_passes_on_the_session_thread_show_text_while_audio_arrives(engines):
    """Fed at four times real time, Moonshine tiny's passes run on the session's own thread: text
    arrives while audio still does, and ``finish`` gives the take's words."""
    engine = engines["moonshine-tiny"]
    pcm = load_audio(AUDIO / "beckett.wav")
    session = engine.stream()
    shown = []
    for start in range(0, len(pcm), 1600):
        shown.append(session.feed(pcm[start : start + 1600]))
        time.sleep(0.1 / 4)
    transcript = session.finish()
    assert any(shown) and words(transcript.text) == words(engine.transcribe(pcm).text)
    assert "fail better" in transcript.text.lower()


@needs_clips("beckett.wav")
def test_whisper_on_a_cpu_transcribes_closed_pieces_before_the_key_up(engines):
    """With partials off only its pauses start passes on the open piece, and a piece a pause closed is
    transcribed at once.
    Beckett's quote, said twice with a pause between: all of it once the pause has closed the first,
    that text kept while the second is spoken, and the key-up gives both."""
    engine = engines["whisper-tiny.en"]
    said = load_audio(AUDIO / "beckett.wav")
    pcm = np.concatenate([said, np.zeros(SAMPLE_RATE, np.float32), said])
    session = engine.stream(background=False, partials=False)
    shown = [session.feed(pcm[start : start + 1600]) for start in range(0, len(pcm), 1600)]
    once = words(engine.transcribe(said).text)
    assert words(shown[len(said) // 1600 + 5]) == once and words(shown[180]).startswith(once)  # at 10.5, 18 s
    assert words(session.finish().text) == f"{once} {once}"


@needs_clips("cards/001.wav")
def test_a_second_stream_sees_none_of_the_first(engines):
    engine = engines["moonshine-tiny"]
    first = engine.stream(background=False)
    first.feed(load_audio(AUDIO / "jfk.wav"))
    first.close()
    pcm = load_audio(AUDIO / "cards/001.wav")
    second = engine.stream(background=False)
    second.feed(pcm)
    assert second.finish() == engine.transcribe(pcm)
    with pytest.raises(Exception, match="finished"):
        second.feed(pcm)


def test_log_mel_kept_frames_equal_frames_computed_at_once():
    """The frames ``LogMel`` keeps for audio that grows (and that ends earlier than before, as a span
    trimmed at a pause does) are bit for bit those of one call on the final audio."""
    model_file = ModelFile(TINY_EN_GGUF)
    filterbank, window = model_file.array("frontend.mel_filterbank"), model_file.array("frontend.window")
    pcm = load_audio(AUDIO / "jfk.wav")
    kept = LogMel(filterbank, window)
    for end in (3000, 5000, 40000, 40160, 40359, 96000, 90000, len(pcm)):
        assert np.array_equal(kept(pcm[:end], n_frames=N_FRAMES), log_mel(pcm[:end], filterbank, window, N_FRAMES)), end
