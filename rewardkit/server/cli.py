"""``rewardkit serve``: the reward server's command line."""
from __future__ import annotations

import argparse
import errno
import socket
import sys
from typing import Any, Callable, Iterable

from ..arguments import EXIT_FAILURE, HelpFormatter, parse_key_value
from ..compose import ConfigError
from ..registry import UnknownRewardError, is_config_path, resolve
from .config import is_loopback, settings_from_file, settings_from_reward, token_from_env
from .protocol import guarded_protocol

EXIT_USAGE = 2


def add_serve_parser(sub: Any, ray: Any = None) -> None:
    """Register ``rewardkit serve`` on the main parser's sub-commands; ``ray``, the scale
    room's Ray Serve hooks (:mod:`rewardkit.scale.serve`), adds ``--ray``."""
    p = sub.add_parser(
        "serve", help="serve rewards over HTTP to trainers on other machines",
        description="Serve one or more rewards over HTTP: POST /v1/score (native), POST "
                    "/get_reward (OpenRLHF), GET /health, /v1/rewards, /metrics. Concurrent "
                    "requests are batched dynamically. The config file is the one `rewardkit "
                    "score` and `train` read; its `serve:` section adds named rewards and limits.",
        formatter_class=HelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--config", "-c", help="config file (YAML/TOML/JSON): its reward is served "
                                             "as `default`, its serve: section adds more")
    what.add_argument("--reward", "-r", help="serve one registered reward under its own name")
    p.add_argument("--option", "-O", action="append", default=[], type=parse_key_value,
                   metavar="KEY=VALUE", help="option of the (default) reward; repeatable")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind; anything but loopback requires a token")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--token", default=None,
                   help="bearer token clients must send (default: $REWARDKIT_TOKEN)")
    limits = p.add_argument_group("batching and limits (override the config's serve: section)")
    limits.add_argument("--max-batch-samples", type=int, help="largest batch given to a Scorer "
                                                              "(default 64)")
    limits.add_argument("--max-wait-ms", type=float, help="how long a batch may wait to fill "
                                                          "while a worker is free (default 0)")
    limits.add_argument("--concurrency", type=int, help="batches in flight per reward "
                                                        "(default 2)")
    limits.add_argument("--workers", type=_workers,
                        help="score in N processes per reward instead of threads; 0: threads; "
                             "auto (default): one process for a reward that runs a model, "
                             "threads for the others")
    limits.add_argument("--max-queue-samples", type=int, help="queued samples per reward before "
                                                              "503 (default 100000)")
    limits.add_argument("--max-request-samples", type=int, help="samples per request before 413 "
                                                                "(default 8192)")
    limits.add_argument("--max-body-mb", type=float, help="request body limit in MiB (default 32)")
    limits.add_argument("--request-timeout", type=float, help="seconds before unscored samples "
                                                              "get timeout errors (default 120)")
    limits.add_argument("--batch-timeout", type=float,
                        help="seconds a scoring call may run before it is abandoned, its "
                             "samples get timeout errors and its worker is replaced (default 120)")
    p.add_argument("--graceful-timeout", type=float, default=60.0,
                   help="on SIGTERM, seconds to finish in-flight requests before exiting; "
                        "samples not scored by then get an error Score")
    p.add_argument("--log-level", default="info",
                   choices=["critical", "error", "warning", "info", "debug"])
    if ray is not None:
        ray.add_ray_arguments(p)
        p.set_defaults(serve_on_ray=ray.serve_from_args)
    p.set_defaults(func=_cmd_serve)


def _workers(text: str) -> int | str:
    """``--workers``: ``auto`` or a count >= 0."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected auto, 0 (threads) or a number of processes, "
                                         f"got {text!r}")
    return value


def _cmd_serve(args: argparse.Namespace) -> int:
    token = args.token or token_from_env()
    if not is_loopback(args.host) and not token:
        print(f"error: binding to {args.host} exposes the server beyond this machine; set a "
              "token with --token or REWARDKIT_TOKEN (clients send 'Authorization: Bearer "
              "<token>'), or bind to 127.0.0.1", file=sys.stderr)
        return EXIT_USAGE
    limits = {"max_batch_samples": args.max_batch_samples, "max_wait_ms": args.max_wait_ms,
              "concurrency": args.concurrency, "workers": args.workers,
              "max_queue_samples": args.max_queue_samples,
              "max_request_samples": args.max_request_samples,
              "max_body_bytes": int(args.max_body_mb * 1024 * 1024) if args.max_body_mb else None,
              "request_timeout_s": args.request_timeout, "batch_timeout_s": args.batch_timeout,
              "token": token}
    try:
        if args.reward and not is_config_path(args.reward):
            resolve(args.reward)  # an unknown name is a usage error here, not a failed startup
        if args.config:
            settings = settings_from_file(args.config, dict(args.option), **limits)
        else:
            settings = settings_from_reward(args.reward, dict(args.option),
                                            **{k: v for k, v in limits.items() if v is not None})
    except (ConfigError, TypeError, ValueError, UnknownRewardError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "ray", False):
        try:
            args.serve_on_ray(settings, args)
        except ConfigError as exc:  # a limit Ray Serve cannot apply: refused before it starts
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        return 0
    try:  # before any startup work, so that a taken port is the first and only message
        bind_socket(args.host, args.port).close()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
              + (f". Another process holds the port (see `ss -ltnp 'sport = :{args.port}'`): "
                 "stop it, or pick another port with --port" if exc.errno == errno.EADDRINUSE
                 else ""), file=sys.stderr)
        return EXIT_FAILURE
    # deferred: uvicorn and FastAPI (the serve extra)
    import uvicorn

    from .app import create_app

    raise_fd_limit()
    app = create_app(settings)
    metrics = app.state.rewardkit.metrics
    protocol = guarded_protocol(settings.header_timeout_s, settings.max_connections_per_client,
                                lambda reason: metrics.connections_refused.labels(reason).inc(),
                                settings.max_header_bytes)
    # uvicorn stops accepting on SIGTERM/SIGINT, finishes the requests in flight (up to
    # --graceful-timeout), then runs the app's shutdown, which drains the batchers.
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            http=protocol, h11_max_incomplete_event_size=settings.max_header_bytes,
                            timeout_graceful_shutdown=args.graceful_timeout, access_log=False)
    server = draining_server(config, app.state.rewardkit.batchers.values, args.graceful_timeout)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    return 0 if server.started else EXIT_FAILURE


def draining_server(config: Any, batchers: Callable[[], Iterable[Any]],
                    graceful_timeout_s: float) -> Any:
    """A uvicorn server that, when told to stop, gives each batcher the graceful timeout (less
    a margin to write the replies) to score what it holds. uvicorn waits that long for the
    requests in flight and then cancels them unanswered, and the app's own shutdown would wait
    for the batchers without end: with a scoring call that hangs, the server never exited."""
    import uvicorn  # deferred: the serve extra

    margin = min(1.0, graceful_timeout_s / 10)

    class DrainingServer(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            for batcher in batchers():
                batcher.drain_within(graceful_timeout_s - margin)
            await super().shutdown(sockets)

    return DrainingServer(config)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, bound as uvicorn binds it: opened (and closed) before
    the app starts, so that a port in use fails at once with a clear message instead of after
    the rewards were built."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1)
    except OSError:
        sock.close()
        raise
    return sock


def raise_fd_limit() -> None:
    """Raise the soft limit on open files to the hard limit: each connection holds one, and the
    default soft limit (often 1024) is what slow clients exhaust first."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY
                                                        else max(soft, 65536), hard))
    except (ImportError, ValueError, OSError):
        pass
