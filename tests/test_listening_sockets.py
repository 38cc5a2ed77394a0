"""The listening sockets `serve` binds: a connection whose client vanished
without a word is dropped by the kernel within `UNACKED_MS` (slowconsumer:
a quiet event stream's place was held 15.5 minutes)."""

from __future__ import annotations

import socket

import pytest

from waypost.serving import UNACKED_MS, bind


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="Linux only")
def test_every_accepted_connection_has_the_unacknowledged_bound() -> None:
    (listener,) = bind("127.0.0.1", 0)
    try:
        listener.setblocking(True)
        client = socket.create_connection(listener.getsockname()[:2])
        accepted, _ = listener.accept()
        try:
            option = (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
            assert listener.getsockopt(*option) == UNACKED_MS
            # what serves the client: inherited from the listening socket
            assert accepted.getsockopt(*option) == UNACKED_MS
        finally:
            accepted.close()
            client.close()
    finally:
        listener.close()


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="Linux only")
def test_the_bound_is_never_below_the_request_read_timeout() -> None:
    """A client whose receive window stays shut counts against the bound: at
    60 s it cut a `--request-read-timeout` of 120 s short (review76)."""
    option = (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
    for read_timeout, expected in ((30.0, UNACKED_MS), (120.0, 120_000), (0.5, UNACKED_MS)):
        (listener,) = bind("127.0.0.1", 0, read_timeout)
        try:
            assert listener.getsockopt(*option) == expected
        finally:
            listener.close()
