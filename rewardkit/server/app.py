"""The reward server's HTTP app: ``create_app(settings)`` returns a FastAPI app.

Everything the app holds lives in a :class:`ServerState` made by :func:`create_app` — no
module-level state — and its Scorers are built in the app's startup from the settings' reward
specs. So the same factory runs under uvicorn (``rewardkit serve``), in tests (one app per
test), or as the ingress of a Ray Serve deployment (``serve.ingress(create_app(settings))``);
if a host skips the startup event, the first request starts the state.

Endpoints: ``POST /v1/score`` (native), ``POST /get_reward`` (OpenRLHF's remote reward
protocol), ``GET /health``, ``GET /v1/rewards``, ``GET /metrics`` (Prometheus).
"""
from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import re
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

from fastapi import FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..dataio import dumps
from ..integrations.openrlhf import openrlhf_result, samples_from_openrlhf
from ..types import Sample, SampleError, Score
from .batching import Batcher, QueueFull
from .config import ServerSettings
from .idempotency import ReplyCache, RequestIdReused
from .limits import GuardMiddleware
from .metrics import ServerMetrics
from .schemas import (HealthResponse, OpenRLHFRequest, OpenRLHFResponse, RewardsResponse,
                      ScoreRequest, ScoreResponse)
from .workers import make_worker

log = logging.getLogger("rewardkit.server")


class RequestError(Exception):
    """A request the server refuses with ``status`` (413, 422, 503 ...)."""

    def __init__(self, status: int, detail: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(str(detail))
        self.status, self.detail, self.headers = status, detail, headers or {}


class ServerState:
    """Batchers, metrics and the idempotency cache of one app."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.metrics = ServerMetrics()
        self.batchers: dict[str, Batcher] = {}
        self.status = "starting"
        self._start_lock: asyncio.Lock | None = None
        self.replies: ReplyCache | None = None

    async def ensure_started(self) -> None:
        if self.status == "ok":
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self.status == "ok":
                return
            s = self.settings
            self.replies = ReplyCache(s.idempotency_cache, s.idempotency_cache_bytes,
                                      self.metrics, s.idempotency_db)
            for name, source in s.rewards.items():
                workers = s.workers_for(source)
                batcher = Batcher(
                    name, make_worker(source, s.concurrency, workers),
                    max_batch_samples=s.max_batch_samples, max_wait_ms=s.max_wait_ms,
                    concurrency=workers or s.concurrency, max_queue_samples=s.max_queue_samples,
                    batch_independent=source.batch_independent, metrics=self.metrics,
                    batch_quantum_s=s.batch_quantum_s)
                await batcher.start()
                self.batchers[name] = batcher
                self.metrics.queue_depth.labels(name).set(0)
            self.status = "ok"

    async def close(self) -> None:
        self.status = "draining"
        for batcher in self.batchers.values():
            await batcher.close()
        if self.replies is not None:
            self.replies.close()
        self.status = "stopped"

    def health(self) -> tuple[str, dict[str, str]]:
        """``ok``, ``degraded`` (a reward cannot score: the reasons by reward), or the state
        while starting and stopping."""
        if self.status != "ok":
            return self.status, {}
        problems = {name: why for name, b in self.batchers.items() if (why := b.problem())}
        return ("degraded" if problems else "ok"), problems

    # -- scoring ---------------------------------------------------------------------------------
    def batcher(self, reward: str | None, field: tuple[str, ...]) -> Batcher:
        name = self.settings.default if reward is None else reward
        batcher = self.batchers.get(name)
        if batcher is None:
            raise RequestError(422, [{
                "loc": list(field), "type": "unknown_reward", "input": name,
                "msg": f"no served reward named {name!r}; served: {sorted(self.batchers)} "
                       "(GET /v1/rewards; leave the field out for the default, "
                       f"{self.settings.default!r})"}])
        return batcher

    def check_size(self, n: int) -> None:
        limit = self.settings.max_request_samples
        if n > limit:
            self.metrics.rejected.labels("too_many_samples").inc()
            raise RequestError(413, f"{n} samples in one request; the limit is {limit} "
                                    "(serve.max_request_samples): split the batch")

    async def score(self, batcher: Batcher, samples: list[Sample | Score]) -> list[Score]:
        """Queue the samples and wait for their Scores; past ``request_timeout_s`` the samples
        still unscored get an error Score with ``error_kind="timeout"``. An entry that is
        already a Score (a sample refused on its own) is answered as it is."""
        todo = [s for s in samples if isinstance(s, Sample)]
        refused = [s for s in samples if isinstance(s, Score)]
        if refused:
            self.metrics.samples.labels(batcher.name).inc(len(refused))
            for sc in refused:
                self.metrics.errors.labels(batcher.name, str(sc.info.get("error_kind"))).inc()
        scored: list[Optional[Score]] = []
        if todo:
            try:
                flow = batcher.submit(todo)
            except QueueFull as exc:
                self.metrics.rejected.labels("queue_full").inc()
                raise RequestError(503, str(exc), {"Retry-After": str(exc.retry_after_s)}) \
                    from None
            try:
                await asyncio.wait([flow.future], timeout=self.settings.request_timeout_s)
            except asyncio.CancelledError:  # the client went away: free the queue
                flow.future.cancel()
                raise
            if not flow.future.done():
                flow.future.cancel()
            scored = list(flow.scores)
            missing = sum(sc is None for sc in scored)
            if missing:
                self.metrics.samples.labels(batcher.name).inc(missing)
                self.metrics.errors.labels(batcher.name, "timeout").inc(missing)
        it = iter(scored)
        out: list[Score] = []
        for s in samples:
            if isinstance(s, Score):
                out.append(s)
                continue
            sc = next(it)
            out.append(sc if sc is not None else Score.from_error(
                f"not scored within the request timeout of {self.settings.request_timeout_s} s "
                "(serve.request_timeout_s)", batcher.error_value, kind="timeout"))
        return out

    async def once(self, key: str | None, fingerprint: bytes,
                   compute: Callable[[], Awaitable[bytes]]) -> bytes:
        """Run ``compute`` once per idempotency key: a retry while the first attempt runs waits
        for it, a retry after it gets its reply; neither scores the samples again."""
        if key is None:
            return await compute()
        assert self.replies is not None
        try:
            return await self.replies.once(key, fingerprint, compute)
        except RequestIdReused:
            raise RequestError(422, [{
                "loc": ["body", "request_id"], "type": "request_id_reused", "input": key,
                "msg": "this request id was used for a different request; use a new id "
                       "per request (retries of the same request keep theirs)"}]) from None


def _lone_surrogate(value: Any) -> bool:
    """True if a string anywhere in ``value`` holds a lone UTF-16 surrogate (JSON's ``\\ud800``
    escape decodes to one): such a string is not text and cannot be encoded as UTF-8."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


_SURROGATE = re.compile("[\ud800-\udfff]")


def sample_or_error(fields: dict[str, Any], error_value: float) -> Sample | Score:
    """A request's sample, or the error Score it gets on its own when it cannot be one (a
    ``null`` completion, a lone surrogate): as ``Scorer.score`` does in Python."""
    if _lone_surrogate(fields):
        bad = next(k for k, v in fields.items() if _lone_surrogate(v))
        return Score.from_error(f"the sample's {bad} holds a lone UTF-16 surrogate (an unpaired "
                                "\\ud800-\\udfff escape), which is not text; fix the "
                                "encoding of that sample", error_value, kind="bad_sample")
    try:
        return Sample.coerce(fields)
    except SampleError as exc:
        return Score.from_error(exc, error_value, kind=SampleError.kind)


def _json(obj: Any) -> bytes:
    """Strict JSON: no ``NaN`` or ``Infinity`` tokens, which other languages' parsers refuse
    (a Score's value is finite — :meth:`Scorer.score` makes a non-finite one an error — but
    its ``info`` is the reward's own: a non-finite number there becomes ``null``)."""
    try:
        return dumps(obj).encode()
    except UnicodeEncodeError:  # a lone surrogate in a Score's info: escape it, stay valid JSON
        return dumps(obj, ensure_ascii=True).encode()


def _validation_message(errors: list[dict[str, Any]]) -> str:
    parts = []
    for e in errors[:5]:
        loc = list(e.get("loc", ()))
        if e.get("type") == "json_invalid":
            where = f" at character {loc[1]}" if len(loc) > 1 else ""
            parts.append(f"the request body is not valid JSON{where}: {e.get('msg')}")
            continue
        parts.append(f"{'.'.join(str(p) for p in loc)}: {e.get('msg')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


async def score_reply(state: ServerState, body: ScoreRequest, raw: bytes,
                      idempotency_key: Optional[str]) -> bytes:
    """The JSON reply of ``POST /v1/score`` to a validated request (its raw body keys the
    idempotency cache)."""
    await state.ensure_started()
    batcher = state.batcher(body.reward, ("body", "reward"))
    state.check_size(len(body.samples))
    samples = [sample_or_error({
        "prompt": s.prompt if isinstance(s.prompt, str) else [m.model_dump() for m in s.prompt],
        "completion": s.completion if s.completion is None or isinstance(s.completion, str)
        else [m.model_dump() for m in s.completion],
        "reference": s.reference, "metadata": s.metadata}, batcher.error_value)
        for s in body.samples]
    key = body.request_id or idempotency_key

    async def compute() -> bytes:
        scores = await state.score(batcher, samples)
        return _json({"scores": [sc.to_dict() for sc in scores], "reward": batcher.name,
                      "request_id": key})

    fingerprint = hashlib.blake2b(raw, digest_size=16).digest()
    return await state.once(key, fingerprint, compute)


def refusal_body(exc: RequestError) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": exc.detail}
    body["error"] = (_validation_message(exc.detail) if isinstance(exc.detail, list)
                     else str(exc.detail))
    return body


class ScoreFastPath:
    """``POST /v1/score`` without FastAPI's routing, dependency solving and request object.

    Behind :class:`~rewardkit.server.limits.GuardMiddleware`, which has read, bounded and
    pre-scanned the body: a body that parses as JSON and validates as a
    :class:`~rewardkit.server.schemas.ScoreRequest` (the same model and the same Python-mode
    validation as the route) is answered here by :func:`score_reply`, the route's own code.
    Anything else — invalid JSON, a field error, an odd ``Idempotency-Key`` header, a query
    string — goes on to the FastAPI route, whose answer (a ``422`` naming the field) is the
    contract. With one sample per request, the framework's layers are most of the event
    loop's work per request, time that competes with the scoring thread for the CPU.
    """

    def __init__(self, app: Any, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if (scope["type"] != "http" or scope["path"] != "/v1/score"
                or scope.get("method") != "POST" or scope.get("query_string")):
            await self.app(scope, receive, send)
            return
        message = await receive()
        parsed = self._parse(scope, message)
        if parsed is None:
            first = [message]

            async def replay() -> dict[str, Any]:
                return first.pop() if first else await receive()

            await self.app(scope, replay, send)
            return
        body, raw, key = parsed
        response: Response
        try:
            response = Response(await score_reply(self.state, body, raw, key),
                                media_type="application/json")
        except RequestError as exc:  # as the app's handler answers it
            response = JSONResponse(refusal_body(exc), exc.status, headers=exc.headers)
        await response(scope, receive, send)

    @staticmethod
    def _parse(scope: dict[str, Any], message: dict[str, Any]
               ) -> tuple[ScoreRequest, bytes, Optional[str]] | None:
        if message.get("type") != "http.request" or message.get("more_body"):
            return None
        keys = [v for k, v in scope["headers"] if k == b"idempotency-key"]
        if len(keys) > 1 or (keys and len(keys[0]) > 200):
            return None
        raw = message.get("body", b"")
        try:
            body = ScoreRequest.model_validate(json.loads(raw))
        except (ValueError, ValidationError):  # JSON or field errors: the route answers them
            return None
        return body, raw, keys[0].decode("latin-1") if keys else None


def create_app(settings: ServerSettings) -> FastAPI:
    """A FastAPI app serving ``settings``' rewards; its Scorers are built at startup."""
    state = ServerState(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.ensure_started()
        try:
            yield
        finally:
            await state.close()

    # A body is read as JSON whatever its content type says (clients that omit it still get
    # field-level 422s); FastAPI releases before the option read it so by default.
    lenient = ({"strict_content_type": False}
               if "strict_content_type" in inspect.signature(FastAPI.__init__).parameters else {})
    app = FastAPI(title="rewardkit reward server", lifespan=lifespan,
                  description="Rewards over HTTP: rewardkit Scorers with dynamic batching.",
                  **lenient)
    app.state.rewardkit = state
    app.add_middleware(ScoreFastPath, state=state)  # inside the guard: limits apply first
    app.add_middleware(GuardMiddleware, token=settings.token,
                       max_body_bytes=settings.max_body_bytes, metrics=state.metrics,
                       max_request_samples=settings.max_request_samples,
                       body_timeout_s=settings.body_timeout_s,
                       max_inflight_body_bytes=settings.inflight_body_budget)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")}
                  for e in exc.errors()]
        for e, raw in zip(errors, exc.errors()):
            if e.get("type") == "json_invalid" and (raw.get("ctx") or {}).get("error"):
                e["msg"] = str(raw["ctx"]["error"])
        return JSONResponse({"detail": errors, "error": _validation_message(errors)}, 422)

    @app.exception_handler(RequestError)
    async def _refused(request: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse(refusal_body(exc), exc.status, headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"detail": exc.detail, "error": str(exc.detail)}, exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.post("/v1/score", response_model=ScoreResponse,
              summary="Score samples with a served reward")
    async def score(body: ScoreRequest, request: Request,
                    idempotency_key: Optional[str] = Header(None, max_length=200)) -> Response:
        return Response(await score_reply(state, body, await request.body(), idempotency_key),
                        media_type="application/json")

    @app.post("/get_reward", response_model=OpenRLHFResponse,
              summary="OpenRLHF's remote reward model protocol")
    async def get_reward(body: OpenRLHFRequest, request: Request,
                         reward: Optional[str] = Query(None, description="served reward name"),
                         idempotency_key: Optional[str] = Header(None, max_length=200)
                         ) -> Response:
        await state.ensure_started()
        batcher = state.batcher(reward, ("query", "reward"))
        state.check_size(len(body.query))
        try:
            samples: list[Sample | Score] = list(samples_from_openrlhf(
                body.query, body.prompts, body.labels))
        except (ValueError, SampleError) as exc:
            raise RequestError(422, [{"loc": ["body", "prompts"], "type": "misaligned",
                                      "msg": str(exc)}]) from None
        samples = [s if isinstance(s, Score) or not _lone_surrogate(
            [s.prompt, s.completion, s.reference]) else sample_or_error(
            {"prompt": s.prompt, "completion": s.completion, "reference": s.reference},
            batcher.error_value) for s in samples]

        async def compute() -> bytes:
            result = openrlhf_result(await state.score(batcher, samples))
            if idempotency_key is not None:
                result["request_id"] = idempotency_key
            return _json(result)

        fingerprint = hashlib.blake2b(await request.body(), digest_size=16).digest()
        return Response(await state.once(idempotency_key, fingerprint, compute),
                        media_type="application/json")

    @app.get("/health", response_model=HealthResponse)
    async def health() -> JSONResponse:
        status, problems = state.health()
        body: dict[str, Any] = {
            "status": status, "rewards": sorted(state.batchers),
            "queued_samples": {n: b.pending for n, b in state.batchers.items()}}
        if problems:
            body["problems"] = problems
        return JSONResponse(body, 200 if status == "ok" else 503)

    @app.get("/v1/rewards", response_model=RewardsResponse)
    async def rewards() -> Response:
        return Response(_json({
            "rewards": [{"name": n, "spec": src.spec, "default": n == settings.default}
                        for n, src in settings.rewards.items()],
            "default": settings.default}), media_type="application/json")

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type=state.metrics.content_type)

    return app
