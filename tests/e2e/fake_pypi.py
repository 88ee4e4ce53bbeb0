"""A real HTTP server on 127.0.0.1 that answers like PyPI's simple index (PEP 691 JSON), with the
files on a second origin as on PyPI (files.pythonhosted.org), served with Range support.

It is ``FakeHub`` with PyPI's front: ``GET /simple/<project>/`` lists the project's files with their
size and sha256, and their addresses on the file server, which is ``FakeHub``'s (``drop_after``,
``corrupt`` and ``requests`` work the same).
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from e2e.fake_hub import FakeHub, QuietHandler
from sayso.engine.convert.pypi import PYPI_ENV, SIMPLE_JSON

_SIMPLE = re.compile(r"^/simple/(?P<project>[^/]+)/$")


class FakePypi(FakeHub):
    """Serves ``files[(project, filename)]``, ``project`` normalised as PyPI does (``moonshine-voice``)."""

    def _front_handler(self):
        fake = self

        class Simple(QuietHandler):
            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path, None))
                match = _SIMPLE.match(self.path)
                listed = [(name, data) for (project, name), data in fake.files.items()
                          if match and project == match["project"]]  # fmt: skip
                if not listed:
                    self.send_error(404)
                    return
                body = json.dumps({
                    "meta": {"api-version": "1.1"},
                    "name": match["project"],
                    "files": [{
                        "filename": name,
                        "url": f"http://127.0.0.1:{fake.cdn.server_port}/blobs/{hashlib.sha256(data).hexdigest()}",
                        "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                        "size": len(data),
                    } for name, data in listed],
                }).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", SIMPLE_JSON)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Simple


@pytest.fixture
def fake_pypi(tmp_path, monkeypatch):
    """The fake PyPI, with Sayso's cache and data folders in tmp_path."""
    server = FakePypi()
    monkeypatch.setenv(PYPI_ENV, server.url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("SAYSO_DATA_DIR", str(tmp_path / "sayso"))
    yield server
    server.close()
