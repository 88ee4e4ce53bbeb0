"""Desktop notifications where there is no tray: ``org.freedesktop.Notifications`` on the session bus.

Errors and "text kept in Sayso" must reach the user even when the window is hidden and the desktop has
no tray (GNOME, most Wayland compositors). The call goes out on a thread of its own: a bus without a
notification daemon may try to start one and answer only at its timeout.
"""

from __future__ import annotations

import logging
import threading

from sayso.app.platform.locations import DESKTOP_ID

log = logging.getLogger(__name__)

SHOWN_MS = 6000  # how long the desktop shows a notification
CALL_SECONDS = 5.0


def send_notification(title: str, message: str) -> None:
    """Ask the desktop's notification daemon to show ``title`` and ``message``; never waits, never raises."""
    threading.Thread(target=_send, args=(title, message), name="notification", daemon=True).start()


def _send(title: str, message: str) -> None:
    try:
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection

        daemon = DBusAddress("/org/freedesktop/Notifications", bus_name="org.freedesktop.Notifications",
                             interface="org.freedesktop.Notifications")
        hints = {"desktop-entry": ("s", DESKTOP_ID), "urgency": ("y", 1)}
        call = new_method_call(daemon, "Notify", "susssasa{sv}i",
                               ("Sayso", 0, "sayso", title, message, [], hints, SHOWN_MS))
        with open_dbus_connection(bus="SESSION") as connection:
            reply = connection.send_and_get_reply(call, timeout=CALL_SECONDS)
        if reply.header.message_type.name == "error":
            log.info("notifications: %s", reply.body[0] if reply.body else "refused")
    except Exception as error:  # noqa: BLE001 - no bus or no daemon: the window's notice still says it
        log.info("notifications: not shown (%s)", error)
