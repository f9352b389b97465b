"""The connection cap's rule (`make_room`) and its shell in uvicorn's protocol (`GuardedH11Protocol`), without
sockets: real uvicorn protocol objects on stand-in transports, so the order of a hang-up and a new connection
is fixed rather than left to the loop. The same cap against real sockets is in test_http_limits.py."""

from __future__ import annotations

import asyncio

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from groove.config import HTTPSettings
from groove.serve.http.connections import Slot, guarded_protocol, make_room
from groove.serve.http.storm import StormLog


def test_the_flooding_address_sheds_its_oldest_idle_connection_first():
    live = [Slot("a", idle=False, since=1.0), Slot("a", idle=True, since=3.0), Slot("a", idle=True, since=2.0),
            Slot("b", idle=True, since=0.5)]
    assert make_room(Slot("c", idle=True, since=9.0), live) == 2


def test_when_the_flooder_is_all_busy_and_holds_more_its_oldest_busy_connection_goes():
    live = [Slot("a", idle=False, since=2.0), Slot("a", idle=False, since=1.0), Slot("b", idle=True, since=0.5)]
    assert make_room(Slot("c", idle=True, since=9.0), live) == 1


def test_a_flooder_connecting_again_with_every_slot_busy_is_refused_itself_and_another_clients_idle_one_stays():
    live = [Slot("a", idle=False, since=1.0), Slot("a", idle=False, since=2.0), Slot("b", idle=True, since=0.5)]
    assert make_room(Slot("a", idle=True, since=9.0), live) is None


def test_on_a_tie_the_newcomers_own_address_gives_way_not_the_other_clients():
    live = [Slot("a", idle=True, since=1.0), Slot("b", idle=True, since=0.5), Slot("b", idle=False, since=0.1)]
    assert make_room(Slot("a", idle=True, since=9.0), live) == 0  # a holds 2 with the newcomer, as b does
    assert make_room(Slot("c", idle=True, since=9.0), [Slot("b", idle=False, since=0.1)]) is None


class _Transport(asyncio.Transport):
    """A stand-in for an accepted socket's transport: its peer, and whether it was closed."""

    def __init__(self, peer: str):
        super().__init__()
        self.peer = peer
        self.closing = False

    def get_extra_info(self, name, default=None):
        return {"peername": (self.peer, 40000), "sockname": ("127.0.0.1", 3100)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True


async def _app(scope, receive, send):  # never called: no request is sent
    raise AssertionError("no request expected")


@pytest.fixture
def connect():
    """Open connections on one server state, as uvicorn's accept loop would; returns their transports."""
    storm = StormLog("http_connections_shed")
    protocol = guarded_protocol(HTTPSettings(max_connections=4), storm)
    config, state = Config(app=_app, log_config=None), ServerState()
    loop = asyncio.new_event_loop()

    def open_one(peer: str, busy: bool = False) -> _Transport:
        transport = _Transport(peer)
        conn = protocol(config=config, server_state=state, app_state={}, _loop=loop)
        conn.connection_made(transport)
        if busy:  # a request in progress (a body trickling in, an event stream open)
            conn.cycle = type("Cycle", (), {"response_complete": False})()
        return transport

    yield open_one
    loop.close()


def test_a_connection_whose_client_already_hung_up_does_not_count_against_the_cap(connect):
    # One address holds the cap: three busy connections and one whose client has just hung up (closing, not
    # yet lost: uvicorn drops it from the server's set a loop turn later). That address's next connection
    # fits in the freed slot: it is not refused, and no busy connection is closed for it. (Counting the
    # closing one refused it: the CI failure of test_http_limits' connection-cap test.)
    held = [connect("127.0.0.8", busy=True) for _ in range(3)] + [connect("127.0.0.8")]
    held[3].closing = True  # its client closed the socket; connection_lost has not run yet
    newcomer = connect("127.0.0.8")
    assert not newcomer.closing and [t.closing for t in held] == [False, False, False, True]


def test_with_every_live_slot_busy_the_flooders_next_connection_is_refused(connect):
    held = [connect("127.0.0.8", busy=True) for _ in range(4)]
    newcomer = connect("127.0.0.8")
    assert newcomer.closing and not any(t.closing for t in held)


def test_past_the_cap_of_live_connections_the_flooders_oldest_idle_one_makes_room(connect):
    held = [connect("127.0.0.8") for _ in range(4)]
    other = connect("127.0.0.9")
    assert not other.closing and [t.closing for t in held] == [True, False, False, False]


def test_one_connection_each_from_many_addresses_never_refuses_a_newcomer_the_oldest_idle_goes():
    live = [Slot(f"127.0.1.{i}", idle=True, since=float(i)) for i in range(1, 255)]
    assert make_room(Slot("127.0.0.1", idle=True, since=999.0), live) == 0  # before: the newcomer was refused


def test_a_stalled_connection_goes_first_whoever_holds_it():
    live = [Slot("a", idle=True, since=1.0), Slot("a", idle=True, since=2.0),
            Slot("b", idle=False, since=3.0, stalled=True),  # a body missing bytes past the grace
            Slot("c", idle=True, since=0.5, stalled=True)]   # connected and sent nothing, past the grace
    assert make_room(Slot("d", idle=True, since=9.0), live) == 3
    busy_trickles = [Slot(f"10.0.0.{i}", idle=False, since=float(i), stalled=True) for i in range(1, 100)]
    assert make_room(Slot("10.0.1.1", idle=True, since=999.0), busy_trickles) == 0


def test_a_clients_new_connection_beside_its_busy_ones_closes_a_flooders_arriving_one_never_its_own():
    # The client holds the most connections (an event stream and a request in flight) while 48 addresses keep one
    # empty connection each, all within the grace: the client's third connection still gets in, and the one
    # closed is the oldest empty connection (before: the client's own address held the most, so it was refused).
    client = [Slot("127.0.0.2", idle=False, since=1.0), Slot("127.0.0.2", idle=False, since=2.0)]
    flood = [Slot(f"127.0.3.{i}", idle=True, since=10.0 - i / 100, arriving=True) for i in range(1, 49)]
    assert make_room(Slot("127.0.0.2", idle=True, since=20.0, arriving=True), client + flood) == len(client) + 47


def test_one_address_with_more_connections_arriving_sheds_its_own_before_a_lone_clients():
    lone = Slot("127.0.0.2", idle=True, since=1.0, arriving=True)  # the oldest arriving, but its address's only one
    flood = [Slot("127.0.0.8", idle=True, since=2.0 + i, arriving=True) for i in range(5)]
    assert make_room(Slot("127.0.0.8", idle=True, since=9.0, arriving=True), [lone, *flood]) == 1
    assert make_room(Slot("127.0.0.3", idle=True, since=9.0, arriving=True), [lone, *flood]) == 1
