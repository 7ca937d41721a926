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
import json
import logging
import re
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Optional
from urllib.parse import parse_qsl

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
from .prescan import INLINE_BYTES
from .redact import redacted
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
                    batch_quantum_s=s.batch_quantum_s, batch_timeout_s=s.batch_timeout_s,
                    cost_follows_size=source.runs_model)
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

    return await state.once(key, _fingerprint(b"/v1/score", batcher.name, raw), compute)


async def openrlhf_reply(state: ServerState, body: OpenRLHFRequest, raw: bytes,
                         reward: Optional[str], idempotency_key: Optional[str]) -> bytes:
    """The JSON reply of ``POST /get_reward`` to a validated request."""
    await state.ensure_started()
    batcher = state.batcher(reward, ("query", "reward"))
    state.check_size(len(body.query))
    # Cutting responses out of queries is linear but per byte: off the event loop.
    samples = await asyncio.to_thread(_openrlhf_samples, body, batcher.error_value)

    async def compute() -> bytes:
        result = openrlhf_result(await state.score(batcher, samples))
        if idempotency_key is not None:
            result["request_id"] = idempotency_key
        return _json(result)

    # The reward is part of what was asked: the same body for another reward is another
    # request, never a replay of the first reward's scores.
    fingerprint = _fingerprint(b"/get_reward", batcher.name, raw)
    return await state.once(idempotency_key, fingerprint, compute)


def _fingerprint(path: bytes, reward: str, body: bytes) -> bytes:
    """What an idempotency key stands for: the endpoint, the reward that scores and the body."""
    h = hashlib.blake2b(digest_size=16)
    for part in (path, reward.encode("utf-8", "surrogatepass"), body):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()


def _openrlhf_samples(body: OpenRLHFRequest, error_value: float) -> list[Sample | Score]:
    """The request's samples (a sample that cannot be one is its error Score in its place)."""
    try:
        samples = samples_from_openrlhf(body.query, body.prompts, body.labels, error_value)
    except (ValueError, SampleError) as exc:
        raise RequestError(422, [{"loc": ["body", "prompts"], "type": "misaligned",
                                  "msg": str(exc)}]) from None
    return [s if isinstance(s, Score) or not _lone_surrogate(
        [s.prompt, s.completion, s.reference]) else sample_or_error(
        {"prompt": s.prompt, "completion": s.completion, "reference": s.reference},
        error_value) for s in samples]


def refusal_body(exc: RequestError) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": exc.detail}
    body["error"] = (_validation_message(exc.detail) if isinstance(exc.detail, list)
                     else str(exc.detail))
    return body


class ScoreFastPath:
    """``POST /v1/score`` and ``POST /get_reward`` without FastAPI's routing, dependency solving
    and request object, and with the body parsed off the event loop when it is large.

    Behind :class:`~rewardkit.server.limits.GuardMiddleware`, which has read, bounded and
    pre-scanned the body: a body that parses as JSON and validates as the route's model
    (:class:`~rewardkit.server.schemas.ScoreRequest`, :class:`OpenRLHFRequest`: the same model
    and the same Python-mode validation as the route) is answered here by the route's own code
    (:func:`score_reply`, :func:`openrlhf_reply`). A small body that does not — invalid JSON, a
    field error — and an odd ``Idempotency-Key`` header or query string go on to the FastAPI
    route, whose answer (a ``422`` naming the field) is the contract; a large invalid body gets
    the same ``422`` here, so that the route never parses a large body on the event loop. With
    one sample per request, the framework's layers are most of the event loop's work per
    request, time that competes with the scoring thread for the CPU.
    """

    MODELS = {"/v1/score": ScoreRequest, "/get_reward": OpenRLHFRequest}

    def __init__(self, app: Any, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        model = self.MODELS.get(scope["path"]) if scope["type"] == "http" else None
        reward = _reward_query(scope) if model is not None else _ODD
        if scope.get("method") != "POST" or reward is _ODD:
            await self.app(scope, receive, send)
            return
        message = await receive()
        key = _idempotency_key(scope)
        raw = message.get("body", b"")
        parsed: Any = None
        if message.get("type") == "http.request" and not message.get("more_body") \
                and key is not _ODD:
            parsed = (_validated(model, raw) if len(raw) <= INLINE_BYTES
                      else await asyncio.to_thread(_validated, model, raw))
        if parsed is None or (isinstance(parsed, list) and len(raw) <= INLINE_BYTES):
            first = [message]

            async def replay() -> dict[str, Any]:
                return first.pop() if first else await receive()

            await self.app(scope, replay, send)
            return
        response: Response
        if isinstance(parsed, list):  # a large body's field errors, as the route words them
            response = JSONResponse({"detail": parsed, "error": _validation_message(parsed)},
                                    422)
        else:
            try:
                reply = (await score_reply(self.state, parsed, raw, key)
                         if model is ScoreRequest else
                         await openrlhf_reply(self.state, parsed, raw, reward, key))
                response = Response(reply, media_type="application/json")
            except RequestError as exc:  # as the app's handler answers it
                response = JSONResponse(refusal_body(exc), exc.status, headers=exc.headers)
        await response(scope, receive, send)


_ODD = object()
"""A header or query string the fast path leaves to the route (which refuses or reads it)."""


def _idempotency_key(scope: dict[str, Any]) -> Any:
    keys = [v for k, v in scope["headers"] if k == b"idempotency-key"]
    if len(keys) > 1 or (keys and len(keys[0]) > 200):
        return _ODD
    return keys[0].decode("latin-1") if keys else None


def _reward_query(scope: dict[str, Any]) -> Any:
    """``?reward=NAME`` of ``/get_reward`` (None without a query string); anything else _ODD."""
    query = scope.get("query_string") or b""
    if not query:
        return None
    if scope["path"] != "/get_reward":
        return _ODD
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    if len(pairs) != 1 or pairs[0][0] != "reward":
        return _ODD
    return pairs[0][1]


def _validated(model: Any, raw: bytes) -> Any:
    """``raw`` validated as ``model``, or the route's 422 errors (a list) when it is not."""
    try:
        return model.model_validate(json.loads(raw))
    except json.JSONDecodeError as exc:
        return [{"loc": ["body", exc.pos], "msg": exc.msg, "type": "json_invalid"}]
    except ValidationError as exc:
        return [{"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]}
                for e in exc.errors()]
    except ValueError as exc:
        return [{"loc": ["body"], "msg": str(exc), "type": "value_error"}]


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

    app = FastAPI(title="rewardkit reward server", lifespan=lifespan,
                  description="Rewards over HTTP: rewardkit Scorers with dynamic batching.")
    app.state.rewardkit = state
    app.add_middleware(ScoreFastPath, state=state)  # inside the guard: limits apply first
    app.add_middleware(GuardMiddleware, token=settings.token,
                       max_body_bytes=settings.max_body_bytes, metrics=state.metrics,
                       max_request_samples=settings.max_request_samples,
                       body_timeout_s=settings.body_timeout_s,
                       max_inflight_body_bytes=settings.inflight_body_budget,
                       allowed_hosts=settings.allowed_hosts)

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
        return Response(await openrlhf_reply(state, body, await request.body(), reward,
                                             idempotency_key), media_type="application/json")

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
            "rewards": [{"name": n, "spec": redacted(src.spec), "default": n == settings.default}
                        for n, src in settings.rewards.items()],
            "default": settings.default}), media_type="application/json")

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type=state.metrics.content_type)

    return app
