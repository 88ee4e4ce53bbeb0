"""Hold-to-talk on sway: the shortcut as bindings of sway's own, added and watched through its IPC.

sway has no GlobalShortcuts portal, but its IPC (``$SWAYSOCK``, the i3 IPC protocol) lets a client add
bindings at run time and reports each binding it runs. For the chord Sayso adds
``bindsym --no-repeat CHORD nop sayso-press`` and ``bindsym --release CHORD nop sayso-release``: a ``nop``
binding runs nothing and sway swallows its keys, so the focused app never receives the shortcut. A
second connection subscribed to ``binding`` events turns those two commands into ``pressed`` and
``released``. The bindings are removed (``unbindsym`` with the same flags) on ``stop()``, and added again
after the user reloads sway's config (the ``workspace`` event ``reload``), which drops every binding added
at run time.

sway replaces a binding of the same keys without a word, and removing ours later would leave the user's
binding gone: so a chord that sway's config already binds (as ``get_config`` returns the main config file;
bindings in included files and ``bindcode`` ones are not seen) is refused with a message saying what to do.

The protocol is spoken here over a plain socket rather than through the ``i3ipc`` package: Sayso needs
four message types on a 14-byte framing that sway documents (sway-ipc(7)) and keeps stable, while i3ipc
has had no release since 2020, short of the well-kept libraries this project depends on.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import struct
import threading

from PySide6.QtCore import QObject, Signal

from sayso.app.platform.keymap import KEYSYM_NAMES, keysym

log = logging.getLogger(__name__)

MAGIC = b"i3-ipc"
HEADER = struct.Struct("<6sII")  # magic, payload length, message type (little-endian, as sway's host)
RUN_COMMAND, SUBSCRIBE, GET_VERSION, GET_CONFIG = 0, 2, 7, 9
WORKSPACE_EVENT, BINDING_EVENT = 0x80000000, 0x80000005
PRESS_COMMAND, RELEASE_COMMAND = "nop sayso-press", "nop sayso-release"
# The two bindings: sway's flags and the command whose binding event is the press or the release.
BINDINGS = (("--no-repeat", PRESS_COMMAND), ("--release", RELEASE_COMMAND))
CALL_SECONDS = 5.0
_MODIFIERS = {"ctrl": "Ctrl", "alt": "Mod1", "shift": "Shift", "super": "Mod4"}
_SIDED_KEYSYMS = {"ctrl": "Control", "alt": "Alt", "shift": "Shift", "super": "Super"}
# sway's names of modifiers, as a config may write them -> the names sway_combo() writes.
_CONFIG_MODIFIERS = {"control": "ctrl", "ctrl": "ctrl", "alt": "mod1", "mod1": "mod1", "shift": "shift",
                     "super": "mod4", "logo": "mod4", "mod4": "mod4"}  # fmt: skip


def sway_combo(chord: frozenset[str]) -> str:
    """A chord (``app.hotkeys.parse_hotkey``'s names) as sway's ``bindsym`` writes it: ``Ctrl+space``.

    A sided modifier in a chord with other keys becomes the modifier (sway's combinations can't tell the
    sides apart: a modifier's own key isn't one of the keys they match); a chord of modifier keys alone is
    its keys' keysyms (``alt_r`` -> ``Alt_R``), which sway binds as keys. Characters are their keysym
    number, which xkb reads as a name (``0x2c``), except letters and digits, their own names.
    """
    modifier_only = all(k.split("_")[0] in _MODIFIERS for k in chord)
    modifiers, keys = set(), []
    for key in chord:
        base, _, side = key.partition("_")
        if base in _MODIFIERS and not (modifier_only and side):
            modifiers.add(_MODIFIERS[base])
        elif base in _MODIFIERS:
            keys.append(f"{_SIDED_KEYSYMS[base]}_{side.upper()}")
        elif key in KEYSYM_NAMES:
            keys.append(KEYSYM_NAMES[key])
        else:
            keys.append(key if key.isascii() and key.isalnum() else f"0x{keysym(key):x}")
    return "+".join(sorted(modifiers) + sorted(keys))


def _combo_keys(combo: str) -> frozenset[str]:
    """A ``bindsym`` key combination, compared as sway does: modifiers by what they are, keys by name."""
    return frozenset(_CONFIG_MODIFIERS.get(part.lower(), part.lower()) for part in combo.split("+"))


def config_binding(config: str, chord: frozenset[str]) -> str | None:
    """The line of sway's ``config`` text that binds ``chord``'s keys in the default mode, if any.

    ``set $name value`` variables are expanded; bindings inside ``mode`` blocks are another mode's.
    """
    wanted, variables, depth = _combo_keys(sway_combo(chord)), {}, 0
    for raw in config.splitlines():
        line = raw.strip()
        if line.startswith("set ") and len(words := line.split(None, 2)) == 3:
            variables[words[1]] = words[2]
            continue
        expanded = re.sub(r"\$\w+", lambda m: variables.get(m.group(0), m.group(0)), line)
        words = [w for w in expanded.split() if not w.startswith("--")]
        if depth == 0 and len(words) > 2 and words[0] == "bindsym" and _combo_keys(words[1]) == wanted:
            return line
        depth += line.count("{") - line.count("}")
    return None


class SwayIpc:
    """One connection to sway's IPC socket: messages out, replies and events in."""

    def __init__(self, path: str):
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.settimeout(CALL_SECONDS)
        self.socket.connect(path)

    def send(self, kind: int, payload: str = "") -> None:
        data = payload.encode()
        self.socket.sendall(HEADER.pack(MAGIC, len(data), kind) + data)

    def receive(self) -> tuple[int, object]:
        """The next message: its type and its JSON payload. Raises ConnectionError when sway hangs up."""
        magic, length, kind = HEADER.unpack(self._read(HEADER.size))
        if magic != MAGIC:
            raise ConnectionError("sway's IPC sent a message without the i3-ipc magic")
        return kind, json.loads(self._read(length))

    def call(self, kind: int, payload: str = "") -> object:
        self.send(kind, payload)
        return self.receive()[1]

    def command(self, command: str) -> str:
        """Run one sway command; "" when it succeeded, else sway's error."""
        (result,) = self.call(RUN_COMMAND, command)
        return "" if result.get("success") else result.get("error", "refused")

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.socket.recv(size - len(data))
            if not chunk:
                raise ConnectionError("sway closed its IPC socket")
            data += chunk
        return data

    def close(self) -> None:
        self.socket.close()


def available() -> bool:
    """Whether ``$SWAYSOCK`` names a sway that answers on its IPC socket."""
    path = os.environ.get("SWAYSOCK")
    if not path:
        return False
    try:
        ipc = SwayIpc(path)
        try:
            version = ipc.call(GET_VERSION)
        finally:
            ipc.close()
    except (OSError, ValueError) as error:
        log.info("sway: no IPC at SWAYSOCK (%s)", error)
        return False
    return isinstance(version, dict) and "major" in version


class SwayShortcut(QObject):
    """Binds a chord through sway's IPC; ``pressed`` / ``released`` as the keys go down and up.

    ``bound(str)`` with sway's name of the chord once it is bound, ``failed(str)`` with a message for
    the user if it couldn't be. A press while held means sway dropped a release (another key went down
    during the chord, which cancels a ``--release`` binding): it ends the dictation, as a second press
    does for a portal without releases.
    """

    pressed = Signal()
    released = Signal()
    bound = Signal(str)
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._events: SwayIpc | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._held = False

    def start(self, chord: frozenset[str]) -> None:
        self.stop()
        self._stopping = threading.Event()
        combo = sway_combo(chord)
        try:
            # Subscribed before binding, so a press right after it is never missed.
            self._events = SwayIpc(os.environ["SWAYSOCK"])
            if not self._events.call(SUBSCRIBE, json.dumps(["binding", "workspace"])).get("success"):
                raise OSError("sway refused the subscription to binding events")
            self._events.socket.settimeout(None)
        except (KeyError, OSError, ValueError) as error:
            self._close_events()
            self.failed.emit(f"Sayso couldn't reach sway's IPC for the shortcut: {error}")
            return
        self._thread = threading.Thread(target=self._run, args=(combo, chord, self._events),
                                        name="sway-shortcut", daemon=True)  # fmt: skip
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stopping.set()
            try:
                self._events.socket.shutdown(socket.SHUT_RDWR)  # wakes the thread's receive
            except OSError:
                pass  # sway is gone: the thread has ended or is ending
            self._thread.join()
            self._thread = None
        self._close_events()
        self._held = False

    def _close_events(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None

    def _run(self, combo: str, chord: frozenset[str], events: SwayIpc) -> None:
        bound = False
        try:
            commands = SwayIpc(os.environ["SWAYSOCK"])
        except OSError as error:
            self.failed.emit(f"Sayso couldn't reach sway's IPC for the shortcut: {error}")
            return
        try:
            bound = self._bind(commands, combo, chord)
            while bound:
                kind, event = events.receive()
                if kind == BINDING_EVENT:
                    self._on_binding(event.get("binding", {}).get("command", ""))
                elif kind == WORKSPACE_EVENT and event.get("change") == "reload":
                    log.info("sway: config reloaded, which drops the shortcut's bindings")
                    bound = self._bind(commands, combo, chord)
        except (OSError, ValueError) as error:
            if not self._stopping.is_set():
                log.warning("sway: %s", error)
                self.failed.emit(f"sway's IPC stopped answering, so the shortcut is off: {error}")
        finally:
            try:
                if bound:
                    self._unbind(commands, combo)
            finally:
                commands.close()

    def _bind(self, commands: SwayIpc, combo: str, chord: frozenset[str]) -> bool:
        if line := config_binding(commands.call(GET_CONFIG).get("config", ""), chord):
            self.failed.emit(f"sway's config already binds {combo} (“{line}”), and Sayso would take that "
                             "binding over: choose another shortcut in Settings, or remove the binding "
                             "from sway's config and reload sway.")  # fmt: skip
            return False
        for flags, command in BINDINGS:
            if error := commands.command(f"bindsym {flags} {combo} {command}"):
                self._unbind(commands, combo)
                self.failed.emit(f"sway refused the shortcut {combo}: {error}. Choose another shortcut in "
                                 "Settings.")  # fmt: skip
                return False
        log.info("sway: shortcut bound (%s)", combo)
        self.bound.emit(combo)
        return True

    @staticmethod
    def _unbind(commands: SwayIpc, combo: str) -> None:
        """Remove whichever of the two bindings exist (sway answers an error for one that doesn't)."""
        for flags, _ in BINDINGS:
            commands.command(f"unbindsym {flags} {combo}")
        log.info("sway: shortcut unbound (%s)", combo)

    def _on_binding(self, command: str) -> None:
        if command == PRESS_COMMAND and not self._held:
            self._held = True
            self.pressed.emit()
        elif self._held and command in (PRESS_COMMAND, RELEASE_COMMAND):
            self._held = False
            self.released.emit()
