"""One Sayso per user and data folder, reachable by ``sayso --toggle`` through a local socket.

The running app listens on a QLocalServer; a second ``sayso`` connects, sends its command lines ("show",
"toggle", or "open PATH" for each file the desktop opens with Sayso) and exits. This is also how Wayland
users get a global shortcut: the desktop runs ``sayso --toggle``. The server name includes a hash of the
data folder, so a test instance with its own folder never answers for the user's real one.
"""

from __future__ import annotations

import getpass
import hashlib
import logging
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from sayso.app.platform.locations import runtime_dir
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

COMMANDS = ("show", "toggle")
OPEN = "open "  # followed by an absolute path
_TIMEOUT_MS = 1000


def server_name(data_dir: Path) -> str:
    """The socket's name: a path in ``$XDG_RUNTIME_DIR`` where the session has one, else a name Qt
    places in the temporary folder."""
    digest = hashlib.sha1(str(Path(data_dir).resolve()).encode()).hexdigest()[:10]
    name = f"sayso-{getpass.getuser()}-{digest}"
    runtime = runtime_dir()
    return str(runtime / name) if runtime else name


def send_command(data_dir: Path, *commands: str) -> bool:
    """Send ``commands`` to the running instance; False when none is running (no Qt event loop needed)."""
    socket = QLocalSocket()
    socket.connectToServer(server_name(data_dir))
    if not socket.waitForConnected(_TIMEOUT_MS):
        return False
    socket.write(b"".join(command.encode() + b"\n" for command in commands))
    ok = socket.waitForBytesWritten(_TIMEOUT_MS)
    socket.disconnectFromServer()
    return ok


class InstanceServer(QObject):
    """Listens for commands from later ``sayso`` invocations and emits them as ``command``."""

    command = Signal(str)

    def __init__(self, data_dir: Path, parent: QObject | None = None):
        super().__init__(parent)
        self._server = QLocalServer(self)
        self._server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self._server.newConnection.connect(self._accept)
        self._name = server_name(data_dir)

    def listen(self) -> bool:
        """Start listening; a socket left by a crashed instance is removed first. False if that fails."""
        QLocalServer.removeServer(self._name)
        if not self._server.listen(self._name):
            log.warning("instance: can't listen on %s: %s", self._name, self._server.errorString())
            return False
        return True

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while self._server.hasPendingConnections():
            socket = self._server.nextPendingConnection()
            socket.readyRead.connect(self._on_ready_read)
            socket.disconnected.connect(socket.deleteLater)
            self._read(socket)  # the line may have arrived already

    def _on_ready_read(self) -> None:
        self._read(self.sender())

    def _read(self, socket: QLocalSocket) -> None:
        while socket.canReadLine():
            command = bytes(socket.readLine()).decode(errors="replace").strip()
            if command in COMMANDS or command.startswith(OPEN):
                self.command.emit(command)
            else:
                log.warning("instance: unknown command %r", command)
