"""``RemoteScorer``: a reward served by ``rewardkit serve``, used as a local Scorer.

``rewardkit.load("remote", url="http://rm-host:8000", reward="math")`` works wherever a Scorer
does (``rewardkit score``, ``train``, ``to_trl``, the verl adapter's config). Requests go through
one pooled ``httpx.Client`` (keep-alive connections, shared across threads). Transient failures
(connection refused or reset, read timeouts, 502/503/504) are retried with exponential backoff
and jitter, honouring ``Retry-After``; every attempt of one request carries the same request id,
which the server uses to answer a retry from the first attempt, so a retried request is never
scored or counted twice. When the retries are spent, or the server refuses the request (401,
413, 422), the samples get error Scores that say why — the Scorer contract: no exception.
"""
from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from typing import Any

from ..scorer import Scorer
from ..types import Sample, Score

log = logging.getLogger("rewardkit.server.client")

RETRY_STATUSES = frozenset({502, 503, 504})


class RemoteScorer(Scorer):
    """Scores samples on a ``rewardkit serve`` server.

    Args:
        url: the server's base URL (``http://host:8000``).
        reward: the served reward name (default: the server's default reward).
        token: bearer token, if the server requires one (default: ``$REWARDKIT_TOKEN``).
        timeout: seconds to wait for one response (keep it above the server's
            ``request_timeout_s``, whose expiry returns timeout error Scores instead).
        connect_timeout: seconds to wait for a connection.
        retries: attempts after the first one, on connection errors, timeouts, 502/503/504.
        backoff: first wait between attempts, doubled each time (with jitter), at most
            ``max_backoff``; a ``Retry-After`` header takes precedence.
        chunk_size: samples per request (the server's ``max_request_samples`` bounds it).
        max_connections: size of the connection pool.
        error_value: value of a sample that could not be scored remotely.
    """

    name = "remote"

    def __init__(self, url: str, reward: str | None = None, token: str | None = None,
                 timeout: float = 300.0, connect_timeout: float = 10.0, retries: int = 5,
                 backoff: float = 0.5, max_backoff: float = 30.0, chunk_size: int = 1024,
                 max_connections: int = 32, error_value: float = 0.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http(s) URL of a `rewardkit serve` server, got "
                             f"{url!r}")
        if chunk_size < 1 or retries < 0:
            raise ValueError("chunk_size must be >= 1 and retries >= 0")
        import os

        self.url = url.rstrip("/").removesuffix("/v1/score")
        self.reward = reward
        self.token = token if token is not None else (os.environ.get("REWARDKIT_TOKEN") or None)
        self.timeout, self.connect_timeout = float(timeout), float(connect_timeout)
        self.retries, self.backoff, self.max_backoff = int(retries), float(backoff), max_backoff
        self.chunk_size, self.max_connections = int(chunk_size), int(max_connections)
        self.error_value = error_value
        self._client: Any = None
        self._lock = threading.Lock()

    # -- plumbing --------------------------------------------------------------------------------
    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx

                headers = {"content-type": "application/json"}
                if self.token:
                    headers["authorization"] = f"Bearer {self.token}"
                self._client = httpx.Client(
                    base_url=self.url, headers=headers,
                    timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout),
                    limits=httpx.Limits(max_connections=self.max_connections,
                                        max_keepalive_connections=self.max_connections))
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __getstate__(self) -> dict[str, Any]:  # picklable for worker processes
        state = self.__dict__.copy()
        state["_client"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _wait(self, attempt: int, retry_after: str | None) -> None:
        delay = min(self.max_backoff, self.backoff * 2 ** attempt) * random.uniform(0.5, 1.0)
        if retry_after:
            try:
                delay = min(self.max_backoff, max(delay, float(retry_after)))
            except ValueError:
                pass
        time.sleep(delay)

    # -- scoring ---------------------------------------------------------------------------------
    def score_batch(self, samples: list[Sample]) -> list[Score]:
        out: list[Score] = []
        for i in range(0, len(samples), self.chunk_size):
            out.extend(self._score_chunk(samples[i:i + self.chunk_size]))
        return out

    def _score_chunk(self, samples: list[Sample]) -> list[Score]:
        import httpx

        request_id = uuid.uuid4().hex
        payload: dict[str, Any] = {"samples": [
            {"prompt": s.prompt, "completion": s.completion, "reference": s.reference,
             "metadata": s.metadata} for s in samples], "request_id": request_id}
        if self.reward:
            payload["reward"] = self.reward
        body = json.dumps(payload, default=_fallback).encode()
        client = self._http()
        problem = ""
        for attempt in range(self.retries + 1):
            try:
                response = client.post("/v1/score", content=body)
            except httpx.TransportError as exc:  # refused, reset, timed out: try again
                problem = f"{type(exc).__name__}: {exc}"
                if attempt < self.retries:
                    self._wait(attempt, None)
                continue
            if response.status_code == 200:
                scores = response.json()["scores"]
                if len(scores) != len(samples):
                    return self._errors(samples, f"the server returned {len(scores)} scores for "
                                                 f"{len(samples)} samples", "remote")
                return [_score(d) for d in scores]
            problem = f"HTTP {response.status_code}: {_detail(response)}"
            if response.status_code not in RETRY_STATUSES:
                return self._errors(samples, f"{self.url} refused the request: {problem}",
                                    f"remote_{response.status_code}")
            if attempt < self.retries:
                self._wait(attempt, response.headers.get("retry-after"))
        return self._errors(samples, f"{self.url} unavailable after {self.retries + 1} attempts: "
                                     f"{problem}", "remote_unavailable")

    def _errors(self, samples: list[Sample], message: str, kind: str) -> list[Score]:
        log.warning("%s", message)
        return [Score.from_error(message, self.error_value, kind=kind) for _ in samples]


def _score(d: dict[str, Any]) -> Score:
    return Score(float(d["value"]), dict(d.get("components") or {}), d.get("steps"),
                 d.get("uncertainty"), dict(d.get("info") or {}))


def _detail(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(data, dict):
        return str(data.get("error") or data.get("detail"))[:500]
    return str(data)[:300]


def _fallback(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)
