"""Rewardkit on Ray. `rewardkit score --ray`: same rows as the local run, whole groups,
shard-level resume, and a killed actor's shard retried with nothing lost or duplicated. The
reward server as a Ray Serve deployment: replicas up, same endpoints, same auth. One local Ray
serves the whole file (starting one costs seconds), started after the tests that check a
refused config starts none."""
import json
import os
import signal
import socket
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
httpx = pytest.importorskip("httpx")

from rewardkit.cli import main  # noqa: E402
from rewardkit.dataio import Source, read_rows  # noqa: E402
from rewardkit.offline import Fields  # noqa: E402
from rewardkit.scale import serve as ray_serve  # noqa: E402
from rewardkit.scale.data import plan_shards, read_output, shard_rows_of  # noqa: E402
from rewardkit.server.config import settings_from_reward  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


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
    config = tmp_path / "reward.yaml"
    config.write_text("serve:\n  max_header_bytes: 8192\nrewards:\n  em: exact_match\n")
    assert main(["serve", "--ray", "--config", str(config), "--port", str(free_port())]) == 2
    assert "serve.max_header_bytes cannot be applied under Ray" in capsys.readouterr().err
    assert not ray.is_initialized()


def die_once(prompt, completion, reference):
    """A reward whose process dies (SIGKILL) the first time it sees ``KILL``; ``reference`` is
    the marker file that says it already happened."""
    if completion == "KILL" and not os.path.exists(reference):
        Path(reference).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return float(len(completion))


def write_input(path, n, extra=()):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": i, "prompt": f"q{i // 4}", "completion": str(i % 7),
                                "reference": str(i % 5)}) + "\n")
        for line in extra:
            f.write(line + "\n")


def group_config(tmp_path):
    cfg = tmp_path / "reward.yaml"
    cfg.write_text("rewards:\n  - reward: exact_match\nnormalize: group\n")
    return str(cfg)


def without_time(text):
    return [line for line in text.splitlines() if not line.startswith(("time:", "output:"))]


def test_shards_are_cut_between_prompt_groups(tmp_path):
    write_input(tmp_path / "in.jsonl", 301)
    shards = plan_shards(str(tmp_path / "in.jsonl"), None, Fields(), chunk_size=10, shard_rows=30)
    rows = list(read_rows(Source(str(tmp_path / "in.jsonl"), "jsonl")))
    assert sum(s.rows for s in shards) == 301 and len(shards) > 5
    for s in shards[1:]:  # the row before a shard's first row belongs to another prompt
        assert rows[s.first_row - 1]["prompt"] != rows[s.first_row]["prompt"]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_shards_together_hold_every_input_row_once_in_order(tmp_path, fmt):
    write_input(tmp_path / "in.jsonl", 150, extra=["", "   ", "[1]"])  # blanks are no rows
    src = tmp_path / f"in.{fmt}"
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        good = [r for r in read_rows(Source(str(tmp_path / "in.jsonl"), "jsonl")) if "id" in r]
        pq.write_table(pa.Table.from_pylist(good), src, row_group_size=16)
    shards = plan_shards(str(src), None, Fields(), chunk_size=8, shard_rows=20)
    assert len(shards) > 3
    assert [r for s in shards for r in shard_rows_of(s)] == \
        list(read_rows(Source(str(src), fmt)))


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the file: Ray Data's actors and the Serve deployments (each test
    starts and shuts down its own Ray Serve on it). Actors import this module (die_once) by
    path, so they need the repository on their path."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def serve_port(local_ray):
    """One Ray Serve (controller and HTTP proxy) for the file's deployments, on this port: each
    test deploys its application there and deletes it afterwards (its replicas free their
    CPUs for Ray Data), and Serve stops after the last."""
    yield free_port()
    ray_serve.shutdown()


def _delete_app() -> None:
    from ray import serve

    serve.delete(ray_serve.APP_NAME)


@pytest.mark.integration
def test_two_replicas_score_with_the_servers_auth_and_endpoints(serve_port):
    try:
        port = serve_port
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
        _delete_app()


@pytest.mark.integration
def test_a_replica_serves_a_learned_reward_under_workers_auto(tmp_path, serve_port):
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
        ray_serve.deploy(settings, replicas=1, port=serve_port, num_cpus=0.5)
        r = httpx.post(f"http://127.0.0.1:{serve_port}/v1/score", json={"samples": samples},
                       timeout=120)
        assert r.status_code == 200, r.text
        assert [s["value"] for s in r.json()["scores"]] == pytest.approx(expected, abs=1e-5)
    finally:
        _delete_app()


@pytest.mark.integration
def test_ray_output_equals_local_output_row_for_row(tmp_path, capsys, local_ray):
    src = tmp_path / "in.jsonl"
    write_input(src, 600, extra=["not json", json.dumps({"id": 600, "prompt": "z"})])
    cfg = group_config(tmp_path)
    common = ["score", str(src), "-c", cfg, "-q", "--chunk-size", "16"]
    assert main(common + ["-o", str(tmp_path / "local.jsonl")]) == 0
    local_summary = capsys.readouterr().out
    assert main(common + ["-o", str(tmp_path / "out"), "--ray", "--shard-rows", "100"]) == 0
    ray_summary = capsys.readouterr().out
    local = [json.loads(line) for line in (tmp_path / "local.jsonl").read_text().splitlines()]
    assert len(list((tmp_path / "out").glob("part-*.jsonl"))) > 3
    assert list(read_output(str(tmp_path / "out"))) == local
    # group normalisation really happened (not all zeros) and the bad rows are error rows
    assert {r["reward"] for r in local} > {0.0}
    assert sum("error" in r["reward_info"] for r in local) == 2
    assert without_time(ray_summary) == without_time(local_summary)


@pytest.mark.integration
def test_rerun_rescored_only_missing_shard_and_refuses_changed_input(tmp_path, capsys, local_ray):
    src, out = tmp_path / "in.jsonl", tmp_path / "out"
    write_input(src, 200)
    cmd = ["score", str(src), "-r", "exact_match", "-q", "-o", str(out), "--ray",
           "--shard-rows", "50", "--chunk-size", "10", "--output-format", "parquet"]
    assert main(cmd) == 0
    first = list(read_output(str(out)))
    parts = sorted(out.glob("part-*.parquet"))
    stamps = {p.name: p.stat().st_mtime_ns for p in parts}
    removed = len(list(read_rows(Source(str(parts[1]), "parquet"))))
    parts[1].unlink()
    stale = out / f"{parts[1].name}.tmp-99999"  # what an actor killed mid-write leaves
    stale.write_text("half a shard")
    capsys.readouterr()
    assert main(cmd) == 0
    assert f"rows: 200 ({200 - removed} from an earlier run)" in capsys.readouterr().out
    assert list(read_output(str(out))) == first and not stale.exists()
    assert {p.name: p.stat().st_mtime_ns for p in parts if p != parts[1]} == \
        {k: v for k, v in stamps.items() if k != parts[1].name}
    write_input(src, 201)
    assert main(cmd) == 1
    assert "changed since" in capsys.readouterr().err


@pytest.mark.integration
def test_killed_actor_loses_and_duplicates_nothing(tmp_path, local_ray):
    src, marker = tmp_path / "in.jsonl", tmp_path / "killed"
    rows = [{"id": i, "prompt": f"q{i}", "completion": "KILL" if i == 130 else "x" * (i % 9),
             "reference": str(marker)} for i in range(240)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", str(src), "-r", "tests.test_ray:die_once", "-q", "--ray",
                 "-o", str(tmp_path / "out"), "--shard-rows", "40", "--chunk-size", "20"]) == 0
    assert marker.exists()  # an actor process really died mid-shard
    out = list(read_output(str(tmp_path / "out")))
    assert [r["id"] for r in out] == list(range(240))
    assert [r["reward"] for r in out] == [float(len(r["completion"])) for r in rows]


def test_group_normalisation_refuses_scattered_groups_before_writing(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"prompt": f"q{i % 3}", "completion": "1",
                                       "reference": "1"}) + "\n" for i in range(9)))
    assert main(["score", str(src), "-c", group_config(tmp_path), "-q", "--ray",
                 "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "group of row 4" in err and "Sort the input by prompt" in err
    assert not (tmp_path / "out").exists()


def test_running_normalisation_is_refused_on_ray(tmp_path, capsys):
    write_input(tmp_path / "in.jsonl", 8)
    cfg = tmp_path / "running.yaml"
    cfg.write_text("rewards:\n  - reward: exact_match\nnormalize: running\n")
    assert main(["score", str(tmp_path / "in.jsonl"), "-c", str(cfg), "-q", "--ray",
                 "-o", str(tmp_path / "out")]) == 1
    assert "normalize: running" in capsys.readouterr().err
