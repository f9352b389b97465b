"""sd_notify(3) without a dependency: tell systemd how the service is doing.

Under a `Type=notify` unit, systemd passes the address of a datagram socket in
`NOTIFY_SOCKET` and treats the service as started only once it sends
`READY=1`. groove's HTTP server should send:

    notify("READY=1")                  once it accepts connections
    notify("STATUS=indexing 120/800")  optionally, a line for `systemctl status`
    notify("STOPPING=1")               when it begins an orderly shutdown

Outside systemd (a terminal, launchd, tests) `NOTIFY_SOCKET` is unset and
`notify` does nothing and returns False, so callers never need to check where
they run.
"""

from __future__ import annotations

import os
import socket


def notify(state: str, *, env: dict[str, str] | None = None) -> bool:
    """Send `state` (one or more `KEY=VALUE` lines) to the service manager.

    Returns True when the datagram was sent; False when there is no manager
    to tell (`NOTIFY_SOCKET` unset, or an address kind this does not speak)
    or the socket is gone. A failed notification never raises: it must not
    take the service down with it.
    """
    address = (os.environ if env is None else env).get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):
        # Linux abstract namespace: the name starts with a NUL byte, not '@'.
        target = "\0" + address[1:]
    elif address.startswith("/"):
        target = address
    else:
        # `vsock:` (systemd >= 253, for virtual machines) and anything unexpected.
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(state.encode("utf-8"), target)
    except OSError:
        return False
    return True
