"""Where the server runs a reward's Scorer: a reward that runs a model gets its own worker
process under the default ``workers: auto`` (a model in a thread of the server stalls on the
GIL whenever the event loop is busy), rule-based rewards stay in threads, and a model that
cannot be built in its worker process fails the startup with the reason."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import rewardkit
from rewardkit.compose import ConfigError
from rewardkit.server import RewardSource, ServerSettings
from rewardkit.server.testing import running_server
from rewardkit.server.workers import PipeWorker, ProcessWorker, ThreadWorker

pytest.importorskip("fastapi")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory) -> str:
    from rewardkit.testing import make_tiny_reward_model

    return str(make_tiny_reward_model(tmp_path_factory.mktemp("rm") / "rm"))


def _settings(source: RewardSource, **limits) -> ServerSettings:
    return ServerSettings({"r": source}, default="r", **limits)


@pytest.mark.parametrize("spec, options, processes", [
    ("reward_model", {}, 1),
    ("process_reward", {}, 1),
    ("implicit_reward", {}, 1),
    ("ensemble", {"members": ["reward_model"]}, 1),
    ("embedding_similarity", {}, 1),
    ("shaped", {"reward": "reward_model"}, 1),
    ("shaped", {"reward": "math"}, 0),
    ("math", {}, 0),
    ("code", {}, 0),
    ({"rewards": {"ok": {"reward": "math"}, "rm": {"reward": "reward_model", "weight": 0.5}}},
     {}, 1),
    ({"rewards": {"ok": {"reward": "math"}, "fmt": {"reward": "regex"}}}, {}, 0),
    ({"rewards": [{"reward": {"rewards": {"inner": {"reward": "process_reward"}}}}]}, {}, 1),
])
def test_auto_gives_a_model_one_process_and_rules_threads(spec, options, processes):
    source = RewardSource(spec, options)
    assert ServerSettings({"r": source}, default="r").workers_for(source) == processes
    # an explicit count is kept as it is, for models and rules alike
    assert ServerSettings({"r": source}, default="r", workers=0).workers_for(source) == 0
    assert ServerSettings({"r": source}, default="r", workers=3).workers_for(source) == 3


def test_auto_reads_a_config_file(tmp_path):
    path = tmp_path / "reward.yaml"
    path.write_text("rewards:\n  rm: {reward: reward_model, options: {model: x}}\n")
    source = RewardSource(str(path))
    assert ServerSettings({"r": source}, default="r").workers_for(source) == 1


@pytest.mark.parametrize("bad", ["many", -1, 1.5, True])
def test_workers_must_be_auto_or_a_count(bad):
    with pytest.raises(ConfigError, match="serve.workers must be 'auto'"):
        _settings(RewardSource("exact_match"), workers=bad)


def test_served_model_runs_in_its_own_process_and_scores_as_in_process(tiny_rm):
    samples = [{"prompt": f"add {i} and {i + 1}", "completion": f"{2 * i + 1}"}
               for i in range(12)]
    expected = [s.value for s in rewardkit.load("reward_model", model=tiny_rm).score(samples)]
    with running_server(_settings(RewardSource("reward_model", {"model": tiny_rm}))) as (url, app):
        r = httpx.post(url + "/v1/score", json={"samples": samples}, timeout=60)
        assert r.status_code == 200, r.text
        worker = app.state.rewardkit.batchers["r"].worker
        assert isinstance(worker, PipeWorker)
        pids = worker.pids()
        assert len(pids) == 1 and os.getpid() not in pids
    assert [s["value"] for s in r.json()["scores"]] == pytest.approx(expected, abs=1e-5)


def test_workers_zero_keeps_the_model_in_a_thread(tiny_rm):
    settings = _settings(RewardSource("reward_model", {"model": tiny_rm}), workers=0)
    with running_server(settings) as (url, app):
        r = httpx.post(url + "/v1/score", json={"samples": [{"prompt": "a", "completion": "b"}]},
                       timeout=60)
        assert r.status_code == 200, r.text
        assert isinstance(app.state.rewardkit.batchers["r"].worker, ThreadWorker)


@pytest.mark.parametrize("make", [lambda s: PipeWorker(s), lambda s: ProcessWorker(s, 2)],
                         ids=["one process", "a pool"])
def test_a_model_that_cannot_be_built_in_its_worker_fails_with_the_reason(tmp_path, make):
    worker = make(RewardSource("reward_model", {"model": str(tmp_path / "missing")}))
    with pytest.raises(RuntimeError, match=r"could not be built in a worker process: "
                                           r"ModelLoadError: .*no model at"):
        asyncio.run(worker.start())


def test_cli_workers_takes_auto_or_a_count():
    bad = subprocess.run([sys.executable, "-m", "rewardkit", "serve", "--reward", "math",
                          "--workers", "-2"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2
    assert "--workers: expected auto, 0 (threads) or a number of processes" in bad.stderr


def test_auto_keeps_a_source_that_cannot_be_pickled_in_a_thread():
    member = rewardkit.load("exact_match")
    member.unpicklable = lambda: None  # a Scorer built in Python, holding a lambda
    source = RewardSource("ensemble", {"members": [member, "reward_model"]})
    assert ServerSettings({"r": source}, default="r").workers_for(source) == 0


def test_a_process_left_open_at_exit_does_not_hold_the_interpreter(tmp_path):
    """multiprocessing joins non-daemon children at exit; a worker waiting for its next batch
    must be ended then, not waited for."""
    script = tmp_path / "left_open.py"
    script.write_text(
        "import asyncio\n"
        "from rewardkit.server.config import RewardSource\n"
        "from rewardkit.server.workers import PipeWorker\n"
        "KEPT = []  # still referenced at exit, so its pipe is never closed by collection\n"
        "async def main():\n"
        "    worker = PipeWorker(RewardSource('exact_match'))\n"
        "    await worker.start()\n"
        "    KEPT.append(worker)\n"
        "    print(worker.pids()[0], flush=True)\n"
        "if __name__ == '__main__':\n"
        "    asyncio.run(main())\n")
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=30)  # without the exit hook: hangs until killed
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[0])
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read()


def test_one_process_is_fed_through_a_pipe_and_more_form_a_pool():
    from rewardkit.server.workers import make_worker

    source = RewardSource("exact_match")
    assert isinstance(make_worker(source, 2, 1), PipeWorker)
    assert isinstance(make_worker(source, 2, 3), ProcessWorker)
    assert isinstance(make_worker(source, 2, 0), ThreadWorker)


def test_a_process_that_ended_between_batches_is_replaced_and_said(caplog):
    import signal
    import time

    async def scenario() -> tuple[list, list, list]:
        worker = PipeWorker(RewardSource("exact_match"))
        await worker.start()
        first = worker.pids()
        os.kill(first[0], signal.SIGKILL)
        for _ in range(100):
            if not worker.pids():
                break
            time.sleep(0.02)
        scores = await worker.run([[rewardkit.Sample("", "a", reference="a")]])
        second = worker.pids()
        await worker.close()
        return first, second, scores

    with caplog.at_level("WARNING", logger="rewardkit.server"):
        first, second, scores = asyncio.run(scenario())
    assert scores[0][0].value == 1.0
    assert second and second != first
    assert "had ended (exit code -9) between batches" in caplog.text
