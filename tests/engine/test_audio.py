"""Reading audio and video files to 16 kHz mono, on real speech; the m4a and mp4 files are encoded here
from jfk.wav with PyAV's FFmpeg (there are none in the shared data)."""

import struct

import av
import numpy as np
import pytest
import soundfile
import soxr

from support.data import AUDIO, needs_clips
from sayso.engine.audio import Warnings, duration, load_audio, save_wav, stream_audio
from sayso.engine.errors import AudioError

JFK = AUDIO / "jfk.wav"
TWO_CITIES = AUDIO / "two_cities.wav"  # 48 kHz


def encode(path, planes, rate, codec, layout, fmt=None, with_video=False):
    """Write ``planes`` [channels, n] float audio (or no audio track when None) with FFmpeg."""
    with av.open(str(path), "w", format=fmt) as out:
        # Every stream is added before the first packet is muxed: muxing writes the container's header.
        audio = out.add_stream(codec, rate=rate, layout=layout) if planes is not None else None
        video = out.add_stream("mpeg4", rate=25) if with_video else None
        if video is not None:
            video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        if audio is not None:
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(planes, np.float32), format="fltp", layout=layout)
            frame.sample_rate = rate
            for packet in [*audio.encode(frame), *audio.encode(None)]:
                out.mux(packet)
        if video is not None:
            for i in range(25):
                image = av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 10, np.uint8), format="rgb24")
                for packet in video.encode(image):
                    out.mux(packet)
            for packet in video.encode(None):
                out.mux(packet)


@pytest.fixture(scope="module")
def jfk():
    pcm, rate = soundfile.read(JFK, dtype="float32")
    assert rate == 16000
    return pcm


@pytest.fixture(scope="module")
def files(tmp_path_factory, jfk):
    folder = tmp_path_factory.mktemp("audio")
    at_44k = soxr.resample(jfk, 16000, 44100)
    encode(folder / "stereo.m4a", np.stack([at_44k, np.zeros_like(at_44k)]), 44100, "aac", "stereo")
    encode(folder / "talk.mp4", at_44k[None], 44100, "aac", "mono", with_video=True)
    encode(folder / "silent_video.mp4", None, 0, None, None, with_video=True)
    encode(folder / "jfk.opus", soxr.resample(jfk, 16000, 48000)[None], 48000, "libopus", "mono", fmt="ogg")
    soundfile.write(folder / "stereo.flac", np.stack([jfk, 0.5 * jfk], axis=1), 22050, subtype="PCM_16")
    (folder / "notes.wav").write_text("this is text, not sound\n")
    m4a = (folder / "stereo.m4a").read_bytes()
    (folder / "truncated.m4a").write_bytes(m4a[: len(m4a) // 2])  # the index (moov) at the end is gone
    damaged = bytearray(m4a)
    damaged[2000:6000] = b"\xff" * 4000  # garbage in the middle of the AAC packets
    (folder / "damaged.m4a").write_bytes(damaged)
    return folder


def best_lag_correlation(reference, pcm, max_lag=1000):
    """Normalised cross-correlation of two signals at their best alignment (lossy codecs delay the audio)."""
    n = min(len(reference), len(pcm)) - max_lag
    scores = [np.dot(reference[max_lag:n], pcm[max_lag + lag : n + lag]) for lag in range(-max_lag, max_lag)]
    lag = int(np.argmax(scores))
    aligned = pcm[lag : lag + n - max_lag]
    return np.corrcoef(reference[max_lag:n], aligned)[0, 1]


def test_wav_at_16k_is_read_as_is(jfk):
    pcm = load_audio(JFK)
    assert pcm.dtype == np.float32 and pcm.ndim == 1
    assert np.array_equal(pcm, jfk)
    assert duration(JFK) == 11.0


@needs_clips("two_cities.wav")
def test_48khz_wav_is_resampled():
    raw, rate = soundfile.read(TWO_CITIES, dtype="float32")
    pcm = load_audio(TWO_CITIES)
    assert rate == 48000 and pcm.shape == (len(raw) // 3,)
    assert np.array_equal(pcm, soxr.resample(raw, 48000, 16000))
    assert duration(TWO_CITIES) == pytest.approx(44.374, abs=1e-3)


def test_mp3(jfk):
    pcm = load_audio(AUDIO / "jfk.mp3")
    assert pcm.shape == jfk.shape
    assert best_lag_correlation(jfk, pcm) > 0.99
    assert duration(AUDIO / "jfk.mp3") == pytest.approx(11.0, abs=0.05)


def test_flac_stereo_22khz_is_averaged(files, jfk):
    pcm = load_audio(files / "stereo.flac")
    expected = soxr.resample(0.75 * jfk, 22050, 16000)  # (L + R) / 2 of L = x, R = x/2, read as if at 22.05 kHz
    assert np.abs(pcm - expected).max() < 1e-3


def test_ogg_opus(files, jfk):
    pcm = load_audio(files / "jfk.opus")
    assert abs(len(pcm) - len(jfk)) < 160
    assert best_lag_correlation(jfk, pcm) > 0.98


def test_m4a_goes_through_ffmpeg_and_averages_channels(files, jfk):
    pcm = load_audio(files / "stereo.m4a")
    assert pcm.dtype == np.float32
    assert abs(len(pcm) - len(jfk)) < 1600  # AAC adds up to ~2 frames of padding
    assert best_lag_correlation(jfk, pcm) > 0.97
    assert np.std(pcm) / np.std(jfk) == pytest.approx(0.5, abs=0.02)  # right channel silent
    assert duration(files / "stereo.m4a") == pytest.approx(11.0, abs=0.1)


def test_audio_track_of_a_video(files, jfk):
    pcm = load_audio(files / "talk.mp4")
    assert best_lag_correlation(jfk, pcm) > 0.97
    assert duration(files / "talk.mp4") == pytest.approx(11.0, abs=0.1)


@needs_clips("two_cities.wav")
def test_stream_yields_fixed_chunks_equal_to_whole_file(files):
    chunks = list(stream_audio(TWO_CITIES, chunk_seconds=10.0))
    assert [len(c) for c in chunks[:-1]] == [160000] * 4 and 0 < len(chunks[-1]) <= 160000
    assert all(c.dtype == np.float32 and c.ndim == 1 for c in chunks)
    assert np.abs(np.concatenate(chunks) - load_audio(TWO_CITIES)).max() < 1e-4
    streamed_m4a = np.concatenate(list(stream_audio(files / "stereo.m4a", chunk_seconds=3.0)))
    assert np.array_equal(streamed_m4a, load_audio(files / "stereo.m4a"))


def test_a_wav_file_streams_without_ffmpeg(tmp_path, jfk):
    """WAV streams through libsndfile (a folder of WAV files never loads PyAV), 48 kHz stereo resampled
    and averaged as ``load_audio`` does it."""
    import subprocess
    import sys

    stereo = np.stack([jfk, 0.5 * jfk], axis=1)
    path = tmp_path / "stereo48k.wav"
    soundfile.write(path, soxr.resample(stereo, 16000, 48000), 48000, subtype="FLOAT")
    script = ("import sys, numpy as np; from sayso.engine.audio import stream_audio; "
              f"pcm = np.concatenate(list(stream_audio({str(path)!r}, chunk_seconds=2.0))); "
              f"np.save({str(tmp_path / 'out.npy')!r}, pcm); print('av' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "False"
    streamed, whole = np.load(tmp_path / "out.npy"), load_audio(path)
    assert abs(len(streamed) - len(whole)) <= 1
    n = min(len(streamed), len(whole))
    assert np.abs(streamed[:n] - whole[:n]).max() < 1e-3


@needs_clips("two_cities.wav")
def test_stream_can_stop_early():
    stream = stream_audio(TWO_CITIES, chunk_seconds=1.0)
    assert len(next(stream)) == 16000
    stream.close()  # closes the container; nothing else is decoded


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing.wav", "no such file"),
        (".", "is a folder"),
        ("notes.wav", "isn't audio or video"),
        ("truncated.m4a", "isn't audio or video"),
        ("silent_video.mp4", "has no audio track"),
    ],
)
def test_errors_say_what_is_wrong(files, name, message):
    path = files / name
    for read in (load_audio, lambda p: list(stream_audio(p))):
        with pytest.raises(AudioError, match=message) as error:
            read(path)
        assert error.value.path == str(path)
    with pytest.raises(AudioError, match=message):
        duration(path)


def test_garbage_in_an_m4a_is_left_out_with_a_warning(files, jfk):
    """Damaged packets are skipped, as in every container: the rest decodes, and a warning says so."""
    warnings = Warnings()
    pcm = np.concatenate(list(stream_audio(files / "damaged.m4a", warn=warnings)))
    assert len(pcm) > 0.8 * len(jfk)
    assert len(warnings) == 1 and "damaged stretch(es) can't be decoded" in warnings[0]


def test_save_wav_round_trip(tmp_path, jfk):
    path = tmp_path / "dictation.wav"
    save_wav(path, np.concatenate([jfk, [1.5, -1.5]]))
    info = soundfile.info(path)
    assert (info.samplerate, info.channels, info.subtype, info.format) == (16000, 1, "PCM_16", "WAV")
    pcm = load_audio(path)
    assert np.abs(pcm[:-2] - jfk).max() <= 1 / 32768
    assert pcm[-2] == pytest.approx(1.0, abs=1e-4) and pcm[-1] == -1.0  # clipped, not wrapped around


def test_save_wav_to_a_missing_folder(tmp_path):
    with pytest.raises(AudioError, match="can't write"):
        save_wav(tmp_path / "no" / "such" / "folder.wav", np.zeros(160, np.float32))


@pytest.mark.parametrize("subtype", ["PCM_U8", "PCM_16", "PCM_32", "FLOAT", "DOUBLE"])
def test_ffmpeg_sample_formats_match_libsndfile(tmp_path, jfk, subtype):
    """Streaming decodes with FFmpeg, loading with libsndfile: both scale and downmix every sample format alike."""
    path = tmp_path / "stereo.wav"
    soundfile.write(path, np.stack([jfk, -0.25 * jfk], axis=1), 44100, subtype=subtype)
    assert np.array_equal(np.concatenate(list(stream_audio(path))), load_audio(path))


@pytest.mark.parametrize("channels", [1, 2])
def test_64_bit_integer_wav(tmp_path, jfk, channels):
    """A WAV may hold 64-bit integer samples, which PyAV decodes but has no array for; they scale like any other."""
    wanted = np.stack([jfk, -0.25 * jfk][:channels], axis=1)
    data = np.round(wanted * 2.0**62).astype("<i8").tobytes()  # half of full scale: exact in float32 after scaling
    fmt = struct.pack("<HHIIHH", 1, channels, 16000, 16000 * 8 * channels, 8 * channels, 64)
    path = tmp_path / "s64.wav"
    path.write_bytes(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
                     + b"data" + struct.pack("<I", len(data)) + data)
    streamed = np.concatenate(list(stream_audio(path)))
    np.testing.assert_allclose(streamed, 0.5 * wanted.mean(axis=1), atol=1e-6)
