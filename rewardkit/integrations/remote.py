"""``RemoteScorer``: a reward served by ``rewardkit serve``, used as a local Scorer.

``rewardkit.load("remote", url="http://rm-host:8000", reward="math")`` works wherever a Scorer
does (``rewardkit score``, ``train``, ``to_trl``, the verl and OpenRLHF adapters' configs).
Requests go through one pooled ``httpx.Client`` (keep-alive connections, shared across threads).

**Never a made-up reward.** Transient failures (connection refused or reset, read timeouts,
502/503/504) are retried with exponential backoff and jitter, honouring ``Retry-After``, for at
most ``retry_for`` seconds; then :class:`RemoteRewardError` is raised. A refused request (401,
422) raises it at once. A trainer thus stops with the reason instead of learning from
rewards that were never computed. Samples the server did score, even as errors (bad input, a
timeout of one sample), come back as their Scores. A request over the server's limits (413:
too many bytes or samples) is split in halves and sent again, down to one sample; one sample
still too large is its own error Score (``error_kind="too_large"``). A Score with a NaN or
infinite number is an error Score here too, as in :meth:`Scorer.score`.

**Retried, counted once.** Every attempt of one request carries the same request id, which the
server uses to answer a retry from the first attempt; the reply carries the id back and a reply
for another id is refused, so one request's scores are taken once.
"""
from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import uuid
from typing import Any, Sequence

from rewardkit.integrations.wire import json_default, sample_to_json, score_from_json
from rewardkit.scorer import Scorer, finite_or_error
from rewardkit.types import Sample, SampleError, Score

log = logging.getLogger("rewardkit.remote")

RETRY_STATUSES = frozenset({502, 503, 504})


class RemoteRewardError(RuntimeError):
    """The reward server did not score a request: unreachable past ``retry_for``, or it refused
    the request. Raised, never turned into rewards."""


class RemoteScorer(Scorer):
    """Scores samples on a ``rewardkit serve`` server.

    Args:
        url: the server's base URL (``http://host:8000``).
        reward: the served reward name (default: the server's default reward).
        token: bearer token, if the server requires one (default: ``$REWARDKIT_TOKEN``).
        timeout: seconds one attempt may take in all, from sending the request to the last
            byte of the reply (keep it above the server's ``request_timeout_s``, whose expiry
            returns timeout error Scores instead). A server that answers slower, even one that
            trickles a byte now and then, fails the attempt, which is retried like a lost
            connection within ``retry_for``.
        connect_timeout: seconds to wait for a connection.
        retry_for: seconds during which transient failures are retried; past them
            :class:`RemoteRewardError` is raised.
        retries: most attempts after the first (None: as many as ``retry_for`` allows).
        backoff: first wait between attempts, doubled each time (with jitter), at most
            ``max_backoff``; a ``Retry-After`` header takes precedence.
        chunk_size: samples per request (the server's ``max_request_samples`` bounds it).
        max_connections: size of the connection pool.
        error_value: value of a sample the scorer itself refuses (not a dict or Sample).
    """

    name = "remote"

    def __init__(self, url: str, reward: str | None = None, token: str | None = None,
                 timeout: float = 300.0, connect_timeout: float = 10.0,
                 retry_for: float = 120.0, retries: int | None = None, backoff: float = 0.5,
                 max_backoff: float = 30.0, chunk_size: int = 1024, max_connections: int = 32,
                 error_value: float = 0.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http(s) URL of a `rewardkit serve` server, got "
                             f"{url!r}")
        if chunk_size < 1 or (retries is not None and retries < 0) or retry_for < 0:
            raise ValueError("chunk_size must be >= 1, retries >= 0 and retry_for >= 0")
        self.url = url.rstrip("/").removesuffix("/v1/score")
        self.reward = reward
        self.token = token if token is not None else (os.environ.get("REWARDKIT_TOKEN") or None)
        self.timeout, self.connect_timeout = float(timeout), float(connect_timeout)
        self.retry_for, self.retries = float(retry_for), retries
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
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

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = min(self.max_backoff, self.backoff * 2 ** attempt) * random.uniform(0.5, 1.0)
        if retry_after:
            try:
                delay = min(self.max_backoff, max(delay, float(retry_after)))
            except ValueError:
                pass
        return delay

    # -- scoring ---------------------------------------------------------------------------------
    def score(self, samples: Sequence[Sample | dict] | Sample) -> list[Score]:
        """Like :meth:`Scorer.score`, except that a request the server did not score raises
        :class:`RemoteRewardError` (instead of becoming error Scores of every sample)."""
        if isinstance(samples, (Sample, dict)):
            raise TypeError("score() takes a batch (a list of Samples); for one sample call "
                            "score([sample])")
        batch = list(samples)
        out: list[Score | None] = [None] * len(batch)
        good: list[tuple[int, Sample]] = []
        for i, s in enumerate(batch):
            try:
                good.append((i, Sample.coerce(s)))
            except SampleError as exc:
                out[i] = Score.from_error(exc, self.error_value, kind="bad_input")
        for (i, _), score in zip(good, self.score_batch([s for _, s in good])):
            out[i] = finite_or_error(score, self.error_value)
        return out  # type: ignore[return-value]

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        out: list[Score] = []
        for i in range(0, len(samples), self.chunk_size):
            out.extend(self._score_chunk(samples[i:i + self.chunk_size]))
        return out

    def _score_chunk(self, samples: list[Sample]) -> list[Score]:
        import httpx

        request_id = uuid.uuid4().hex
        payload: dict[str, Any] = {"samples": [sample_to_json(s) for s in samples],
                                   "request_id": request_id}
        if self.reward is not None:
            payload["reward"] = self.reward
        body = json.dumps(payload, default=json_default).encode()
        deadline = time.monotonic() + self.retry_for
        attempt, problem = 0, ""
        while True:
            retry_after = None
            client = self._http()
            try:
                response = self._post(client, body)
            except httpx.TransportError as exc:  # refused, reset, timed out: try again
                problem = f"{type(exc).__name__}: {exc}"
            except RuntimeError:  # another call's deadline closed the pool under this one
                if not client.is_closed:
                    raise
                problem = "the connection pool was closed at another call's deadline"
            else:
                if response.status_code == 200:
                    return self._scores(response.json(), request_id, len(samples))
                problem = f"HTTP {response.status_code}: {_detail(response)}"
                if response.status_code == 413:
                    return self._split(samples, problem)
                if response.status_code not in RETRY_STATUSES:
                    raise RemoteRewardError(f"{self.url} refused the request ({problem}); no "
                                            "reward was computed for its samples")
                retry_after = response.headers.get("retry-after")
            delay = self._delay(attempt, retry_after)
            attempt += 1
            out_of_tries = self.retries is not None and attempt > self.retries
            if out_of_tries or time.monotonic() + delay > deadline:
                raise RemoteRewardError(
                    f"the reward server {self.url} did not score the request after {attempt} "
                    f"attempt(s) over {self.retry_for:g} s (retry_for); last: {problem}. Check "
                    "that `rewardkit serve` runs there and is reachable, or raise retry_for")
            log.warning("%s: %s; retrying in %.1f s", self.url, problem, delay)
            time.sleep(delay)

    def _post(self, client: Any, body: bytes) -> Any:
        """One attempt, over within ``timeout`` in all. httpx bounds each socket read, not the
        whole exchange, so a peer that sends a byte before each read times out would hold the
        call forever; at the deadline this closes the connection pool (the next client call
        opens a new one), which ends the blocked read with a transport error."""
        import httpx

        finished = threading.Event()
        expired = threading.Event()

        def expire() -> None:
            if finished.is_set():
                return
            expired.set()
            with self._lock:
                if self._client is client:
                    self._client = None
            client.close()

        timer = threading.Timer(self.timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            return client.post("/v1/score", content=body)
        except (httpx.TransportError, RuntimeError) as exc:
            if expired.is_set():
                raise httpx.ReadTimeout(f"no whole reply within timeout={self.timeout:g} s "
                                        "(the limit of one attempt)") from exc
            raise
        finally:
            finished.set()
            timer.cancel()

    def _split(self, samples: list[Sample], problem: str) -> list[Score]:
        """Scores of a request the server found too large: its halves, each sent on its own
        (a trainer's batch of long completions is scored in smaller requests instead of
        stopping the run); one sample that is too large alone is its own error Score."""
        if len(samples) == 1:
            return [Score.from_error(f"the sample is too large for the reward server at "
                                     f"{self.url} ({problem})", self.error_value,
                                     kind="too_large")]
        half = len(samples) // 2
        log.info("%s: a request of %d samples was too large; sending it in two", self.url,
                 len(samples))
        return self._score_chunk(samples[:half]) + self._score_chunk(samples[half:])

    def _scores(self, data: dict[str, Any], request_id: str, n: int) -> list[Score]:
        if data.get("request_id") not in (None, request_id):
            raise RemoteRewardError(f"{self.url} answered request {request_id} with the reply "
                                    f"of request {data.get('request_id')}")
        scores = data.get("scores")
        if not isinstance(scores, list) or len(scores) != n:
            raise RemoteRewardError(f"{self.url} returned {len(scores or [])} scores for {n} "
                                    "samples")
        return [score_from_json(d) for d in scores]


def _detail(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(data, dict):
        return str(data.get("error") or data.get("detail"))[:500]
    return str(data)[:300]
