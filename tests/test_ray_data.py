"""`rewardkit score --ray`: same rows as the local run, whole groups, shard-level resume, and a
killed actor's shard retried with nothing lost or duplicated."""
import json
import os
import signal
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from rewardkit.cli import main  # noqa: E402
from rewardkit.dataio import Source, read_rows  # noqa: E402
from rewardkit.offline import Fields  # noqa: E402
from rewardkit.scale.data import plan_shards, read_output, shard_rows_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def die_once(prompt, completion, reference):
    """A reward whose process dies (SIGKILL) the first time it sees ``KILL``; ``reference`` is
    the marker file that says it already happened."""
    if completion == "KILL" and not os.path.exists(reference):
        Path(reference).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return float(len(completion))


@pytest.fixture(scope="module")
def local_ray():
    # Actors import this module (die_once) by path, so they need the repository on their path.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    yield
    ray.shutdown()


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


def test_killed_actor_loses_and_duplicates_nothing(tmp_path, local_ray):
    src, marker = tmp_path / "in.jsonl", tmp_path / "killed"
    rows = [{"id": i, "prompt": f"q{i}", "completion": "KILL" if i == 130 else "x" * (i % 9),
             "reference": str(marker)} for i in range(240)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", str(src), "-r", "tests.test_ray_data:die_once", "-q", "--ray",
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
