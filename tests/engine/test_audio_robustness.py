"""Odd and broken audio files through ``Engine.transcribe_file`` (numpy backend, Whisper tiny.en): each gives
the right text or one clear AudioError, never another exception; and a three-hour file is decoded and cut
in bounded memory.

The three-hour file (16 kHz FLAC of low noise with spoken clips placed at known times) runs in a child
process that measures its own memory. Its whole length goes through ``stream_audio`` and ``pieces``, the
stream ``transcribe_file`` hands its loop; the model (VAD, then Whisper: ``speech_span`` and
``transcribe_piece``, the calls that loop makes) runs only on the pieces holding a clip and on a sample of
noise pieces, because running it on all 360 pieces takes minutes here. So the test proves: decoding and
cutting three hours stays within a bound, at the same memory after 3 hours as after half an hour; the cuts
keep the file's time exactly (each clip's words come out timed at the second it was placed, 3 hours in
too); the model reads those clips right out of the long file; and the noise holds no speech.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile
import soxr

from support.data import AUDIO, TINY_EN_GGUF, needs_clips
from sayso.engine import reference
from sayso.engine.audio import load_audio
from sayso.engine.errors import AudioError
from sayso.engine.wer import count_errors

JFK = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."


def wer(reference: str, text: str) -> float:
    errors = count_errors(reference, text)
    return errors.errors / errors.words


@pytest.fixture(scope="module")
def jfk():
    return load_audio(AUDIO / "jfk.wav")


# ---- files that hold speech ---------------------------------------------------------------------


def test_clipped_speech(engine, jfk, tmp_path):
    """Twenty times too loud, a third of the samples flattened at full scale: still read."""
    loud = np.clip(jfk * 20, -1, 1)
    assert np.mean(np.abs(loud) >= 1) > 0.3
    soundfile.write(tmp_path / "clipped.wav", loud, 16000)
    text = engine.transcribe_file(tmp_path / "clipped.wav").text
    print(f"\nclipped: {text}")
    assert wer(JFK, text) <= 0.15


def test_8khz_telephone_audio(engine, jfk, tmp_path):
    """Read as transcribe.cpp reads it on the same samples ("my fellow America": one error of 22)."""
    import transcribe_cpp

    soundfile.write(tmp_path / "8k.wav", soxr.resample(jfk, 16000, 8000), 8000)
    text = engine.transcribe_file(tmp_path / "8k.wav").text
    assert text == reference.transcribe(transcribe_cpp.Model(str(TINY_EN_GGUF)), load_audio(tmp_path / "8k.wav")).text
    assert wer(JFK, text) <= 1 / 22


def test_48khz_stereo(engine, jfk, tmp_path):
    """Left the speech, right the same at half level (averaged to mono); 48 kHz resampled to 16."""
    speech = soxr.resample(jfk, 16000, 48000)
    soundfile.write(tmp_path / "stereo.flac", np.stack([speech, 0.5 * speech], axis=1), 48000)
    transcript = engine.transcribe_file(tmp_path / "stereo.flac")
    assert wer(JFK, transcript.text) == 0 and transcript.duration == pytest.approx(11.0, abs=0.01)


# ---- files with nothing to say ------------------------------------------------------------------


def test_silence_gives_no_text(engine, tmp_path):
    soundfile.write(tmp_path / "silent.wav", np.zeros(10 * 16000, np.float32), 16000)
    transcript = engine.transcribe_file(tmp_path / "silent.wav")
    assert transcript.text == "" and transcript.segments == [] and transcript.duration == 10.0


def test_a_wav_without_samples_gives_no_text(engine, tmp_path):
    soundfile.write(tmp_path / "nothing.wav", np.zeros(0, np.float32), 16000)
    transcript = engine.transcribe_file(tmp_path / "nothing.wav")
    assert transcript.text == "" and transcript.duration == 0.0


# ---- damaged files and files that aren't audio --------------------------------------------------


def test_a_cut_mp3_gives_the_words_before_the_cut(engine, tmp_path):
    data = (AUDIO / "jfk.mp3").read_bytes()
    (tmp_path / "cut.mp3").write_bytes(data[: len(data) // 2])
    text = engine.transcribe_file(tmp_path / "cut.mp3").text
    print(f"\nhalf an mp3: {text}")
    assert text and JFK.lower().startswith(" ".join(text.lower().replace(",", "").split()[:4]))
    assert "country" not in text.lower()  # that is in the half that was cut off


def test_flac_with_a_damaged_stretch(engine, jfk, tmp_path):
    """4 KB of random bytes in the middle of a FLAC file: the decoder skips the broken frames and the
    rest of the speech is still read (or, were the damage fatal, one AudioError saying so)."""
    soundfile.write(tmp_path / "good.flac", jfk, 16000)
    data = bytearray((tmp_path / "good.flac").read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4000] = np.random.default_rng(7).integers(0, 256, 4000, dtype=np.uint8).tobytes()
    (tmp_path / "damaged.flac").write_bytes(bytes(data))
    try:
        text = engine.transcribe_file(tmp_path / "damaged.flac").text
    except AudioError as error:
        assert "damaged" in str(error)
    else:
        print(f"\ndamaged flac: {text}")
        assert text.lower().startswith("and so my fellow americans") and text.lower().rstrip(".").endswith("country")


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("empty.wav", b"", "is empty (0 bytes)"),
        ("header-only.wav", (AUDIO / "jfk.wav").read_bytes()[:30], "isn't audio or video that FFmpeg can read"),
        ("notes.wav", b"this is a text file, not a recording\n" * 50, "isn't audio or video that FFmpeg can read"),
        ("model.mp3", TINY_EN_GGUF.read_bytes()[:200_000], "the audio is damaged and can't be decoded"),
        ("folder.wav", None, "is a folder"),
        ("missing.wav", ..., "no such file"),
    ],
)
def test_files_that_are_not_audio_fail_clearly(engine, tmp_path, name, content, problem):
    path = tmp_path / name
    if content is None:
        path.mkdir()
    elif content is not ...:
        path.write_bytes(content)
    with pytest.raises(AudioError) as info:
        engine.transcribe_file(path)
    assert info.value.path == str(path) and problem in str(info.value), info.value


def test_an_image_has_no_audio_track(engine, tmp_path):
    from PySide6.QtGui import QColor, QImage

    image = QImage(64, 48, QImage.Format.Format_RGB32)
    image.fill(QColor("teal"))
    assert image.save(str(tmp_path / "photo.png"))
    with pytest.raises(AudioError, match="has no audio track"):
        engine.transcribe_file(tmp_path / "photo.png")


# ---- three hours --------------------------------------------------------------------------------

HOURS = 3
NOISE = 1e-4  # about 3 LSB of 16-bit: a quiet room through a decent microphone
CLIPS = {  # where each clip starts, in seconds: early, at 1:30:00 (past any 32-bit sample count in ms), near the end
    "jfk.wav": 600.0,
    "beckett.wav": 5400.0,
    "librivox/sense_and_sensibility_01_austen_64kb-0870.wav": 3 * 3600 - 40.0,
}
RSS_BOUND_MB = 300  # growth of the child's peak memory over its memory with the model loaded
STEADY_BOUND_MB = 10  # memory after 3 hours over memory after half an hour: nothing grows with the length


def write_long_file(path, clips: dict[str, tuple[float, np.ndarray]]) -> None:
    """HOURS of noise with the clips added at their times, written 60 s at a time (bounded memory)."""
    rng = np.random.default_rng(3)
    block = 60 * 16000
    with soundfile.SoundFile(path, "w", 16000, 1, "PCM_16", format="FLAC") as out:
        for start in range(0, HOURS * 3600 * 16000, block):
            audio = (rng.standard_normal(block) * NOISE).astype(np.float32)
            for at, pcm in clips.values():
                first = int(at * 16000)
                lo, hi = max(first, start), min(first + len(pcm), start + block)
                if lo < hi:
                    audio[lo - start : hi - start] += pcm[lo - first : hi - first]
            out.write(audio)


CHILD = """
import json, sys, time
import numpy as np
from sayso.engine.audio import stream_audio
from sayso.engine.engine import Engine
from sayso.engine.segmenter import pieces


def rss(key="VmRSS:"):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key)) / 1024

path, model, clips = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
engine = Engine(model, device="cpu")


def held_pieces():  # (offset, piece, the clips in it) for every piece of the file
    for offset, piece in pieces(stream_audio(path), max_seconds=engine.transcriber.window_seconds):
        end = offset + len(piece) / 16000
        yield offset, piece, [name for name, (at, length) in clips.items() if at < end and at + length > offset]


# The model's work on each piece that holds a clip runs once first: what the model and the heap keep
# between runs (their high-water mark depends on what was decoded, not on how long the file is) is
# the start. Then the measured pass.
for offset, piece, held in held_pieces():
    if held:
        engine.transcribe_piece(piece, offset, engine.speech_span(piece), None, "transcribe", None)
open("/proc/self/clear_refs", "w").write("5")  # the peak so far (loading) no longer counts
report = {"start_mb": rss(), "pieces": 0, "found": {}, "noise_with_speech": 0, "noise_checked": 0,
          "every_half_hour_mb": []}
started = time.monotonic()
for offset, piece, held in held_pieces():
    end = offset + len(piece) / 16000
    report["pieces"] += 1
    if held:
        segments, _ = engine.transcribe_piece(piece, offset, engine.speech_span(piece), None, "transcribe", None)
        for name in held:
            report["found"].setdefault(name, []).extend((s.start, s.end, s.text) for s in segments)
    elif report["pieces"] % 60 == 0:  # one noise piece in 60 (about every half hour): memory, and no speech
        report["every_half_hour_mb"].append(rss())
        report["noise_checked"] += 1
        report["noise_with_speech"] += engine.speech_span(piece) is not None
report.update(end_mb=rss(), peak_mb=rss("VmHWM:"), seconds=time.monotonic() - started, duration=end)
print(json.dumps(report))
"""


@needs_clips(*CLIPS)
def test_three_hours_in_bounded_memory(tmp_path):
    clips = {name: (at, load_audio(AUDIO / name)) for name, at in CLIPS.items()}
    path = tmp_path / "three-hours.flac"
    write_long_file(path, clips)
    spans = json.dumps({name: (at, len(pcm) / 16000) for name, (at, pcm) in clips.items()})
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    result = subprocess.run([sys.executable, "-c", CHILD, str(path), str(TINY_EN_GGUF), spans],
                            capture_output=True, text=True, timeout=600, env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    growth = report["peak_mb"] - report["start_mb"]
    half_hours = report["every_half_hour_mb"]
    print(
        f"\n{HOURS} h file ({path.stat().st_size / 1e6:.0f} MB FLAC): {report['pieces']} pieces in "
        f"{report['seconds']:.0f} s; memory {report['start_mb']:.0f} MB with the model loaded, peak "
        f"{report['peak_mb']:.0f} MB (+{growth:.0f} MB; bound +{RSS_BOUND_MB} MB); about every half hour "
        f"{[round(mb) for mb in half_hours]} MB, {report['end_mb']:.0f} MB at the end"
    )
    assert report["duration"] == pytest.approx(HOURS * 3600, abs=0.01)
    assert growth < RSS_BOUND_MB
    assert max(half_hours[1:] + [report["end_mb"]]) - half_hours[0] < STEADY_BOUND_MB
    table = [row.split("\t") for row in (AUDIO / "transcripts.tsv").read_text().splitlines()[1:]]
    references = {row[0]: row[3] for row in table}
    for name, at in CLIPS.items():
        segments = report["found"][name]
        text = " ".join(t for _, _, t in segments)
        print(f"  {name} placed at {at:.0f} s: heard at {segments[0][0]:.2f} s: {text.strip()}")
        assert abs(segments[0][0] - at) < 1.5, segments  # the file's own time, 3 hours in too
        assert wer(references[name], text) <= 0.1
    assert report["noise_checked"] >= 5 and report["noise_with_speech"] == 0
