"""Ray started by rewardkit reports no usage statistics and keeps its own logs to warnings
unless asked; `serve --ray` stops on SIGTERM with a message, not stack frames."""
import logging
import os
import signal
import threading
import types

import pytest

from rewardkit.scale import quiet


class FakeRay:
    def __init__(self):
        self.kwargs = None
        self.env = None

    def init(self, **kwargs):
        self.kwargs = kwargs
        self.env = os.environ.get("RAY_USAGE_STATS_ENABLED")


def test_init_ray_turns_usage_stats_off_and_logs_to_warnings(monkeypatch):
    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    monkeypatch.delenv(quiet.LOG_LEVEL_ENV, raising=False)
    serve_logger = logging.getLogger("ray.serve")  # as before any Ray Serve in this process
    monkeypatch.setattr(serve_logger, "handlers", [])
    monkeypatch.setattr(serve_logger, "level", logging.NOTSET)
    ray = FakeRay()
    quiet.init_ray(ray, address=None)
    assert ray.env == "0"
    assert ray.kwargs["logging_level"] == logging.WARNING
    assert logging.getLogger("ray.serve").level == logging.WARNING


def test_the_user_can_ask_for_rays_logs_and_keep_usage_stats(monkeypatch):
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "1")
    monkeypatch.setenv(quiet.LOG_LEVEL_ENV, "info")
    ray = FakeRay()
    quiet.init_ray(ray)
    assert ray.env == "1" and ray.kwargs["logging_level"] == logging.INFO


def test_ray_data_console_is_quiet_but_its_log_file_keeps_everything(monkeypatch):
    monkeypatch.delenv(quiet.LOG_LEVEL_ENV, raising=False)
    logger = logging.getLogger("ray.data")

    class SessionFileHandler(logging.Handler):
        pass

    console, file = logging.StreamHandler(), SessionFileHandler()
    console.setLevel(logging.INFO)
    file.setLevel(logging.DEBUG)
    monkeypatch.setattr(logger, "handlers", [console, file])
    quiet.quiet_ray_loggers()
    assert console.level == logging.WARNING and file.level == logging.DEBUG


def test_serve_ray_stops_on_sigterm_without_a_traceback(monkeypatch, capsys):
    from rewardkit.scale import serve as ray_serve

    calls = []
    monkeypatch.setattr(ray_serve, "deploy", lambda *a, **k: calls.append(("deploy", k)))
    monkeypatch.setattr(ray_serve, "shutdown", lambda: calls.append(("shutdown", None)))
    args = types.SimpleNamespace(replicas=1, host="127.0.0.1", port=8000, ray_address=None,
                                 min_replicas=None, max_replicas=None, replica_cpus=1.0,
                                 replica_gpus=0.0)
    before = signal.getsignal(signal.SIGTERM)
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
    ray_serve.serve_from_args(object(), args)
    assert [c[0] for c in calls] == ["deploy", "shutdown"]
    assert calls[0][1]["blocking"] is False
    err = capsys.readouterr().err
    assert "SIGTERM: removing the deployment" in err and "Traceback" not in err
    assert signal.getsignal(signal.SIGTERM) is before
