"""A GlobalShortcuts portal on a test's private session bus: what xdg-desktop-portal and a desktop
backend (KDE's) do for Sayso, speaking the same D-Bus protocol, with the keys pressed on command.

Run as ``python portal_double.py`` with DBUS_SESSION_BUS_ADDRESS set. It owns
``org.freedesktop.portal.Desktop``, answers ``CreateSession`` / ``BindShortcuts`` through request
objects' ``Response`` signals, and ``Session.Close``. Standard input takes ``activate`` and
``deactivate`` (emitting ``Activated`` / ``Deactivated`` for every bound shortcut); standard output
reports, one JSON line each, ``{"ready": true}``, ``{"bound": [[id, trigger], ...]}`` and
``{"closed": session}``.
"""

from __future__ import annotations

import json
import select
import sys
import time

from jeepney import DBusAddress, HeaderFields, MessageType, message_bus, new_error, new_method_return, new_signal
from jeepney.io.blocking import open_dbus_connection

PORTAL_PATH = "/org/freedesktop/portal/desktop"
INTERFACE = "org.freedesktop.portal.GlobalShortcuts"


def report(**fields) -> None:
    print(json.dumps(fields), flush=True)


def main() -> None:
    connection = open_dbus_connection(bus="SESSION")
    connection.send_and_get_reply(message_bus.RequestName("org.freedesktop.portal.Desktop"))
    bound: list[tuple[str, str]] = []  # (session, shortcut id)
    report(ready=True)

    def respond(sender: str, token: str, results: dict) -> str:
        request = f"{PORTAL_PATH}/request/{sender}/{token}"
        answer = new_signal(DBusAddress(request, interface="org.freedesktop.portal.Request"), "Response",
                            "ua{sv}", (0, results))
        return request, answer

    while True:
        if select.select([sys.stdin], [], [], 0)[0]:
            command = sys.stdin.readline().strip()
            if not command:
                return
            member = {"activate": "Activated", "deactivate": "Deactivated"}[command]
            for session, shortcut in bound:
                connection.send(new_signal(DBusAddress(PORTAL_PATH, interface=INTERFACE), member, "osta{sv}",
                                           (session, shortcut, int(time.monotonic() * 1000), {})))
        try:
            message = connection.receive(timeout=0.05)
        except TimeoutError:
            continue
        if message.header.message_type != MessageType.method_call:
            continue
        fields = message.header.fields
        method, sender = fields[HeaderFields.member], fields[HeaderFields.sender].removeprefix(":").replace(".", "_")
        if method == "Get" and message.body[1] == "version":
            connection.send(new_method_return(message, "v", (("u", 1),)))
        elif method == "CreateSession":
            options = message.body[0]
            session = f"{PORTAL_PATH}/session/{sender}/{options['session_handle_token'][1]}"
            request, answer = respond(sender, options["handle_token"][1], {"session_handle": ("s", session)})
            connection.send(new_method_return(message, "o", (request,)))
            connection.send(answer)
        elif method == "BindShortcuts":
            session, shortcuts, _, options = message.body
            given = [(name, props["preferred_trigger"][1]) for name, props in shortcuts]
            bound.extend((session, name) for name, _ in given)
            report(bound=given)
            results = {"shortcuts": ("a(sa{sv})", [(name, {"trigger_description": ("s", trigger)})
                                                   for name, trigger in given])}
            request, answer = respond(sender, options["handle_token"][1], results)
            connection.send(new_method_return(message, "o", (request,)))
            connection.send(answer)
        elif method == "Close":
            session = fields[HeaderFields.path]
            bound[:] = [b for b in bound if b[0] != session]
            report(closed=session)
            connection.send(new_method_return(message))
        else:
            connection.send(new_error(message, "org.freedesktop.DBus.Error.UnknownMethod", "s", (method,)))


if __name__ == "__main__":
    main()
