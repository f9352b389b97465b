"""Connections from many loopback addresses, each reopened whenever the server closes it: the flood of issue 36,
point 1, shared by tests/test_http_limits.py and `python -m bench hostile --http` (probe 6). Every address of
127.0.0.0/8 is a source on Linux, so one process can stand for hundreds of hosts."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable


def connect_from(port: int, source: str, timeout: float = 10.0) -> socket.socket:
    """A TCP connection to 127.0.0.1:`port` from the loopback address `source`, sending nothing."""
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def still_open(s: socket.socket, wait_s: float = 0.05) -> bool:
    """Still open from the server's side (nothing to read within `wait_s`, or data but no close)."""
    if not select.select([s], [], [], wait_s)[0]:
        return True
    try:
        return s.recv(4096, socket.MSG_PEEK) != b""
    except OSError:
        return False


def loopback_sources(count: int) -> list[str]:
    """`count` distinct loopback addresses from 127.0.3.1 on (127.0.0.x is left to the clients probing)."""
    return [f"127.0.{3 + i // 250}.{1 + i % 250}" for i in range(count)]


class AddressFlood:
    """One connection from each of `count` loopback addresses, opened by `opener(port, source)`; `refill()`
    reopens those the server closed and hands the ones still open to `keep` (e.g. to trickle a byte)."""

    def __init__(
        self,
        port: int,
        count: int,
        opener: Callable[[int, str], socket.socket] = connect_from,
        wait_s: float = 0.05,
    ):
        self.port, self.opener, self.wait_s = port, opener, wait_s
        self.sources = loopback_sources(count)
        self.socks: dict[str, socket.socket] = {}

    def refill(self, keep: Callable[[socket.socket], None] | None = None) -> int:
        """Reopen every connection the server closed (or never let in); the number opened."""
        opened = 0
        for source in self.sources:
            s = self.socks.get(source)
            if s is not None and still_open(s, self.wait_s):
                if keep is not None:
                    keep(s)
                continue
            if s is not None:
                s.close()
            try:
                self.socks[source] = self.opener(self.port, source)
                opened += 1
            except OSError:
                self.socks.pop(source, None)
        return opened

    def close(self) -> None:
        for s in self.socks.values():
            s.close()
        self.socks.clear()


def handshakes_at_once(url: str, count: int, headers: dict, body: dict) -> list[int]:
    """`count` MCP `initialize` requests (`body`) sent at the same moment, each on a connection of its own:
    their HTTP statuses, 0 for none (issue 36, point 3: handshakes racing at the session cap)."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    def handshake(_: int) -> int:
        with httpx.Client(headers=headers, timeout=30) as own:
            try:
                return own.post(url, json=body).status_code
            except httpx.HTTPError:
                return 0  # the connection closed, or no answer

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(handshake, range(count)))


def whole_requests_at_once(port: int, source: str, request: bytes, count: int, body_after_s: float = 0.0) -> list[bytes]:
    """`count` connections from `source`, each sending the whole `request` (with `Connection: close`) before any
    answer is read, as a burst of local agents does: each answer's status line, b"" for none (issue 36, point 2).
    With `body_after_s`, every request's headers go first and the bodies that long after, as a server on busy
    cores sees the requests of many clients in one process."""
    socks = [connect_from(port, source, timeout=60) for _ in range(count)]
    head, sep, body = request.partition(b"\r\n\r\n")
    statuses = []
    try:
        if body_after_s:
            for s in socks:
                s.sendall(head + sep)
            time.sleep(body_after_s)
        for s in socks:  # every request whole before any answer is read
            s.sendall(body if body_after_s else request)
        for s in socks:
            answer = b""
            try:
                while chunk := s.recv(65536):
                    answer += chunk
            except OSError:
                pass
            statuses.append(answer.split(b"\r\n", 1)[0])
    finally:
        for s in socks:
            s.close()
    return statuses
