"""Transcript renderings, checked as exact strings on a hand-built transcript."""

import json
import re

import pytest

from sayso.engine.formats import render
from sayso.engine.transcript import Segment, Token, Transcript


@pytest.fixture
def transcript():
    return Transcript(
        text="And so, my fellow Americans. Ask not <what> & why.",
        segments=[
            Segment(0.0, 2.5, " And so, my fellow Americans.", [
                Token(843, " And", 0.0, 0.98765), Token(523, " so", 0.32, 0.5), Token(11, ",", 0.6100000001, 1.0),
            ]),
            Segment(2.5, 3.0, "   "),  # a pause the model marked with no words: no subtitle cue
            Segment(3.004, 3723.4567, " Ask not <what> & why."),
        ],
        language="en",
        duration=3725.1,
        model="whisper-tiny.en",
    )


def test_txt(transcript):
    assert render(transcript, "txt") == "And so, my fellow Americans. Ask not <what> & why."


def test_json_is_one_line(transcript):
    rendered = render(transcript, "json", file="talk.m4a")
    assert rendered == (
        '{"file":"talk.m4a","text":"And so, my fellow Americans. Ask not <what> & why.","language":"en",'
        '"duration":3725.1,"segments":['
        '{"start":0.0,"end":2.5,"text":" And so, my fellow Americans.","tokens":['
        '{"id":843,"text":" And","start":0.0,"p":0.9877},{"id":523,"text":" so","start":0.32,"p":0.5},'
        '{"id":11,"text":",","start":0.61,"p":1.0}]},'
        '{"start":2.5,"end":3.0,"text":"   ","tokens":[]},'
        '{"start":3.004,"end":3723.457,"text":" Ask not <what> & why.","tokens":[]}]}'
    )
    assert "\n" not in rendered and json.loads(rendered)["segments"][0]["tokens"][1]["p"] == 0.5
    assert json.loads(render(Transcript("héllo", []), "json"))["file"] is None
    assert "héllo" in render(Transcript("héllo", []), "json")  # UTF-8, not \u escapes


def test_srt(transcript):
    assert render(transcript, "srt") == (
        "1\n00:00:00,000 --> 00:00:02,500\nAnd so, my fellow Americans.\n\n"
        "2\n00:00:03,004 --> 01:02:03,457\nAsk not <what> & why."
    )


def test_srt_parses_back(transcript):
    cues = re.findall(
        r"(\d+)\n(\d\d):(\d\d):(\d\d),(\d{3}) --> (\d\d):(\d\d):(\d\d),(\d{3})\n(.+?)(?:\n\n|$)",
        render(transcript, "srt"),
        flags=re.S,
    )
    spoken = [s for s in transcript.segments if s.text.strip()]
    assert [int(c[0]) for c in cues] == [1, 2]
    for cue, segment in zip(cues, spoken):
        h0, m0, s0, ms0, h1, m1, s1, ms1 = map(int, cue[1:9])
        assert h0 * 3600 + m0 * 60 + s0 + ms0 / 1000 == pytest.approx(segment.start, abs=5e-4)
        assert h1 * 3600 + m1 * 60 + s1 + ms1 / 1000 == pytest.approx(segment.end, abs=5e-4)
        assert cue[9] == segment.text.strip()


def test_vtt_escapes_markup(transcript):
    assert render(transcript, "vtt") == (
        "WEBVTT\n\n"
        "00:00:00.000 --> 00:00:02.500\nAnd so, my fellow Americans.\n\n"
        "00:00:03.004 --> 01:02:03.457\nAsk not &lt;what&gt; &amp; why."
    )


def test_blank_lines_inside_a_segment_would_end_a_cue():
    transcript = Transcript("a b", [Segment(1.0, 2.0, " first line\n\n second line ")])
    assert render(transcript, "srt") == "1\n00:00:01,000 --> 00:00:02,000\nfirst line\nsecond line"


def test_empty_transcript():
    empty = Transcript("", [])
    assert render(empty, "txt") == "" and render(empty, "srt") == "" and render(empty, "vtt") == "WEBVTT"


def test_unknown_format(transcript):
    with pytest.raises(ValueError, match="txt, json, srt, vtt"):
        render(transcript, "docx")
