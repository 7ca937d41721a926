"""Run a reward server in this process, on 127.0.0.1 and a free port: for the integration tests
and benchmarks of code that calls a reward server (public: documented in docs/server.md)."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from .config import ServerSettings
from .protocol import guarded_protocol


@contextmanager
def running_server(settings: ServerSettings, startup_timeout_s: float = 60.0,
                   **uvicorn_options: Any) -> Iterator[tuple[str, Any]]:
    """Serve ``settings`` with uvicorn in a background thread on 127.0.0.1 and an ephemeral
    port; yields ``(base_url, app)`` and always stops the server (draining it) on exit."""
    # deferred: uvicorn and FastAPI (the serve extra)
    import uvicorn

    from .app import create_app

    app = create_app(settings)
    metrics = app.state.rewardkit.metrics
    uvicorn_options.setdefault("http", guarded_protocol(
        settings.header_timeout_s, settings.max_connections_per_client,
        lambda reason: metrics.connections_refused.labels(reason).inc(),
        settings.max_header_bytes))
    uvicorn_options.setdefault("h11_max_incomplete_event_size", settings.max_header_bytes)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                            access_log=False, **uvicorn_options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="rewardkit-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the reward server failed to start (see the log above)")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the reward server did not start within {startup_timeout_s} s")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=60)
