"""Limits enforced before a request reaches its handler: bearer token, body size, body read
time, the bytes of scoring bodies held at once over all connections, and a pre-scan of a
scoring request's body (UTF-8, depth, number of samples).

Written as a plain ASGI middleware (not Starlette's ``BaseHTTPMiddleware``) so that it can refuse
a request from its headers alone, before a byte of an oversized body is read, and so that it
adds no task per request. A scoring request's body is read here, within ``body_timeout_s`` and
``max_body_bytes``, checked by :func:`~rewardkit.server.prescan.prescan`, and handed on as is.
It also counts requests by endpoint and status and times them.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import time
from typing import Any, Awaitable, Callable

from starlette.exceptions import HTTPException

from .metrics import ServerMetrics
from .prescan import prescan

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/health"})
"""Paths that answer without a token (load balancers and orchestrators probe them)."""

KNOWN_PATHS = frozenset({"/v1/score", "/get_reward", "/health", "/v1/rewards", "/metrics"})
SCORING_PATHS = frozenset({"/v1/score", "/get_reward"})

MAX_DEPTH = 64
"""Deepest nesting a scoring request may have (a sample's reference and metadata included)."""


def token_matches(headers: list[tuple[bytes, bytes]], token: str) -> bool:
    """``Authorization: Bearer <token>`` (or ``X-API-Key: <token>``, as OpenRLHF's own reward
    server accepts), compared in constant time."""
    expected = token.encode()
    for name, value in headers:
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            if hmac.compare_digest(value[7:].strip(), expected):
                return True
        elif name == b"x-api-key" and hmac.compare_digest(value.strip(), expected):
            return True
    return False


async def _send_json(send: Send, status: int, body: dict[str, Any],
                     headers: list[tuple[bytes, bytes]] = ()) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode()), *headers]})
    await send({"type": "http.response.body", "body": payload})


class GuardMiddleware:
    """Auth, body-size limit and request metrics, in front of the app."""

    def __init__(self, app: ASGIApp, *, token: str | None, max_body_bytes: int,
                 metrics: ServerMetrics, max_request_samples: int = 8192,
                 body_timeout_s: float = 60.0,
                 max_inflight_body_bytes: int | None = None) -> None:
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes
        self.max_request_samples = max_request_samples
        self.body_timeout_s = body_timeout_s
        self.metrics = metrics
        # One request's limit bounds one body; this bounds them all together: a few hundred
        # connections each sending a body just under max_body_bytes would otherwise hold
        # hundreds of times that (32 bodies of 30 MB took a server to 3 GB).
        self.max_inflight_body_bytes = (max_inflight_body_bytes if max_inflight_body_bytes
                                        is not None else 16 * max_body_bytes)
        self.inflight_body_bytes = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        endpoint = path if path in KNOWN_PATHS else "other"
        started = time.perf_counter()
        status_box = [500]

        async def send_counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_box[0] = message["status"]
            await send(message)

        try:
            await self._guarded(scope, receive, send_counted, path)
        finally:
            self.metrics.requests.labels(endpoint, str(status_box[0])).inc()
            self.metrics.request_latency.labels(endpoint).observe(time.perf_counter() - started)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        headers = scope["headers"]
        if self.token is not None and path not in OPEN_PATHS and not token_matches(headers,
                                                                                    self.token):
            self.metrics.rejected.labels("unauthorized").inc()
            await _send_json(send, 401, _error("missing or wrong bearer token: send "
                                               "'Authorization: Bearer <token>'"),
                             [(b"www-authenticate", b"Bearer")])
            return
        limit = self.max_body_bytes
        declared: int | None = None
        for name, value in headers:
            if name == b"content-length":
                try:
                    declared = max(0, int(value))
                except ValueError:
                    declared = 0
                if declared > limit:
                    await self._too_large(send, declared)
                    return
        if path in SCORING_PATHS and scope.get("method") == "POST":
            held = _BodyBudget(self, declared if declared is not None else 0)
            try:
                if not held.ok:
                    await self._busy(send)
                    return
                await self._read_checked(scope, receive, send, held)
            finally:
                held.release()
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    self.metrics.rejected.labels("body_too_large").inc()
                    raise HTTPException(413, _too_large_message(received, limit))
            return message

        await self.app(scope, limited_receive, send)

    async def _read_checked(self, scope: Scope, receive: Receive, send: Send,
                            held: "_BodyBudget") -> None:
        """Read the whole body (bounded in bytes and time, and by what all bodies held at once
        may take), pre-scan it, then run the app on it; later ``receive`` calls go to the
        client's (so a disconnect is still seen)."""
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + self.body_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                self.metrics.rejected.labels("body_timeout").inc()
                await _send_json(send, 408, _error(
                    f"the request body was not received within {self.body_timeout_s:g} s "
                    "(serve.body_timeout_s); send it at once"), [(b"connection", b"close")])
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._too_large(send, size)
                return
            if not held.grow(size):  # a body longer than declared, or sent without a length
                await self._busy(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        refusal = prescan(body, self.max_request_samples, MAX_DEPTH)
        if refusal is not None:
            self.metrics.rejected.labels(refusal.reason).inc()
            await _send_json(send, refusal.status, _error(refusal.message))
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _busy(self, send: Send) -> None:
        self.metrics.rejected.labels("bodies_in_flight").inc()
        await _send_json(send, 503, _error(
            f"the server holds {self.inflight_body_bytes} bytes of request bodies, near its "
            f"limit of {self.max_inflight_body_bytes} (serve.max_inflight_body_bytes); retry "
            "after a second, or send smaller requests"),
            [(b"retry-after", b"1"), (b"connection", b"close")])

    async def _too_large(self, send: Send, size: int) -> None:
        self.metrics.rejected.labels("body_too_large").inc()
        await _send_json(send, 413, _error(_too_large_message(size, self.max_body_bytes)),
                         [(b"connection", b"close")])


class _BodyBudget:
    """The bytes one scoring request holds of :attr:`GuardMiddleware.max_inflight_body_bytes`:
    its declared ``Content-Length`` at once (so a request that cannot fit is refused before its
    body is read), grown if more arrives, released when its reply has been sent."""

    def __init__(self, guard: GuardMiddleware, declared: int) -> None:
        self.guard = guard
        self.bytes = 0
        self.ok = self.grow(declared)

    def grow(self, size: int) -> bool:
        """Hold ``size`` bytes in all (no change when it already holds as many); False when
        that would pass the budget."""
        extra = size - self.bytes
        if extra <= 0:
            return True
        guard = self.guard
        if guard.inflight_body_bytes + extra > guard.max_inflight_body_bytes:
            return False
        guard.inflight_body_bytes += extra
        self.bytes = size
        guard.metrics.inflight_body_bytes.set(guard.inflight_body_bytes)
        return True

    def release(self) -> None:
        self.guard.inflight_body_bytes -= self.bytes
        self.bytes = 0
        self.guard.metrics.inflight_body_bytes.set(self.guard.inflight_body_bytes)


def _error(message: str) -> dict[str, str]:
    """A refusal's body: ``error`` (one sentence) and ``detail`` (the same, for FastAPI's
    clients that read ``detail``)."""
    return {"error": message, "detail": message}


def _too_large_message(size: int, limit: int) -> str:
    return (f"request body of {size} bytes exceeds the limit of {limit} bytes "
            "(serve.max_body_bytes); split the samples over several requests")
