"""Limits enforced before a request reaches its handler: bearer token, ``Host`` header,
content type, body size, body read time, the bytes of scoring bodies held at once over all
connections, and a pre-scan of a scoring request's body (UTF-8, depth, number of samples).

The ``Host`` and content-type checks keep web pages out. A page in a browser on the training
machine may send requests to ``127.0.0.1``: a ``text/plain`` (or untyped) POST goes out without
a CORS preflight, and a page on a domain that re-resolves to ``127.0.0.1`` (DNS rebinding) may
even read the replies. So scoring requires ``Content-Type: application/json`` (which a page can
send only after a preflight this server never grants), and a server without a token answers
only to the ``Host`` names of the address it is bound to (``localhost``, ``127.0.0.1``,
``[::1]`` on loopback) and to ``allowed_hosts``.

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
from typing import Any, Awaitable, Callable, Sequence

from starlette.exceptions import HTTPException

from .config import is_loopback
from .metrics import ServerMetrics
from .prescan import INLINE_BYTES, Refusal, prescan

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
                 max_inflight_body_bytes: int | None = None,
                 allowed_hosts: Sequence[str] = ()) -> None:
        self.app = app
        self.token = token
        if isinstance(allowed_hosts, str) or not all(isinstance(h, str) for h in allowed_hosts):
            raise ValueError(f"serve.allowed_hosts must be a list of host names, got "
                             f"{allowed_hosts!r}")
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)
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
        host = _header(headers, b"host")
        if not self._host_ok(scope, host):
            self.metrics.rejected.labels("wrong_host").inc()
            await _send_json(send, 421, _error(
                f"this server does not answer to Host {host!r}: without a token it answers only "
                "to the names of the address it is bound to (localhost, 127.0.0.1, [::1] on "
                "loopback) and to serve.allowed_hosts; add the name there, or set a token"),
                [(b"connection", b"close")])
            return
        if path in SCORING_PATHS and scope.get("method") == "POST" and not _is_json(
                _header(headers, b"content-type")):
            self.metrics.rejected.labels("not_json").inc()
            await _send_json(send, 415, _error(
                "a scoring request needs 'Content-Type: application/json' (curl: --json, or "
                "-H 'content-type: application/json'); other types are refused so that web "
                "pages cannot post to the server"), [(b"connection", b"close")])
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
        scan = (prescan(body, self.max_request_samples, MAX_DEPTH) if len(body) <= INLINE_BYTES
                else await asyncio.to_thread(prescan, body, self.max_request_samples, MAX_DEPTH))
        if isinstance(scan, Refusal):
            self.metrics.rejected.labels(scan.reason).inc()
            await _send_json(send, scan.status, _error(scan.message))
            return
        parsed = scan.parsed_bytes(len(body))  # what the body will take once parsed
        if parsed > self.max_inflight_body_bytes:
            self.metrics.rejected.labels("parses_too_large").inc()
            await _send_json(send, 413, _error(
                f"the request body of {len(body)} bytes parses to about {parsed} bytes of "
                f"values, more than serve.max_inflight_body_bytes ({self.max_inflight_body_bytes}"
                "); send fewer or larger values per request (many tiny nested values take "
                "tens of times their bytes)"), [(b"connection", b"close")])
            return
        if not held.grow(parsed):
            await self._busy(send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def send_reply(message: Message) -> None:
            if message["type"] == "http.response.start":
                held.release()  # the body is handled; what stays is the reply, one per client
            try:
                await asyncio.wait_for(send(message), self.body_timeout_s)
            except asyncio.TimeoutError:
                self.metrics.rejected.labels("reply_not_read").inc()
                raise ReplyNotRead(f"the client did not read its reply within "
                                   f"{self.body_timeout_s:g} s (serve.body_timeout_s); the "
                                   "connection is closed") from None

        await self.app(scope, replay, send_reply)

    def _host_ok(self, scope: Scope, host: str | None) -> bool:
        """Whether the ``Host`` header names this server: any name in ``allowed_hosts``; with a
        token and no ``allowed_hosts``, any (the token keeps pages out); else the loopback
        names (on a loopback bind) or the bound address itself, with the bound port if it
        names one."""
        if host is None:
            return False
        name, port = _split_host(host.lower())
        if name in self.allowed_hosts or host.lower() in self.allowed_hosts:
            return True
        if self.token is not None and not self.allowed_hosts:
            return True
        bound = scope.get("server")
        if bound is None:  # a Unix socket: only a local client can reach it
            return is_loopback(name)
        bound_host, bound_port = str(bound[0]).lower(), bound[1]
        if port is not None and port != str(bound_port):
            return False
        if is_loopback(bound_host):
            return is_loopback(name)
        return name == bound_host

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


class ReplyNotRead(ConnectionError):
    """A client stopped reading its replies (it pipelines requests and never reads, or its
    window stays shut): the server closes the connection instead of waiting forever."""


class _BodyBudget:
    """The bytes one scoring request holds of :attr:`GuardMiddleware.max_inflight_body_bytes`:
    its declared ``Content-Length`` at once (so a request that cannot fit is refused before its
    body is read), grown if more arrives, released when its reply starts (a client that never
    reads its replies holds no share of the budget while the server waits on it)."""

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


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def _is_json(content_type: str | None) -> bool:
    """``application/json``, parameters (``; charset=utf-8``) allowed."""
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def _split_host(host: str) -> tuple[str, str | None]:
    """``("::1", "8000")`` from ``[::1]:8000``; ``("localhost", None)`` from ``localhost``."""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        return name, rest[1:] if rest.startswith(":") else None
    name, sep, port = host.rpartition(":")
    return (name, port) if sep else (host, None)


def _error(message: str) -> dict[str, str]:
    """A refusal's body: ``error`` (one sentence) and ``detail`` (the same, for FastAPI's
    clients that read ``detail``)."""
    return {"error": message, "detail": message}


def _too_large_message(size: int, limit: int) -> str:
    return (f"request body of {size} bytes exceeds the limit of {limit} bytes "
            "(serve.max_body_bytes); split the samples over several requests")
