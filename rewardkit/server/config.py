"""What a server serves and under which limits, as plain data.

:class:`ServerSettings` is everything :func:`rewardkit.server.app.create_app` needs. It holds
reward *specs* (names, options, config mappings), never built Scorers: the app builds them in its
startup from :meth:`RewardSource.build`, in each worker process if there are several, so the same
settings can be pickled to a process pool or to a Ray Serve replica unchanged.

A config file serves its ``reward:`` section (the one ``rewardkit score`` and ``train`` use) as
the default reward; a ``serve:`` section adds more named rewards and the limits:

.. code-block:: yaml

    reward:                       # the default reward, as for `rewardkit score --config`
      rewards: {correct: {reward: math}, boxed: {reward: regex, weight: 0.1,
                                                 options: {pattern: '\\\\boxed\\{'}}}
    serve:
      rewards:                    # more rewards, chosen per request by name
        code: code
        em: {reward: exact_match, options: {case_sensitive: true}}
      default: default            # which one a request without `reward` gets
      max_batch_samples: 64
      max_wait_ms: 2
"""
from __future__ import annotations

import ipaddress
import os
import pickle
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from ..compose import ConfigError, read_config_file
from ..registry import load
from ..scorer import Scorer

DEFAULT_NAME = "default"
TOKEN_ENV = "REWARDKIT_TOKEN"


DEFAULT_INFLIGHT_BODY_BYTES = 256 * 1024 * 1024
"""``max_inflight_body_bytes`` when unset: eight bodies of the default ``max_body_bytes``."""


@dataclass(frozen=True)
class RewardSource:
    """How to build one served reward: a registered name / import path with options, or a
    composition config mapping. Picklable, so worker processes build their own Scorer."""

    spec: str | Mapping[str, Any]
    options: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> Scorer:
        if isinstance(self.spec, Mapping):
            return load(dict(self.spec), **dict(self.options))
        return load(self.spec, **dict(self.options))

    @property
    def runs_model(self) -> bool:
        """True when the reward (or one it composes) runs a neural network in this process:
        see :data:`MODEL_REWARDS`."""
        return _names_any(self.spec, MODEL_REWARDS) or _names_any(dict(self.options),
                                                                   MODEL_REWARDS)

    @property
    def batch_independent(self) -> bool:
        """False when one sample's value depends on the others in its batch (``normalize``
        batch/group/running): such a reward is scored one request at a time, never mixed."""
        return not _normalizes(self.spec)


MODEL_REWARDS = frozenset({"reward_model", "process_reward", "implicit_reward", "ensemble",
                           "embedding_similarity"})
"""Built-in rewards that run a torch model. ``workers: auto`` scores them in a worker process:
a model in a thread of the server must take the GIL back after each of the hundreds of operators
of a forward pass, and while the event loop parses and answers requests it waits for it at each
one (CPython's GIL hands over only every few milliseconds), so the model stalls whenever the
server is busy — the very time it should compute."""


def _names_any(spec: Any, names: frozenset[str]) -> bool:
    """Whether a reward spec — a name, a composition mapping, a config file, or the options of a
    reward that wraps others (``shaped``'s ``reward``, ``ensemble``'s ``members``) — uses one of
    ``names`` anywhere in it."""
    if isinstance(spec, str):
        if spec.endswith((".yaml", ".yml", ".toml", ".json")):
            try:
                return _names_any(read_config_file(Path(spec)), names)
            except ConfigError:
                return False
        return spec in names
    if isinstance(spec, Mapping):
        if any(_names_any(spec[key], names) for key in ("reward", "members", "options")
               if key in spec):
            return True
        rewards = spec.get("rewards")
        return _names_any(list(rewards.values()) if isinstance(rewards, Mapping) else rewards,
                          names)
    if isinstance(spec, (list, tuple)):
        return any(_names_any(v, names) for v in spec)
    return False


def _picklable(source: RewardSource) -> bool:
    """Whether a worker process can be sent this source: a source built in Python may hold
    objects (an already built Scorer among ``ensemble``'s members) that only a thread can use."""
    try:
        pickle.dumps(source)
    except Exception:  # noqa: BLE001 - any pickling failure means: keep it in this process
        return False
    return True


def _normalizes(spec: Any) -> bool:
    if isinstance(spec, Mapping):
        norm = spec.get("normalize", "none")
        method = norm.get("method", "none") if isinstance(norm, Mapping) else norm
        if method not in (None, "none"):
            return True
        nested = list((spec.get("rewards") or {}).values()) if isinstance(
            spec.get("rewards"), Mapping) else list(spec.get("rewards") or [])
        if isinstance(spec.get("reward"), Mapping):
            nested.append(spec["reward"])
        return any(_normalizes(n.get("reward") if isinstance(n, Mapping) else n) or
                   _normalizes(n) for n in nested)
    if isinstance(spec, str) and spec.endswith((".yaml", ".yml", ".toml", ".json")):
        try:
            return _normalizes(read_config_file(Path(spec)))
        except ConfigError:
            return False
    return False


@dataclass(frozen=True)
class ServerSettings:
    """Rewards and limits of one server.

    Attributes:
        rewards: served name -> :class:`RewardSource`.
        default: the reward a request that names none gets.
        max_batch_samples: most samples given to a Scorer at once; concurrent requests are
            coalesced up to this size (a request larger than this is cut into chunks, unless the
            reward normalises across its batch).
        max_wait_ms: how long a batch may wait for more samples while a worker is free. Batches
            also grow on their own while the workers are busy, so 0 still batches under load.
        concurrency: batches in flight per reward (threads in this process).
        workers: if > 0, score in this many processes per reward instead of threads (for
            pure-Python rewards that hold the GIL, and for models, which a busy event loop
            would stall through the GIL; one process is fed by the event loop through a pipe,
            more form a pool); a process that dies is replaced. ``"auto"`` (the
            default): one process for a reward that runs a model (:data:`MODEL_REWARDS`, also
            inside a composition), threads for the others; 0: threads for every reward.
        max_queue_samples: samples waiting or being scored per reward before new requests get
            503 with ``Retry-After``.
        max_request_samples: most samples in one request (more: 413).
        max_body_bytes: largest request body (more: 413).
        request_timeout_s: a request's samples not scored by then get an error Score with
            ``error_kind="timeout"``.
        token: bearer token every endpoint but ``/health`` requires; None disables auth.
        allowed_hosts: ``Host`` names (``name`` or ``name:port``) the server answers to besides
            those of the address it is bound to. Without a token a request with any other
            ``Host`` gets 421, which keeps pages that re-resolve a domain to this machine (DNS
            rebinding) out; with a token any ``Host`` is answered unless this is set.
        idempotency_cache: how many recent request ids are remembered, so that a retried request
            is answered from the first attempt instead of being scored twice.
        idempotency_cache_bytes: most bytes of replies remembered (oldest evicted first).
        idempotency_db: an SQLite file that keeps the remembered replies across restarts
            (None: memory only).
        batch_quantum_s: a flow's next chunk is sized so that a batch takes about this long, so
            that a small request never waits long behind a big one of slow samples.
        batch_timeout_s: a scoring call (one batch) still running after this long is abandoned:
            its samples get an error Score with ``error_kind="timeout"``, its worker process is
            killed and replaced (a thread, which cannot be stopped, is left behind and replaced;
            see :class:`~rewardkit.server.workers.ThreadWorker`), and ``/health`` reports the
            reward degraded until a call scores again.
        header_timeout_s: a connection must send a request's headers within this time.
        body_timeout_s: a scoring request's body must arrive within this time (else 408).
        max_connections_per_client: connections one client address may hold at once.
        max_header_bytes: most bytes of a request's line and headers (more: 431, and the
            connection is closed).
        max_inflight_body_bytes: most bytes of scoring request bodies held at once, over all
            connections, each counted as what it takes once parsed (its bytes, then the
            values the pre-scan counted; a request that would pass it: 503 with
            ``Retry-After``, one that alone parses past it: 413). A body is held from its first
            byte until its reply starts, so this bounds the memory requests can take together,
            where ``max_body_bytes`` bounds one. Unset: 256 MiB, or ``max_body_bytes`` if
            larger.
    """

    rewards: Mapping[str, RewardSource]
    default: str = DEFAULT_NAME
    max_batch_samples: int = 64
    max_wait_ms: float = 0.0
    concurrency: int = 2
    workers: int | str = "auto"
    max_queue_samples: int = 100_000
    max_request_samples: int = 8192
    max_body_bytes: int = 32 * 1024 * 1024
    request_timeout_s: float = 120.0
    token: str | None = None
    idempotency_cache: int = 4096
    idempotency_cache_bytes: int = 256 * 1024 * 1024
    idempotency_db: str | None = None
    batch_quantum_s: float = 1.0
    batch_timeout_s: float = 120.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    max_connections_per_client: int = 256
    max_header_bytes: int = 64 * 1024
    max_inflight_body_bytes: int | None = None
    allowed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.rewards:
            raise ConfigError("the server needs at least one reward to serve")
        if self.default not in self.rewards:
            raise ConfigError(f"default reward {self.default!r} is not served; served: "
                              f"{sorted(self.rewards)}")
        for name in ("max_batch_samples", "concurrency", "max_queue_samples",
                     "max_request_samples", "max_body_bytes", "idempotency_cache",
                     "idempotency_cache_bytes", "max_connections_per_client",
                     "max_header_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"serve.{name} must be a positive integer, got {value!r}")
        value = self.max_inflight_body_bytes
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ConfigError(f"serve.max_inflight_body_bytes must be a positive integer, got "
                              f"{value!r}")
        if self.inflight_body_budget < self.max_body_bytes:
            raise ConfigError(f"serve.max_inflight_body_bytes ({self.max_inflight_body_bytes}) "
                              f"is below serve.max_body_bytes ({self.max_body_bytes}): a request "
                              "of the largest allowed size could never be served; raise it or "
                              "lower max_body_bytes")
        if self.workers != "auto" and (isinstance(self.workers, bool) or
                                       not isinstance(self.workers, int) or self.workers < 0):
            raise ConfigError(f"serve.workers must be 'auto', 0 (threads) or a positive "
                              f"integer, got {self.workers!r}")
        if self.idempotency_db is not None and not isinstance(self.idempotency_db, str):
            raise ConfigError(f"serve.idempotency_db must be a file path, got "
                              f"{self.idempotency_db!r}")
        for name in ("header_timeout_s", "body_timeout_s", "batch_quantum_s", "batch_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"serve.{name} must be a number > 0, got {value!r}")
        for name in ("max_wait_ms", "request_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"serve.{name} must be a number >= 0, got {value!r}")

    @property
    def inflight_body_budget(self) -> int:
        """``max_inflight_body_bytes``, or when unset 256 MiB (or ``max_body_bytes``, if that is
        larger: one body of the largest allowed size always fits)."""
        if self.max_inflight_body_bytes is not None:
            return self.max_inflight_body_bytes
        return max(DEFAULT_INFLIGHT_BODY_BYTES, self.max_body_bytes)

    def workers_for(self, source: RewardSource) -> int:
        """Worker processes of one reward: ``workers``, or under ``auto`` one for a reward
        that runs a model and none (threads) for the others."""
        if self.workers == "auto":
            return 1 if source.runs_model and _picklable(source) else 0
        return int(self.workers)

    def with_options(self, **changes: Any) -> "ServerSettings":
        """A copy with some limits changed (None values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


LIMIT_KEYS = tuple(f.name for f in fields(ServerSettings) if f.name not in ("rewards", "token"))


def settings_from_reward(name: str, options: Mapping[str, Any] | None = None,
                         **limits: Any) -> ServerSettings:
    """Serve one registered reward under its own name (also the default)."""
    return ServerSettings({name: RewardSource(name, dict(options or {}))}, default=name, **limits)


def settings_from_file(path: str | Path, options: Mapping[str, Any] | None = None,
                       **limits: Any) -> ServerSettings:
    """Settings from a config file: its reward section is served as ``default``, its
    ``serve:`` section adds rewards and limits (see the module docstring). ``options`` override
    keys of the default reward's config, as ``rewardkit score -O`` does."""
    path = Path(path)
    data = read_config_file(path)
    serve = data.get("serve") or {}
    if not isinstance(serve, Mapping):
        raise ConfigError(f"{path}: `serve:` must be a mapping")
    unknown = set(serve) - {"rewards", *LIMIT_KEYS}
    if unknown:
        raise ConfigError(f"{path}: serve: unknown key(s) {sorted(unknown)}; allowed: "
                          f"{sorted({'rewards', *LIMIT_KEYS})}")
    rewards: dict[str, RewardSource] = {}
    if "reward" in data or "rewards" in data:
        section = data["reward"] if isinstance(data.get("reward"), Mapping) else {
            k: v for k, v in data.items() if k not in ("serve", "train", "data_sources")}
        rewards[DEFAULT_NAME] = RewardSource(dict(section), dict(options or {}))
    extra = serve.get("rewards") or {}
    if not isinstance(extra, Mapping):
        raise ConfigError(f"{path}: serve.rewards must map names to reward specs")
    for name, spec in extra.items():
        rewards[str(name)] = _source(spec, f"{path}: serve.rewards.{name}")
    if not rewards:
        raise ConfigError(f"{path}: nothing to serve; add a `reward:` section or "
                          "`serve: {rewards: {name: reward}}`")
    settings = {k: serve[k] for k in LIMIT_KEYS if k in serve}
    settings.setdefault("default", DEFAULT_NAME if DEFAULT_NAME in rewards else next(iter(rewards)))
    settings.update({k: v for k, v in limits.items() if v is not None})
    return ServerSettings(rewards, **settings)


def _source(spec: Any, where: str) -> RewardSource:
    if isinstance(spec, str):
        return RewardSource(spec)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where} must be a reward name or a mapping, got {spec!r}")
    if set(spec) <= {"reward", "options"} and isinstance(spec.get("reward"), str):
        options = spec.get("options") or {}
        if not isinstance(options, Mapping):
            raise ConfigError(f"{where}.options must be a mapping")
        return RewardSource(spec["reward"], dict(options))
    return RewardSource(dict(spec))


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``: the only binds allowed without a token."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_from_env() -> str | None:
    return os.environ.get(TOKEN_ENV) or None
