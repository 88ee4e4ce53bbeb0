"""A real HTTP server on 127.0.0.1 that answers like the Hugging Face hub, and pytest fixtures over it.

The server is two ``http.server`` instances, as on the real hub: the hub port answers
``HEAD/GET /{repo}/resolve/{revision}/{file}`` with a 302 carrying ``X-Repo-Commit``, ``X-Linked-Etag``
(the sha256) and ``X-Linked-Size``, and sends the bytes' address on the other port (another origin,
like the hub's CDN), which serves them with Range support. huggingface_hub is the client, unmodified.

Import the fixtures a test module uses by name (``from e2e.fake_hub import fake_hub, gguf_bytes``).
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from huggingface_hub import constants

from sayso.engine import hub
from sayso.engine.gguf.writer import Meta, TensorOut, write_gguf

COMMIT = "0123456789abcdef0123456789abcdef01234567"
CHUNK = constants.DOWNLOAD_CHUNK_SIZE  # huggingface_hub writes what it receives in pieces of this size
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<file>[^?]+)$")


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that keeps the test output free of its access log."""

    def log_message(self, *args) -> None:
        pass


class FakeHub:
    """Serves ``files[(repo_id, filename)]``; ``requests`` records (method, path, Range header).

    ``drop_after``: the next GET of a file sends that many bytes, then closes the connection.
    ``stall_after``: every GET sends that many bytes, then waits until ``release`` is set.
    ``corrupt``: the bytes sent differ from the advertised sha256 (same length).
    """

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], bytes] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.drop_after: int | None = None
        self.stall_after: int | None = None
        self.release = threading.Event()
        self.corrupt = False
        self.front = self._serve(self._front_handler())
        self.cdn = self._serve(self._cdn_handler())
        self.url = f"http://127.0.0.1:{self.front.server_port}"

    def add(self, repo_id: str, filename: str, data: bytes) -> None:
        self.files[(repo_id, filename)] = data

    def gets(self) -> list[tuple[str, str, str | None]]:
        """The requests for file bytes (huggingface_hub also asks the hub for other things, e.g. telemetry)."""
        return [r for r in self.requests if r[1].startswith("/blobs/")]

    def close(self) -> None:
        self.release.set()
        for server in (self.front, self.cdn):
            server.shutdown()
            server.server_close()

    @staticmethod
    def _serve(handler) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def _front_handler(self):
        fake = self

        class Front(QuietHandler):
            def do_HEAD(self) -> None:
                self._resolve()

            def do_GET(self) -> None:
                self._resolve()

            def _resolve(self) -> None:
                fake.requests.append((self.command, self.path, self.headers.get("Range")))
                match = _RESOLVE.match(self.path)
                data = match and fake.files.get((match["repo"], match["file"]))
                if data is None:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("X-Repo-Commit", COMMIT)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                sha = hashlib.sha256(data).hexdigest()
                self.send_response(302)
                self.send_header("Location", f"http://127.0.0.1:{fake.cdn.server_port}/blobs/{sha}")
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("X-Linked-Etag", f'"{sha}"')
                self.send_header("X-Linked-Size", str(len(data)))
                self.send_header("ETag", '"git-object-id-of-the-lfs-pointer"')
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Front

    def _cdn_handler(self):
        fake = self

        class Cdn(QuietHandler):
            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path, self.headers.get("Range")))
                sha = self.path.rsplit("/", 1)[-1]
                data = next((d for d in fake.files.values() if hashlib.sha256(d).hexdigest() == sha), None)
                if data is None:
                    self.send_error(404)
                    return
                if fake.corrupt:
                    data = bytes([data[0] ^ 0xFF]) + data[1:]
                start = int(re.match(r"bytes=(\d+)-", self.headers.get("Range") or "bytes=0-")[1])
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                cut = next((n for n in (fake.drop_after, fake.stall_after) if n is not None), None)
                if cut is None:
                    self.wfile.write(body)
                    return
                self.wfile.write(body[:cut])
                if fake.drop_after is not None:
                    fake.drop_after = None  # once: the retry gets the rest
                else:
                    fake.release.wait(30)
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

        return Cdn


@pytest.fixture(scope="module")
def gguf_bytes(tmp_path_factory) -> bytes:
    """A real GGUF file of 2.5 chunks, so an interrupted transfer leaves whole chunks on disk."""
    path = tmp_path_factory.mktemp("gguf") / "model.gguf"
    values = np.random.default_rng(0).standard_normal(CHUNK * 5 // 8).astype(np.float32)
    write_gguf(path, "whisper", [Meta("general.name", "STRING", "hub test")], [TensorOut("weights", values, "F32")])
    return path.read_bytes()


@pytest.fixture
def fake_hub(gguf_bytes, tmp_path, monkeypatch):
    """The fake hub serving the Q8_0 file of whisper-tiny.en and moonshine-tiny; the cache and data in tmp_path."""
    server = FakeHub()
    for name in ("whisper-tiny.en", "moonshine-tiny"):
        model = hub.CATALOG[name]
        server.add(model.repo_id, model.filename, gguf_bytes)
    # huggingface_hub reads HF_ENDPOINT once, at import, into these two; this process imported it already.
    monkeypatch.setattr(constants, "ENDPOINT", server.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setenv("HF_ENDPOINT", server.url)  # for the `sayso` processes the tests start
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("SAYSO_DATA_DIR", str(tmp_path / "sayso"))
    yield server
    server.close()
