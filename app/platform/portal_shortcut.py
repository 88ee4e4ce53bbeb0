"""Hold-to-talk on Wayland: the shortcut through the XDG GlobalShortcuts portal.

On Wayland no client may watch the keyboard; the desktop's portal (``org.freedesktop.portal.Desktop``,
interface ``org.freedesktop.portal.GlobalShortcuts``) binds a shortcut for the app and tells it when
the keys go down (``Activated``) and up (``Deactivated``). The conversation: ``CreateSession`` and
``BindShortcuts`` each answer with a request object whose ``Response`` signal carries the result
(binding may wait on the user: KDE asks them to confirm), then the two signals arrive for as long as
the session lives; ``Session.Close`` ends it.

A portal that never sends ``Deactivated`` makes the shortcut a toggle: a second ``Activated`` while
held counts as the release. Where there is no portal with this interface (GNOME before 48, wlroots'
portal) ``available()`` says so and the user binds ``sayso --toggle`` instead.

The D-Bus calls go through jeepney on a thread of this object's own: QtDBus, as PySide6 binds it,
can't marshal the ``a(sa{sv})`` the portal takes (a QDBusArgument array of structures needs a
registered C++ type), and the binding's ``Response`` may take as long as the user does.
"""

from __future__ import annotations

import logging
import secrets
import threading

from PySide6.QtCore import QObject, Signal

from sayso.app.platform.keymap import KEYSYM_NAMES

log = logging.getLogger(__name__)

PORTAL_SERVICE = "org.freedesktop.portal.Desktop"
PORTAL_PATH = "/org/freedesktop/portal/desktop"
INTERFACE = "org.freedesktop.portal.GlobalShortcuts"
SHORTCUT_ID = "dictate"
CALL_SECONDS = 5.0  # a portal call's reply (its Response may take longer: the user may be asked)
POLL_SECONDS = 0.2  # how soon the signal thread notices stop()
SIGNAL_BUFFER = 64  # signals kept while the thread is busy (jeepney drops what a full filter can't hold)
_TRIGGER_MODIFIERS = {"ctrl": "CTRL", "alt": "ALT", "shift": "SHIFT", "super": "LOGO"}


def preferred_trigger(chord: frozenset[str]) -> str:
    """A chord as the XDG shortcuts specification writes it: ``CTRL+ALT+space``, ``LOGO+F9``."""
    modifiers = sorted({_TRIGGER_MODIFIERS[k.split("_")[0]] for k in chord if k.split("_")[0] in _TRIGGER_MODIFIERS})
    keys = [KEYSYM_NAMES.get(k, k) for k in chord if k.split("_")[0] not in _TRIGGER_MODIFIERS]
    return "+".join(modifiers + sorted(keys))


def _portal():
    from jeepney import DBusAddress

    return DBusAddress(PORTAL_PATH, bus_name=PORTAL_SERVICE, interface=INTERFACE)


def available() -> bool:
    """Whether the session bus has a portal with the GlobalShortcuts interface (its ``version`` answers)."""
    try:
        from jeepney import Properties
        from jeepney.io.blocking import open_dbus_connection

        with open_dbus_connection(bus="SESSION") as connection:
            reply = connection.send_and_get_reply(Properties(_portal()).get("version"), timeout=CALL_SECONDS)
    except Exception as error:  # noqa: BLE001 - no bus, no portal, a timeout: all mean "not here"
        log.info("portal: no GlobalShortcuts (%s)", error)
        return False
    return reply.header.message_type.name == "method_return"


class PortalShortcut(QObject):
    """Binds a chord through the portal; ``pressed`` / ``released`` as the keys go down and up.

    ``bound(str)`` once the portal has bound it (the trigger it reports, which the desktop may have
    changed), ``failed(str)`` with a message for the user if it couldn't be.
    """

    pressed = Signal()
    released = Signal()
    bound = Signal(str)
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held = False

    def start(self, chord: frozenset[str], description: str) -> None:
        self.stop()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(chord, description, self._stop),
                                        name="portal-shortcut", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self._held = False

    def _run(self, chord: frozenset[str], description: str, stop: threading.Event) -> None:
        from jeepney import MatchRule, message_bus
        from jeepney.io.blocking import Proxy, open_dbus_connection

        try:
            with open_dbus_connection(bus="SESSION") as connection:
                # Listening starts before the binding, so a press right after it is never missed.
                rule = MatchRule(type="signal", interface=INTERFACE, path=PORTAL_PATH)
                Proxy(message_bus, connection).AddMatch(rule)
                with connection.filter(rule, bufsize=SIGNAL_BUFFER) as signals:
                    session = self._bind(connection, chord, description, stop)
                    try:
                        self._listen(connection, signals, session, stop)
                    finally:
                        self._close(connection, session)
        except _Stopped:
            log.info("portal: stopped before the shortcut was bound")
        except Exception as error:  # noqa: BLE001 - shown to the user, whatever the bus said
            log.warning("portal: %s", error)
            self.failed.emit(f"The desktop's shortcut portal refused the shortcut: {error}")

    def _request(self, connection, method: str, signature: str, body: tuple, token: str,
                 stop: threading.Event) -> dict:
        """Call ``method`` (whose options carry ``handle_token`` ``token``, which names its request object)
        and wait for that request's ``Response``; its results, or RuntimeError."""
        from jeepney import MatchRule, message_bus, new_method_call
        from jeepney.io.blocking import Proxy

        sender = connection.unique_name.removeprefix(":").replace(".", "_")
        request = f"{PORTAL_PATH}/request/{sender}/{token}"
        rule = MatchRule(type="signal", interface="org.freedesktop.portal.Request", member="Response", path=request)
        Proxy(message_bus, connection).AddMatch(rule)
        with connection.filter(rule) as responses:  # subscribed before the call, so no answer is missed
            reply = connection.send_and_get_reply(new_method_call(_portal(), method, signature, body),
                                                  timeout=CALL_SECONDS)
            if reply.header.message_type.name == "error":
                raise RuntimeError(f"{method}: {reply.body[0] if reply.body else 'error'}")
            while True:  # the user may take their time over the desktop's dialog; stop() may not
                try:
                    code, results = connection.recv_until_filtered(responses, timeout=POLL_SECONDS).body
                    break
                except TimeoutError:
                    if stop.is_set():
                        raise _Stopped from None
        if code != 0:
            raise RuntimeError(f"{method} was {'cancelled' if code == 1 else 'refused'}")
        return results

    def _bind(self, connection, chord: frozenset[str], description: str, stop: threading.Event) -> str:
        token = _token()
        options = {"handle_token": ("s", token), "session_handle_token": ("s", _token())}
        session = self._request(connection, "CreateSession", "a{sv}", (options,), token, stop)["session_handle"][1]
        shortcut = {"description": ("s", description), "preferred_trigger": ("s", preferred_trigger(chord))}
        token = _token()
        results = self._request(connection, "BindShortcuts", "oa(sa{sv})sa{sv}",
                                (session, [(SHORTCUT_ID, shortcut)], "", {"handle_token": ("s", token)}), token, stop)
        shortcuts = dict(results.get("shortcuts", ("a(sa{sv})", []))[1])
        trigger = shortcuts.get(SHORTCUT_ID, {}).get("trigger_description", ("s", ""))[1]
        log.info("portal: shortcut bound (%s)", trigger or preferred_trigger(chord))
        self.bound.emit(trigger or preferred_trigger(chord))
        return session

    def _listen(self, connection, signals, session: str, stop: threading.Event) -> None:
        from jeepney import HeaderFields

        while not stop.is_set():
            try:
                message = connection.recv_until_filtered(signals, timeout=POLL_SECONDS)
            except TimeoutError:
                continue
            if message.body[:2] == (session, SHORTCUT_ID):
                self._on_signal(message.header.fields[HeaderFields.member])

    def _on_signal(self, member: str) -> None:
        if member == "Activated" and not self._held:
            self._held = True
            self.pressed.emit()
        elif self._held and member in ("Activated", "Deactivated"):  # a second Activated: a portal without releases
            self._held = False
            self.released.emit()

    @staticmethod
    def _close(connection, session: str) -> None:
        from jeepney import DBusAddress, new_method_call

        close = new_method_call(DBusAddress(session, PORTAL_SERVICE, "org.freedesktop.portal.Session"), "Close")
        try:
            connection.send_and_get_reply(close, timeout=CALL_SECONDS)
        except (OSError, TimeoutError) as error:
            log.info("portal: closing the session: %s", error)


class _Stopped(Exception):
    """stop() came while a request waited for its answer."""


def _token() -> str:
    """A fresh handle token: the portal names the request or session object after it."""
    return f"sayso{secrets.token_hex(4)}"
