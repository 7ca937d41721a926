"""``rewardkit serve --ray``: the reward server's FastAPI app as a Ray Serve deployment.

Each replica runs the very app :func:`rewardkit.server.app.create_app` builds (same endpoints,
bearer-token auth, body and queue limits, metrics), built on the replica from the picklable
:class:`~rewardkit.server.config.ServerSettings`, so its Scorers load once per replica (on its
GPU when ``num_gpus`` is set). Ray Serve's proxy spreads requests over the replicas.

Dynamic batching stays inside each replica, in the server's own batcher, rather than in Ray
Serve's ``@serve.batch``: the server's batcher already knows the per-reward limits, keeps rewards
that normalise across a batch from mixing requests, and reports queue metrics; a second batching
layer in front would add a wait without adding larger batches.

**Which limits hold.** Everything the app enforces holds on each replica: auth, body size
(read as it streams in), the in-flight body budget, queue bounds, validation, request time.
The connection-level limits of ``rewardkit serve`` (``header_timeout_s``, ``max_header_bytes``,
``max_connections_per_client``) live in its own HTTP server, and under Ray Serve the proxy's
HTTP server accepts the connections instead: it has no such limits, so :func:`deploy` says so at
start-up, and refuses a config that sets one of them (a limit asked for and not applied would
fail open). The proxy does get an end-to-end request timeout (:func:`proxy_http_options`).
"""
from __future__ import annotations

import sys
from dataclasses import fields
from typing import Any

from ..compose import ConfigError
from ..server.config import ServerSettings
from .quiet import init_ray

APP_NAME = "rewardkit"

CONNECTION_LIMITS = ("header_timeout_s", "max_header_bytes", "max_connections_per_client")
"""Limits of ``rewardkit serve``'s own HTTP server, which Ray Serve's proxy replaces."""

PROXY_TIMEOUT_MARGIN_S = 30.0


def unapplied_limits(settings: ServerSettings) -> tuple[list[str], list[str]]:
    """``(set, left)``: the connection limits this config sets to other than their defaults
    (Ray Serve cannot apply them), and those left at their defaults."""
    defaults = {f.name: f.default for f in fields(ServerSettings)}
    set_ = [k for k in CONNECTION_LIMITS if getattr(settings, k) != defaults[k]]
    return set_, [k for k in CONNECTION_LIMITS if k not in set_]


def proxy_http_options(settings: ServerSettings, host: str, port: int) -> dict[str, Any]:
    """Ray Serve's ``http_options``: where the proxy listens, and an end-to-end timeout long
    enough for a request that sends its headers and body within the server's limits and waits
    its full ``request_timeout_s`` (plus a margin), so that a stuck or trickling request is cut
    at the proxy too."""
    timeout = (settings.header_timeout_s + settings.body_timeout_s + settings.request_timeout_s
               + PROXY_TIMEOUT_MARGIN_S)
    return {"host": host, "port": port, "request_timeout_s": timeout}


def check_limits(settings: ServerSettings) -> str:
    """Refuse a config that sets a connection limit Ray Serve cannot apply; return the notice
    printed at start-up about the ones left at their defaults."""
    set_, left = unapplied_limits(settings)
    if set_:
        raise ConfigError(
            f"serve.{', serve.'.join(set_)} cannot be applied under Ray Serve: its HTTP proxy "
            "accepts the connections and has no such limit. Serve without --ray (where "
            "`rewardkit serve` applies them), or put a reverse proxy that has them (nginx, "
            "Envoy) in front of Ray Serve and remove the keys from the config.")
    return ("note: under Ray Serve the connection limits of `rewardkit serve` "
            f"({', '.join(left)}) do not apply (Ray Serve's proxy accepts the connections): "
            "a client may send headers slowly or hold many connections. Put a reverse proxy "
            "with such limits in front when clients are not trusted. Every limit of the app "
            "(auth, body size and budget, queue, request time) holds on each replica.")


class RewardServer:
    """The replica class; every route comes from the server's app (see :func:`build_app`)."""


def build_app(settings: ServerSettings) -> Any:
    """The server's app (called on each replica, so Scorers are built there)."""
    from ..server.app import create_app  # deferred: fastapi, imported on the replica

    return create_app(settings)


def deployment(settings: ServerSettings, replicas: int = 1, *, min_replicas: int | None = None,
               max_replicas: int | None = None, num_cpus: float = 1.0,
               num_gpus: float = 0.0, max_ongoing_requests: int = 256) -> Any:
    """A bound Ray Serve application serving ``settings``.

    replicas: fixed number of replicas; with ``min_replicas``/``max_replicas`` the deployment
        autoscales between them instead (starting at ``replicas``).
    num_cpus / num_gpus: resources each replica holds (``num_gpus=1`` for a learned RM).
    max_ongoing_requests: requests a replica accepts at once; keep it above the server's
        ``max_batch_samples`` over the typical request size so batches can fill.
    """
    from ray import serve

    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    options: dict[str, Any] = {"name": APP_NAME, "max_ongoing_requests": max_ongoing_requests,
                               "ray_actor_options": {"num_cpus": num_cpus,
                                                     "num_gpus": num_gpus}}
    if min_replicas is not None or max_replicas is not None:
        lo = min_replicas if min_replicas is not None else 1
        hi = max_replicas if max_replicas is not None else max(lo, replicas)
        if not 0 <= lo <= hi:
            raise ValueError(f"need 0 <= min_replicas <= max_replicas, got {lo} and {hi}")
        options["autoscaling_config"] = {"min_replicas": lo, "max_replicas": hi,
                                         "initial_replicas": min(max(replicas, lo), hi)}
    else:
        options["num_replicas"] = replicas
    def app_builder() -> Any:  # Ray Serve calls a plain function on the replica
        return build_app(settings)

    ingress = serve.ingress(app_builder)
    return serve.deployment(**options)(ingress(RewardServer)).bind()


def deploy(settings: ServerSettings, replicas: int = 1, *, host: str = "127.0.0.1",
           port: int = 8000, address: str | None = None, blocking: bool = False,
           **deployment_options: Any) -> Any:
    """Start Ray Serve's HTTP proxy on ``host:port`` and deploy the server there.

    ``address`` joins an existing cluster (``auto``); without it a local Ray is started unless
    one is already initialised. Returns the deployment handle (``blocking=True`` serves until
    interrupted, as ``rewardkit serve`` does). Other keyword arguments go to :func:`deployment`.
    """
    notice = check_limits(settings)  # before Ray starts: a refused config starts nothing
    import ray
    from ray import serve

    print(notice, file=sys.stderr, flush=True)
    if not ray.is_initialized():
        init_ray(ray, address=address, include_dashboard=False)
    serve.start(http_options=proxy_http_options(settings, host, port))
    return serve.run(deployment(settings, replicas, **deployment_options), name=APP_NAME,
                     route_prefix="/", blocking=blocking)


def shutdown() -> None:
    """Remove the deployment and stop Ray Serve (the Ray instance is left running)."""
    from ray import serve

    serve.shutdown()


def add_ray_arguments(parser: Any) -> None:
    """The ``rewardkit serve`` flags for Ray Serve (``--ray``, ``--replicas``, ...)."""
    group = parser.add_argument_group("Ray Serve (pip install 'rewardkit[ray]'; docs/scale.md)")
    group.add_argument("--ray", action="store_true",
                       help="serve as a Ray Serve deployment (its proxy accepts the connections: "
                            "header_timeout_s, max_header_bytes and max_connections_per_client "
                            "do not apply, and a config that sets them is refused)")
    group.add_argument("--ray-address", default=None,
                       help="Ray cluster to join (`auto`: the running one); default a local Ray")
    group.add_argument("--replicas", type=int, default=1, help="replicas (initial, if autoscaling)")
    group.add_argument("--min-replicas", type=int, default=None, help="autoscaling lower bound")
    group.add_argument("--max-replicas", type=int, default=None, help="autoscaling upper bound")
    group.add_argument("--replica-cpus", type=float, default=1.0, help="CPUs each replica holds")
    group.add_argument("--replica-gpus", type=float, default=0.0, help="GPUs each replica holds")


def serve_from_args(settings: ServerSettings, args: Any) -> Any:
    """Deploy ``settings`` as the flags of :func:`add_ray_arguments` say and serve until Ctrl-C
    or SIGTERM (what ``rewardkit serve --ray`` runs), then remove the deployment.

    The wait is this function's own, not ``serve.run(blocking=True)``: there a stop signal
    surfaces as an exception through Ray's frames and prints them; here it is a message and a
    clean shutdown."""
    import signal
    import time

    handle = deploy(settings, args.replicas, host=args.host, port=args.port,
                    address=args.ray_address, blocking=False, min_replicas=args.min_replicas,
                    max_replicas=args.max_replicas, num_cpus=args.replica_cpus,
                    num_gpus=args.replica_gpus)
    stop: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: stop.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    print(f"serving on http://{args.host}:{args.port} (Ray Serve); Ctrl-C or SIGTERM stops",
          file=sys.stderr, flush=True)
    try:
        while not stop:
            time.sleep(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"{signal.Signals(stop[0]).name}: removing the deployment and stopping Ray Serve",
          file=sys.stderr, flush=True)
    shutdown()
    return handle
