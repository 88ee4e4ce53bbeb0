"""Starting the desktop app: ``run_app(argv)`` is what ``sayso`` runs when given no subcommand.

sayso                      open Sayso (or bring the running one to the front)
sayso --toggle             start/stop dictating in the running Sayso (bind this to a desktop shortcut)
sayso --hidden             start in the tray, without the window
sayso FILE...              open audio or video files in the Files page (of the running Sayso, if any)
sayso --screenshots DIR    save PNGs of the main window, the overlay and the Files page, then exit
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The app's options, shared with the ``sayso`` command's parser so ``sayso --help`` lists them."""
    parser.add_argument("--toggle", action="store_true", help="start or stop dictation in the running Sayso, then exit")
    parser.add_argument("--hidden", action="store_true", help="start in the tray without showing the window")
    parser.add_argument("--screenshots", metavar="DIR", type=Path, help="save screenshots of the app in DIR, then exit")
    parser.add_argument(
        "--screenshot-audio",
        metavar="FILE",
        type=Path,
        help="audio transcribed for the Files screenshot (default: your newest dictation)",
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="sayso", description="Hold a key, speak, let go: your words appear where you type."
    )
    add_arguments(parser)
    parser.add_argument("files", nargs="*", type=Path, metavar="FILE", help="audio or video files to transcribe")
    args, unknown = parser.parse_known_args(argv)  # the CLI's own options (-v, ...) pass through
    if unknown:
        log.debug("ignoring options for the CLI: %s", unknown)
    return args


LOG_FORMAT = "%(asctime)s %(name)s: %(message)s"


def _setup_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, datefmt="%H:%M:%S")


def _log_to_file(data_dir: Path) -> None:
    """The running app's log, also kept on disk (rotated) for a bug report; it never holds dictated text,
    and like everything else of the user's in the data folder it is theirs alone (0600), whatever the
    process's umask, which files the user exports keep."""
    from logging.handlers import RotatingFileHandler

    from sayso.app.platform.locations import LOG_BYTES, LOG_FILES, log_file

    class PrivateLog(RotatingFileHandler):
        def _open(self):  # each file it starts, the first and those after a rotation
            fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.fchmod(fd, 0o600)  # also a log an earlier version left readable by others
            return open(fd, "a", encoding=self.encoding, errors=self.errors)

    path = log_file(data_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = PrivateLog(path, maxBytes=LOG_BYTES, backupCount=LOG_FILES, encoding="utf-8")
    except OSError as error:
        log.warning("log: can't write %s (%s); logging to the terminal only", path, error.strerror)
        return
    handler.setFormatter(logging.Formatter(LOG_FORMAT.replace("%(asctime)s", "%(asctime)s.%(msecs)03d"),
                                           datefmt="%Y-%m-%d %H:%M:%S"))
    logging.getLogger().addHandler(handler)


def _data_dir() -> Path:
    """Settings, history and recordings live with the models, in the engine's data folder."""
    from sayso.engine import data_dir

    return Path(data_dir()).expanduser().resolve()


def _toggle(data_dir: Path) -> int:
    from PySide6.QtCore import QCoreApplication

    from sayso.app.platform.instance import send_command

    _app = QCoreApplication.instance() or QCoreApplication(["sayso"])
    if send_command(data_dir, "toggle"):
        return 0
    print(
        "Sayso isn't running. Start it with “sayso”, then “sayso --toggle” starts and stops dictation.", file=sys.stderr
    )
    return 1


def run_command(coordinator, command: str) -> None:
    """A command from a later ``sayso`` (``app.instance``): toggle, show, or open FILE."""
    if command == "toggle":
        coordinator.toggle()
    elif command.startswith("open "):
        coordinator.open_files([command.removeprefix("open ")])
    else:
        coordinator.show_window()


def run_app(argv: list[str] | None = None) -> int:
    """Run the desktop app until it quits; returns the process exit code."""
    args = parse_args(sys.argv[1:] if argv is None else list(argv))
    _setup_logging()
    data_dir = _data_dir()
    if args.toggle:
        return _toggle(data_dir)
    if args.screenshots is not None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # screenshots need no display
    else:
        _log_to_file(data_dir)

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from sayso.app.platform import assets
    from sayso.app.platform.locations import DESKTOP_ID

    from sayso.app.ui import style
    from sayso.app.ui.coordinator import Coordinator
    from sayso.app.platform.instance import InstanceServer, send_command

    app = QApplication.instance() or QApplication(["sayso"])
    app.setApplicationName("Sayso")
    app.setDesktopFileName(DESKTOP_ID)
    app.setWindowIcon(assets.app_icon())
    app.setQuitOnLastWindowClosed(False)  # closing the window leaves Sayso in the tray
    style.apply(app)

    if args.screenshots is not None:
        from sayso.app.ui.screenshots import ScreenshotTour

        coordinator = Coordinator(data_dir)
        tour = ScreenshotTour(coordinator, args.screenshots, args.screenshot_audio)
        coordinator.start(hotkeys=False)
        tour.start()
    else:
        files = [str(path.resolve()) for path in args.files]
        if send_command(data_dir, *(["open " + f for f in files] or ["show"])):
            print("Sayso is already running: " + ("the files are on its Files page." if files else
                                                  "its window was brought to the front."))
            return 0
        server = InstanceServer(data_dir, app)
        server.listen()
        coordinator = Coordinator(data_dir)
        server.command.connect(lambda command: run_command(coordinator, command))
        coordinator.start()
        if files:
            coordinator.open_files(files)
        elif not args.hidden:
            coordinator.show_window()

    # Ctrl+C and SIGTERM quit cleanly; the timer lets Python run its signal handlers during Qt's loop.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: coordinator.quit())
    heartbeat = QTimer()
    heartbeat.timeout.connect(lambda: None)
    heartbeat.start(250)
    code = app.exec()
    coordinator.shutdown()
    return code
