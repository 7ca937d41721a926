"""The reward server as a Ray Serve deployment: replicas up, same endpoints, same auth."""
import socket

import pytest

ray = pytest.importorskip("ray")
httpx = pytest.importorskip("httpx")

from rewardkit.scale import serve as ray_serve  # noqa: E402
from rewardkit.server.config import settings_from_reward  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_flags_give_autoscaling_bounds_or_a_fixed_count():
    import argparse

    parser = argparse.ArgumentParser()
    ray_serve.add_ray_arguments(parser)
    settings = settings_from_reward("exact_match")
    args = parser.parse_args(["--ray", "--replicas", "2", "--max-replicas", "4"])
    scaled = ray_serve.deployment(settings, args.replicas, min_replicas=args.min_replicas,
                                  max_replicas=args.max_replicas)._bound_deployment
    bounds = scaled._deployment_config.autoscaling_config
    assert (bounds.min_replicas, bounds.initial_replicas, bounds.max_replicas) == (1, 2, 4)
    fixed = ray_serve.deployment(settings, 3)._bound_deployment
    assert fixed.num_replicas == 3 and fixed._deployment_config.autoscaling_config is None
    with pytest.raises(ValueError, match="min_replicas <= max_replicas"):
        ray_serve.deployment(settings, 1, min_replicas=5, max_replicas=2)


def test_serve_command_accepts_the_ray_flags():
    from rewardkit.cli import build_parser

    args = build_parser().parse_args(["serve", "--reward", "exact_match", "--ray",
                                      "--replicas", "3", "--replica-gpus", "1"])
    assert args.ray and args.replicas == 3 and args.replica_gpus == 1.0
    assert build_parser().parse_args(["serve", "--reward", "exact_match"]).ray is False


def test_a_connection_limit_ray_serve_cannot_apply_is_refused_before_ray_starts():
    from dataclasses import replace

    from rewardkit.compose import ConfigError

    base = settings_from_reward("exact_match")
    assert ray_serve.unapplied_limits(base) == ([], list(ray_serve.CONNECTION_LIMITS))
    assert "header_timeout_s" in ray_serve.check_limits(base)  # the defaults: a notice
    for key, value in (("header_timeout_s", 2.0), ("max_header_bytes", 4096),
                       ("max_connections_per_client", 8)):
        settings = replace(base, **{key: value})
        with pytest.raises(ConfigError, match=f"serve.{key} cannot be applied under Ray"):
            ray_serve.deploy(settings, port=free_port())
    assert not ray.is_initialized()


def test_the_proxy_timeout_outlasts_every_server_limit():
    from dataclasses import replace

    settings = replace(settings_from_reward("exact_match"), header_timeout_s=7.0,
                       body_timeout_s=20.0, request_timeout_s=60.0)
    options = ray_serve.proxy_http_options(settings, "127.0.0.1", 8123)
    assert options["host"] == "127.0.0.1" and options["port"] == 8123
    assert options["request_timeout_s"] == 7.0 + 20.0 + 60.0 + ray_serve.PROXY_TIMEOUT_MARGIN_S


def test_serve_ray_exits_2_naming_the_limit_it_cannot_apply(tmp_path, capsys):
    from rewardkit.cli import main

    config = tmp_path / "reward.yaml"
    config.write_text("serve:\n  max_header_bytes: 8192\nrewards:\n  em: exact_match\n")
    assert main(["serve", "--ray", "--config", str(config), "--port", str(free_port())]) == 2
    assert "serve.max_header_bytes cannot be applied under Ray" in capsys.readouterr().err
    assert not ray.is_initialized()


# The deployments share one local Ray, started after the tests above have checked that a
# refused config starts none.
@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module's deployments (each test starts and shuts down its own
    Ray Serve on it)."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_two_replicas_score_with_the_servers_auth_and_endpoints(local_ray):
    try:
        port = free_port()
        ray_serve.deploy(settings_from_reward("exact_match", token="s3cret"), replicas=2,
                         port=port, num_cpus=0.5)
        from ray import serve

        app = serve.status().applications[ray_serve.APP_NAME]
        replicas = next(iter(app.deployments.values())).replica_states
        assert replicas.get("RUNNING") == 2
        url = f"http://127.0.0.1:{port}"
        body = {"samples": [{"prompt": "p", "completion": "4", "reference": "4"},
                            {"prompt": "p", "completion": "5", "reference": "4"}]}
        ok = httpx.post(f"{url}/v1/score", json=body,
                        headers={"Authorization": "Bearer s3cret"}, timeout=30)
        assert ok.status_code == 200
        assert [s["value"] for s in ok.json()["scores"]] == [1.0, 0.0]
        assert httpx.post(f"{url}/v1/score", json=body, timeout=30).status_code == 401
        assert httpx.get(f"{url}/health", timeout=30).json()["status"] == "ok"
        from ray.serve.context import _get_global_client

        http = _get_global_client().http_config  # the proxy got the end-to-end timeout
        assert http.request_timeout_s == ray_serve.proxy_http_options(
            settings_from_reward("exact_match"), "127.0.0.1", port)["request_timeout_s"]
    finally:
        ray_serve.shutdown()


def test_a_replica_serves_a_learned_reward_under_workers_auto(tmp_path, local_ray):
    """The replica starts a learned reward the way ``rewardkit serve`` does (``workers:
    auto``: in a worker process started inside the replica) and it scores as in process."""
    import rewardkit
    from rewardkit.testing import make_tiny_reward_model

    model = str(make_tiny_reward_model(tmp_path / "rm"))
    samples = [{"prompt": "add 2 and 3", "completion": "5"},
               {"prompt": "add 2 and 3", "completion": "6"}]
    expected = [s.value for s in rewardkit.load("reward_model", model=model).score(samples)]
    settings = settings_from_reward("reward_model", {"model": model})
    assert settings.workers == "auto"
    try:
        port = free_port()
        ray_serve.deploy(settings, replicas=1, port=port, num_cpus=0.5)
        r = httpx.post(f"http://127.0.0.1:{port}/v1/score", json={"samples": samples},
                       timeout=120)
        assert r.status_code == 200, r.text
        assert [s["value"] for s in r.json()["scores"]] == pytest.approx(expected, abs=1e-5)
    finally:
        ray_serve.shutdown()
