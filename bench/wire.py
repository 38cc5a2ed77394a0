"""A lean keep-alive HTTP/1.1 client for latency rows: the instrument, not the subject.

The latency suites time one request at a time, so whatever the client itself
spends per request lands in every HTTP row. httpx spends about 0.7 ms of
Python per GET here and `http.client` about 0.25 ms (it parses each head
with the `email` package); this client, one blocking socket with
`TCP_NODELAY` that writes a prepared request and reads the head and a
`content-length` (or chunked) body, spends a few hundredths of a
millisecond. With it an HTTP row measures the server, as a load generator
such as wrk does, and the ratios between HTTP rows and in-process rows are
not inflated by the client. Every HTTP row of a suite uses the same client.

It speaks just enough HTTP for these benchmarks: GET, the answers of
uvicorn and Datasette, a reconnect when a server closes the connection.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

HEAD_END = b"\r\n\r\n"


@dataclass(frozen=True)
class Answer:
    status_code: int
    content: bytes
    headers: dict[str, str]

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class WireClient:
    """GET requests over one keep-alive connection to `base` (http://host:port)."""

    def __init__(self, base: str, headers: dict[str, str] | None = None, timeout: float = 120):
        parts = urlsplit(base)
        self._address = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._host = f"{self._address[0]}:{self._address[1]}"
        self._extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._timeout = timeout
        self._sock: socket.socket | None = None
        self._buffer = b""

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buffer = b""

    def get(self, path: str, params: dict[str, Any] | None = None) -> Answer:
        target = f"{path}?{urlencode(params)}" if params else path
        request = f"GET {target} HTTP/1.1\r\nHost: {self._host}\r\n{self._extra}\r\n".encode()
        reused = self._sock is not None
        try:
            answer, keep = self._exchange(request)
        except ConnectionError:
            if not reused:
                raise
            # the server closed the idle connection (uvicorn after 5 s of
            # keep-alive): a GET is safe to send again on a new one
            self.close()
            answer, keep = self._exchange(request)
        if not keep:
            self.close()
        return answer

    def _exchange(self, request: bytes) -> tuple[Answer, bool]:
        if self._sock is None:
            self._connect()
        assert self._sock is not None
        self._sock.sendall(request)
        return self._read_answer()

    def _connect(self) -> None:
        self._sock = socket.create_connection(self._address, timeout=self._timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _fill(self) -> None:
        assert self._sock is not None
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection mid-answer")
        self._buffer += chunk

    def _take(self, count: int) -> bytes:
        while len(self._buffer) < count:
            self._fill()
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def _line(self) -> bytes:
        while b"\r\n" not in self._buffer:
            self._fill()
        line, _, self._buffer = self._buffer.partition(b"\r\n")
        return line

    def _read_answer(self) -> tuple[Answer, bool]:
        while HEAD_END not in self._buffer:
            self._fill()
        head, _, self._buffer = self._buffer.partition(HEAD_END)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while size := int(self._line().split(b";")[0], 16):
                parts.append(self._take(size))
                self._take(2)
            while self._line():  # trailers, then the empty line
                pass
            body = b"".join(parts)
        else:
            body = self._take(int(headers.get("content-length", "0")))
        keep = headers.get("connection", "").lower() != "close"
        return Answer(int(status_line.split()[1]), body, headers), keep
