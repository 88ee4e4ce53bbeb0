"""The cleanup of a dictation by an OpenAI-compatible chat server (app/core/text/cleanup.py), against a real
HTTP server on 127.0.0.1 that speaks the protocol (e2e/chat_server_double.py): what is sent, what is delivered,
and that every failure (no server, a slow one, an error, an answer that is no correction) is a
``CleanupFailed`` with a sentence saying what to check, within the timeout.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from e2e.chat_server_double import answer_instead, chat_server, tidy  # noqa: F401 - a fixture
from sayso.app.core.text.cleanup import DEFAULT_PROMPT, Cleanup, CleanupFailed, clean_up

MARGIN = 0.5
"""Seconds a timed-out cleanup may take beyond its timeout (the thread's wake-up on a shared machine)."""


def test_the_dictation_is_posted_as_a_chat_completion_and_the_answer_delivered(chat_server):
    text = "um so the meeting is, uh, on tuesday\nand er bring the slides"
    cleaned = clean_up(text, Cleanup(url=chat_server.url, model="qwen3:4b"))
    assert cleaned == tidy(text) == "So the meeting is on tuesday\nand bring the slides."
    [request] = chat_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers.get("Content-Type") == "application/json"
    assert request.headers.get("Authorization") is None
    assert request.json == {"model": "qwen3:4b", "messages": [{"role": "system", "content": DEFAULT_PROMPT},
                                                               {"role": "user", "content": text}],
                            "temperature": 0, "stream": False}


def test_an_api_key_is_sent_as_a_bearer_token(chat_server):
    clean_up("hello", Cleanup(url=chat_server.url, api_key="sk-local-123"))
    assert chat_server.requests[0].headers.get("Authorization") == "Bearer sk-local-123"


def test_no_model_name_leaves_model_out_and_the_prompt_is_the_one_set(chat_server):
    clean_up("hello", Cleanup(url=chat_server.url + "/", prompt="Fix the punctuation."))
    [request] = chat_server.requests
    assert request.path == "/v1/chat/completions"
    assert "model" not in request.json
    assert request.json["messages"][0] == {"role": "system", "content": "Fix the punctuation."}


def test_the_text_is_sent_without_its_surrounding_whitespace_which_is_kept(chat_server):
    assert clean_up("  um straße ähm, grüße \n", Cleanup(url=chat_server.url)) == "  Straße ähm, grüße. \n"
    assert chat_server.requests[0].user_text == "um straße ähm, grüße"


@pytest.mark.parametrize("text", ["", "   ", " \n\t"])
def test_blank_text_is_returned_without_a_request(chat_server, text):
    assert clean_up(text, Cleanup(url=chat_server.url)) == text
    assert chat_server.requests == []


def test_a_reasoning_models_thoughts_are_dropped(chat_server):
    chat_server.thoughts = "The user wants punctuation. Maybe they mean: um, is it so?"
    assert clean_up("um so hello", Cleanup(url=chat_server.url)) == "So hello."


def test_thoughts_without_their_opening_tag_are_dropped(chat_server):
    chat_server.reply = lambda text: "Okay, the user dictated a greeting.\n</think>\n" + tidy(text)
    assert clean_up("uh hello there", Cleanup(url=chat_server.url)) == "Hello there."


@pytest.mark.parametrize("quoted", ['"{}"', "“{}”", "'{}'", "  « {} »\n"])
def test_quotes_the_model_wraps_its_answer_in_are_dropped(chat_server, quoted):
    chat_server.reply = lambda text: quoted.format(tidy(text))
    assert clean_up("um hello there", Cleanup(url=chat_server.url)) == "Hello there."


def test_quotes_that_were_dictated_are_kept(chat_server):
    chat_server.reply = lambda text: text
    assert clean_up('"To be or not to be."', Cleanup(url=chat_server.url)) == '"To be or not to be."'
    assert clean_up('"Go," she said, "now"', Cleanup(url=chat_server.url)) == '"Go," she said, "now"'


def test_an_answer_instead_of_a_correction_is_refused(chat_server):
    chat_server.reply = answer_instead
    with pytest.raises(CleanupFailed, match="not a correction of the text"):
        clean_up("what's the time in tokyo", Cleanup(url=chat_server.url))


def test_a_correction_a_little_longer_than_the_text_is_delivered(chat_server):
    chat_server.reply = lambda text: text + "!" * 40
    assert clean_up("hi", Cleanup(url=chat_server.url)) == "hi" + "!" * 40


def test_an_answer_cut_off_at_the_token_limit_is_refused(chat_server):
    chat_server.finish_reason = "length"
    with pytest.raises(CleanupFailed, match="cut off at its token limit"):
        clean_up("um hello", Cleanup(url=chat_server.url))


@pytest.mark.parametrize("reply", ["", "  \n", '""', "<think>still thinking about it"])
def test_an_empty_answer_is_refused(chat_server, reply):
    chat_server.reply = lambda text: reply
    with pytest.raises(CleanupFailed, match="empty answer"):
        clean_up("hello", Cleanup(url=chat_server.url))


@pytest.mark.parametrize("status, model, expected", [
    (401, "m", r"HTTP 401 \(the server said so\): check the API key in Settings\.$"),
    (403, "m", r"HTTP 403 \(the server said so\): check the API key in Settings\.$"),
    (404, "m", r"HTTP 404 \(the server said so\): check that the address in Settings ends in /v1, and the "
               r"model's name\.$"),
    (404, "", r"HTTP 404 .*ends in /v1, and the model's name \(Ollama needs one\)\.$"),
    (400, "", r"HTTP 400 .*set the model's name in Settings \(Ollama needs one\)\.$"),
    (400, "m", r"HTTP 400 \(the server said so\): see the server's log\.$"),
    (500, "m", r"^The cleanup server answered HTTP 500 \(the server said so\): see the server's log\.$"),
])
def test_an_http_error_says_the_status_the_servers_message_and_what_to_check(chat_server, status, model, expected):
    chat_server.status, chat_server.error_message = status, "the server\n said so"
    with pytest.raises(CleanupFailed, match=expected):
        clean_up("hello", Cleanup(url=chat_server.url, model=model))


def test_an_error_without_an_openai_error_body_says_the_status(chat_server):
    chat_server.status, chat_server.body = 502, b"<html>Bad Gateway</html>"
    with pytest.raises(CleanupFailed, match=r"^The cleanup server answered HTTP 502: see the server's log\.$"):
        clean_up("hello", Cleanup(url=chat_server.url))


def test_an_address_without_v1_gets_the_servers_404_and_says_to_check_it(chat_server):
    url = chat_server.url.removesuffix("/v1")
    with pytest.raises(CleanupFailed, match="HTTP 404 .*File Not Found.*ends in /v1"):
        clean_up("hello", Cleanup(url=url, model="m"))


@pytest.mark.parametrize("body", [b"<html>It works!</html>", b'{"choices": []}', b'{"choices": [{"message": {}}]}',
                                  b'{"object": "list", "data": []}', b"[1, 2]"])
def test_an_answer_that_is_not_a_chat_completion_says_to_check_the_address(chat_server, body):
    chat_server.body = body
    with pytest.raises(CleanupFailed, match=f"answer from {chat_server.url} is not a chat completion.*/v1"):
        clean_up("hello", Cleanup(url=chat_server.url))


@pytest.mark.parametrize("slowness", ["delay", "trickle"])
def test_a_slow_server_times_out_within_the_timeout(chat_server, slowness):
    """A server that trickles its answer a byte every 50 ms keeps each socket read short: the timeout is
    the whole exchange's."""
    setattr(chat_server, slowness, 5.0 if slowness == "delay" else 0.05)
    start = time.monotonic()
    with pytest.raises(CleanupFailed, match=r"gave no answer within 0\.5 s, so the text was delivered as dictated"):
        clean_up("um hello there", Cleanup(url=chat_server.url, timeout=0.5))
    assert 0.5 <= time.monotonic() - start < 0.5 + MARGIN
    assert len(chat_server.requests) == 1
    for thread in threading.enumerate():
        if thread.name == "sayso-cleanup":
            thread.join(MARGIN)
            assert not thread.is_alive(), "the abandoned request's thread goes on"


def test_a_server_that_answers_in_time_is_waited_for(chat_server):
    chat_server.delay = 0.2
    assert clean_up("um hello", Cleanup(url=chat_server.url, timeout=2)) == "Hello."


def test_no_server_says_which_address_and_to_start_it():
    with socket.socket() as bound:  # holds a port with nothing listening on it
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}/v1"
        start = time.monotonic()
        with pytest.raises(CleanupFailed, match=f"^Nothing answered at {url}: start the cleanup server .*Settings"):
            clean_up("hello", Cleanup(url=url))
        assert time.monotonic() - start < MARGIN


@pytest.mark.parametrize("url", ["", "127.0.0.1:8080/v1", "ftp://127.0.0.1/v1", "http:///v1", "http://:8080/v1",
                                 "http://127.0.0.1:port/v1", "http://127.0.0.1:99999/v1", "http://local host/v1",
                                 "http://127.0.0.1/v1/ä"])
def test_an_address_that_is_not_http_with_a_host_is_refused(url):
    with pytest.raises(CleanupFailed, match="is not a web address such as http://127.0.0.1:8080/v1: check it"):
        clean_up("hello", Cleanup(url=url))


def test_an_api_key_that_cant_be_a_header_is_refused(chat_server):
    with pytest.raises(CleanupFailed, match="API key has characters"):
        clean_up("hello", Cleanup(url=chat_server.url, api_key="sk-\nX-Injected: 1"))
    assert chat_server.requests == []


def test_a_timeout_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        Cleanup(url="http://127.0.0.1:8080/v1", timeout=0)
