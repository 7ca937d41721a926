"""uvicorn's HTTP protocol with three limits uvicorn lacks: a header read deadline, a bound on
the size of a request's headers, and a bound on concurrent connections per client address.

uvicorn times out idle keep-alive connections (``timeout_keep_alive``), but a client that sends
its headers a byte at a time, or opens a connection and sends nothing, holds it forever; a few
hundred such clients use up the process's file descriptors and lock every other client out.
uvicorn bounds the size of incomplete headers only under h11 (``h11_max_incomplete_event_size``);
under httptools, the parser it picks when installed, a header of any size is buffered (eight
connections each sending 128 MB of one header line took the server from 115 to 467 MB before the
header deadline cut them). So the protocol class that uvicorn already uses is subclassed through
uvicorn's own ``http=`` hook: each connection must complete a request's headers within
``header_timeout_s`` of opening (or of its previous response, unless a pipelined request is
already in progress) and within ``max_header_bytes`` (else ``431`` and the connection is
closed), and one address may hold at most ``max_connections_per_client`` connections — past it
a new connection is closed at once.
Everything else, parsing included, stays uvicorn's. The body's size and read time are bounded by
:class:`~rewardkit.server.limits.GuardMiddleware`.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from typing import Any

log = logging.getLogger("rewardkit.server")


def headers_too_large_response(max_header_bytes: int) -> bytes:
    """The whole ``431`` reply, written to the socket as is: the request never reached the app
    (its headers were not complete), so there is no ASGI cycle to answer through."""
    message = (f"the request line and headers passed {max_header_bytes} bytes "
               "(serve.max_header_bytes); send smaller headers")
    body = json.dumps({"error": message, "detail": message}).encode()
    return (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n"
            b"connection: close\r\n\r\n" + body)


def guarded_protocol(header_timeout_s: float, max_connections_per_client: int,
                     on_refused: Any = None, max_header_bytes: int = 64 * 1024
                     ) -> type[asyncio.Protocol]:
    """A uvicorn HTTP protocol class with the three limits; pass it as
    ``uvicorn.Config(http=...)``.

    ``on_refused(reason)`` is called for each connection cut (``header_timeout``,
    ``headers_too_large`` or ``too_many_connections``), for metrics."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    per_client: Counter[str] = Counter()
    too_large = headers_too_large_response(max_header_bytes)

    class GuardedProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._rk_host = self.client[0] if self.client else ""
            per_client[self._rk_host] += 1
            self._rk_timer: asyncio.TimerHandle | None = None
            if per_client[self._rk_host] > max_connections_per_client:
                if on_refused:
                    on_refused("too_many_connections")
                transport.abort()
                return
            self._rk_arm()

        def connection_lost(self, exc: Exception | None) -> None:
            per_client[self._rk_host] -= 1
            if per_client[self._rk_host] <= 0:
                del per_client[self._rk_host]
            self._rk_disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._rk_timer is None:
                return  # not waiting for headers: a body, or data after a refusal
            if self.cycle is not self._rk_waiting_after:
                self._rk_disarm()  # a new request's headers are complete
                return
            # Still in a request's line and headers: every byte since the deadline was armed
            # belongs to them (the parser has buffered them).
            self._rk_header_bytes += len(data)
            if self._rk_header_bytes > max_header_bytes and not self.transport.is_closing():
                self._rk_disarm()
                if on_refused:
                    on_refused("headers_too_large")
                self.transport.write(too_large)
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # Wait for the next request's headers only when no pipelined request is already
            # in progress (its headers came in before this response went out): its time and
            # its body bytes are not header time or header bytes.
            idle = self.cycle is None or self.cycle.response_complete
            if idle and not self.transport.is_closing():
                self._rk_arm()

        # -- the header deadline --------------------------------------------------------------
        def _rk_arm(self) -> None:
            self._rk_disarm()
            self._rk_waiting_after = self.cycle
            self._rk_header_bytes = 0
            self._rk_timer = self.loop.call_later(header_timeout_s, self._rk_expired)

        def _rk_disarm(self) -> None:
            if getattr(self, "_rk_timer", None) is not None:
                self._rk_timer.cancel()
                self._rk_timer = None

        def _rk_expired(self) -> None:
            self._rk_timer = None
            if self.cycle is not self._rk_waiting_after or self.transport.is_closing():
                return
            if on_refused:
                on_refused("header_timeout")
            self.transport.abort()

    GuardedProtocol.__name__ = f"Guarded{AutoHTTPProtocol.__name__}"
    return GuardedProtocol
