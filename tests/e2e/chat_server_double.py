"""A stand-in for a language model server: a real HTTP server on 127.0.0.1 (an ephemeral port) that speaks
the OpenAI chat-completions protocol as llama.cpp's server and Ollama do, for the text cleanup's tests.

It answers ``POST /v1/chat/completions`` (``{"model", "messages", "stream": false, ...}``) with a chat
completion (``id``, ``object: "chat.completion"``, ``created``, ``model``, ``choices[0].message.role/content``,
``finish_reason``, ``usage``), and anything else with an OpenAI-style error (``{"error": {"message", "type"}}``):
404 for another path, 400 for a body without messages or one that asks to stream.

Use it as a context manager, or through the ``chat_server`` fixture (each test gets a fresh server),
imported as the other doubles' fixtures are (``from e2e.chat_server_double import chat_server  # noqa: F401``)::

    with ChatServerDouble() as server:
        clean_up("um so hello", Cleanup(url=server.url))       # "So hello."
        server.requests[0].json["messages"]                     # what was sent

``url``: the base URL to configure, ``http://127.0.0.1:<port>/v1``.
``requests``: every request received, in order, as ``ChatRequest`` (``path``, ``headers``, ``body`` bytes,
and ``json`` and ``user_text`` read from it), whatever was answered.

What it answers, settable at any time (the defaults give a prompt, correct answer):

* ``reply``: how the user message becomes the answer's content; ``tidy`` (the default) is a deterministic
  cleanup, ``answer_instead`` a model that answers the text rather than correcting it, or any function.
* ``thoughts``: when set, the content starts with ``<think>{thoughts}</think>`` as a reasoning model's does.
* ``finish_reason``: ``"stop"``, or ``"length"`` for an answer cut off at the token limit.
* ``delay``: seconds to wait before answering at all.
* ``trickle``: seconds between the body's bytes (the status line and headers are sent at once).
* ``status`` and ``error_message``: an error status is answered with ``{"error": {"message": error_message}}``.
* ``body``: bytes sent as the body instead of the chat completion or the error (a malformed answer).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

CHAT_PATH = "/v1/chat/completions"
_POLL_SECONDS = 0.02
"""How often the serving loop looks for a shutdown (the standard 0.5 s would be each test's teardown)."""
FILLER = re.compile(r"[ \t]*,?[ \t]*\b(?:um+|uh+|erm|er)\b[ \t]*,?", re.IGNORECASE)
"""A filler word with the commas and blanks around it: "So, um, I think" → "So I think"."""


def tidy(text: str) -> str:
    """A deterministic cleanup, as a model asked to correct ``text`` might give: filler words (um, uh, er,
    erm) and the commas around them dropped, blanks collapsed (line breaks kept), the first letter a capital,
    and a period at the end where there is no end punctuation."""
    lines = [" ".join(FILLER.sub(" ", line).split()) for line in text.split("\n")]
    tidied = re.sub(r" ([.,!?;:])", r"\1", "\n".join(lines)).strip()
    if not tidied:
        return tidied
    first = next((i for i, c in enumerate(tidied) if c.isalpha()), 0)
    tidied = tidied[:first] + tidied[first].upper() + tidied[first + 1:]
    return tidied if tidied[-1] in ".!?…" else tidied + "."


def answer_instead(text: str) -> str:
    """What a model gives when it answers ``text`` instead of correcting it: a long reply of its own."""
    return (f"Great question! You said: {tidy(text)} Here is a detailed answer, step by step. First, let us "
            "consider the context and what you might mean by it. " * 3).strip()


@dataclass(frozen=True)
class ChatRequest:
    """One request the double received."""

    path: str
    headers: Message
    """Case-insensitive: ``headers.get("Authorization")`` is None when none was sent."""
    body: bytes

    @property
    def json(self):
        """The body as JSON; None where it is not."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def user_text(self) -> str:
        """The content of the last user message."""
        return next(m["content"] for m in reversed(self.json["messages"]) if m["role"] == "user")


class ChatServerDouble:
    """The server; see the module's docstring for its API."""

    def __init__(self):
        self.reply: Callable[[str], str] = tidy
        self.thoughts = ""
        self.finish_reason = "stop"
        self.delay = 0.0
        self.trickle = 0.0
        self.status = 200
        self.error_message = "the double was told to fail"
        self.body: bytes | None = None
        self.requests: list[ChatRequest] = []
        self._closing = threading.Event()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(_POLL_SECONDS,),
                                        name="chat-server-double", daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ChatServerDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._closing.set()  # wakes handlers waiting out a delay or a trickle
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _answer(self, request: ChatRequest) -> tuple[int, bytes]:
        """The status and body for ``request``, from the settings above."""
        if self.body is not None:
            return self.status, self.body
        if self.status >= 400:
            return self.status, _error(self.error_message)
        sent = request.json
        if request.path != CHAT_PATH:
            return 404, _error(f"File Not Found: {request.path}", "not_found_error")
        if not isinstance(sent, dict) or not isinstance(sent.get("messages"), list):
            return 400, _error("'messages' is required")
        if sent.get("stream"):
            return 400, _error("the double does not stream")
        content = self.reply(request.user_text)
        if self.thoughts:
            content = f"<think>\n{self.thoughts}\n</think>\n\n{content}"
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in sent["messages"])
        completion = {
            "id": f"chatcmpl-double-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": sent.get("model") or "double",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": self.finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(content.split()),
                      "total_tokens": prompt_tokens + len(content.split())},
        }
        return self.status, json.dumps(completion).encode()

    def _wait(self, seconds: float) -> bool:
        """Wait ``seconds`` or until the server closes; whether it is closing."""
        return self._closing.wait(seconds)


def _error(message: str, kind: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()


def _handler_for(double: ChatServerDouble) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            request = ChatRequest(self.path, self.headers, body)
            double.requests.append(request)
            if double._wait(double.delay):
                return
            status, answer = double._answer(request)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                self._send(answer)
            except ConnectionError:
                pass  # the client gave up, as it should on a slow server

        def _send(self, answer: bytes) -> None:
            if not double.trickle:
                self.wfile.write(answer)
                return
            for byte in answer:
                self.wfile.write(bytes([byte]))
                if double._wait(double.trickle):
                    return

        def log_message(self, format, *args):
            pass  # the tests' output is for their failures

    return Handler


@pytest.fixture
def chat_server():
    """A running ``ChatServerDouble``, closed after the test."""
    with ChatServerDouble() as server:
        yield server
