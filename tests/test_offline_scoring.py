"""`rewardkit score`: formats, field mapping, order under workers, resume, bad rows, errors."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardkit.cli import main

ROOT = Path(__file__).resolve().parents[1]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def rows(n):
    return [{"id": i, "prompt": f"q{i // 4}", "completion": str(i % 7),
             "reward_model": {"ground_truth": str(i % 5)}} for i in range(n)]


def test_output_keeps_fields_adds_reward_and_maps_dotted_reference(tmp_path, capsys):
    write_jsonl(tmp_path / "in.jsonl", rows(20))
    rc = main(["score", str(tmp_path / "in.jsonl"), "-r", "exact_match", "-q",
               "--reference-field", "reward_model.ground_truth", "-o", str(tmp_path / "o.jsonl")])
    assert rc == 0
    out = read_jsonl(tmp_path / "o.jsonl")
    assert [r["id"] for r in out] == list(range(20))
    assert all(r["reward"] == float(str(r["id"] % 7) == str(r["id"] % 5)) for r in out)
    assert out[0]["reward_model"] == {"ground_truth": "0"} and "reward_info" in out[0]
    summary = capsys.readouterr().out
    assert "rows: 20" in summary and "mean:" in summary and "errors: 0" in summary


@pytest.mark.parametrize("suffix", ["json", "csv", "parquet", "datasets"])
def test_formats_round_trip(tmp_path, suffix):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, rows(12))
    mid = tmp_path / f"mid.{suffix}" if suffix != "datasets" else tmp_path / "mid_ds"
    assert main(["score", str(src), "-r", "exact_match", "-q", "--reference-field",
                 "reward_model.ground_truth", "-o", str(mid)]) == 0
    # the written file is itself valid input: score it again into JSONL
    assert main(["score", str(mid), "-r", "regex", "-O", "pattern=^[0-3]$", "-q",
                 "--output-field", "fmt", "-o", str(tmp_path / "back.jsonl")]) == 0
    back = read_jsonl(tmp_path / "back.jsonl")
    assert [int(r["id"]) for r in back] == list(range(12))
    assert [r["fmt"] for r in back] == [float(int(r["completion"]) <= 3) for r in back]
    assert all("reward" in r for r in back)


def test_workers_keep_input_order_and_give_same_results(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", rows(300))
    args = ["-r", "exact_match", "-q", "--reference-field", "reward_model.ground_truth",
            "--chunk-size", "16"]
    assert main(["score", str(tmp_path / "in.jsonl"), *args, "-o", str(tmp_path / "a.jsonl")]) == 0
    assert main(["score", str(tmp_path / "in.jsonl"), *args, "-j", "2",
                 "-o", str(tmp_path / "b.jsonl")]) == 0
    assert read_jsonl(tmp_path / "a.jsonl") == read_jsonl(tmp_path / "b.jsonl")


def test_bad_rows_are_scored_as_errors_not_crashes(tmp_path, capsys):
    (tmp_path / "in.jsonl").write_text(
        '{"prompt": "p", "completion": "a", "reference": "a"}\n'
        "not json\n"
        '{"prompt": "p", "reference": "a"}\n'
        '{"prompt": "p", "completion": 3, "reference": "a"}\n'
        "[1, 2]\n")
    assert main(["score", str(tmp_path / "in.jsonl"), "-r", "exact_match", "-q",
                 "-o", str(tmp_path / "o.jsonl")]) == 0
    out = read_jsonl(tmp_path / "o.jsonl")
    assert [r["reward"] for r in out] == [1.0, 0.0, 0.0, 0.0, 0.0]
    errors = [r["reward_info"].get("error", "") for r in out]
    assert "line 2 is not valid JSON" in errors[1]
    assert "'completion' not found" in errors[2]
    assert "completion must be a string" in errors[3]
    assert "not an object" in errors[4]
    assert "errors: 4 (bad_sample: 4)" in capsys.readouterr().out


def test_named_reference_field_missing_is_an_error(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", [{"prompt": "p", "completion": "a"}])
    main(["score", str(tmp_path / "in.jsonl"), "-r", "exact_match", "-q",
          "--reference-field", "gold", "-o", str(tmp_path / "o.jsonl")])
    assert "--reference-field" in read_jsonl(tmp_path / "o.jsonl")[0]["reward_info"]["error"]


def test_unknown_reward_exits_nonzero_listing_rewards(tmp_path, capsys):
    write_jsonl(tmp_path / "in.jsonl", rows(2))
    assert main(["score", str(tmp_path / "in.jsonl"), "-r", "nope", "-o",
                 str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "unknown reward 'nope'" in err and "exact_match" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # no output, no state


def test_bad_reward_option_exits_2_and_writes_nothing(tmp_path, capsys):
    write_jsonl(tmp_path / "in.jsonl", rows(2))
    assert main(["score", str(tmp_path / "in.jsonl"), "-r", "exact_match", "-O", "casesensitive=1",
                 "-o", str(tmp_path / "o.jsonl")]) == 2
    assert "Accepted options" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


@pytest.mark.parametrize("content, name, match", [
    (None, "missing.jsonl", "does not exist"),
    ("{broken", "bad.json", "is not valid JSON"),
    ("x", "data.txt", "cannot tell the format"),
])
def test_unreadable_input_names_the_file_and_problem(tmp_path, capsys, content, name, match):
    if content is not None:
        (tmp_path / name).write_text(content)
    assert main(["score", str(tmp_path / name), "-r", "exact_match", "-o",
                 str(tmp_path / "o.jsonl")]) != 0
    err = capsys.readouterr().err
    assert name in err and match in err


def test_resume_after_a_half_written_line_continues_without_duplicates(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", rows(50))
    args = ["score", str(tmp_path / "in.jsonl"), "-r", "exact_match", "-q", "--reference-field",
            "reward_model.ground_truth"]
    assert main([*args, "-o", str(tmp_path / "full.jsonl")]) == 0
    full = (tmp_path / "full.jsonl").read_text()
    assert main([*args, "-o", str(tmp_path / "part.jsonl")]) == 0
    # simulate a kill: keep 17 complete lines and half of the 18th
    lines = full.splitlines(keepends=True)
    (tmp_path / "part.jsonl").write_text("".join(lines[:17]) + lines[17][:20])
    state = tmp_path / ".part.jsonl.rewardkit-state.json"
    state.write_text(state.read_text().replace('"complete": true', '"complete": false'))
    assert main([*args, "-o", str(tmp_path / "part.jsonl")]) == 0
    assert (tmp_path / "part.jsonl").read_text() == full


def test_resume_refuses_an_output_from_a_different_run(tmp_path, capsys):
    write_jsonl(tmp_path / "in.jsonl", rows(5))
    out = str(tmp_path / "o.jsonl")
    assert main(["score", str(tmp_path / "in.jsonl"), "-r", "exact_match", "-q", "-o", out,
                 "--reference-field", "reward_model.ground_truth"]) == 0
    assert main(["score", str(tmp_path / "in.jsonl"), "-r", "regex", "-O", "pattern=1", "-q",
                 "-o", out]) != 0
    assert "different run" in capsys.readouterr().err
    assert main(["score", str(tmp_path / "in.jsonl"), "-r", "regex", "-O", "pattern=1", "-q",
                 "-o", out, "--overwrite"]) == 0


def test_existing_foreign_output_is_not_overwritten(tmp_path, capsys):
    write_jsonl(tmp_path / "in.jsonl", rows(2))
    (tmp_path / "o.jsonl").write_text("precious\n")
    assert main(["score", str(tmp_path / "in.jsonl"), "-r", "exact_match", "-o",
                 str(tmp_path / "o.jsonl")]) != 0
    assert (tmp_path / "o.jsonl").read_text() == "precious\n"
    assert "--overwrite" in capsys.readouterr().err


@pytest.mark.parametrize("out_name", ["o.jsonl", "o.parquet"])
def test_killed_run_keeps_rows_and_rerun_finishes_identically(tmp_path, out_name):
    """A real SIGKILL in the middle of a run, then the same command again."""
    write_jsonl(tmp_path / "in.jsonl", rows(400))
    out = tmp_path / out_name
    cmd = [sys.executable, "-m", "rewardkit", "score", str(tmp_path / "in.jsonl"), "-r",
           "tests.plugin_rewards:slow_len", "-O", "delay=0.002", "--chunk-size", "8", "-q",
           "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    journal = out if out_name.endswith(".jsonl") else tmp_path / f".{out_name}.partial.jsonl"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline and (not journal.exists() or journal.stat().st_size < 2000):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = journal.read_text().splitlines()
    assert 0 < len(kept) < 400
    for line in kept[:-1]:
        json.loads(line)  # every complete row intact
    assert subprocess.run(cmd, env=env, capture_output=True).returncode == 0
    if out_name.endswith(".jsonl"):
        final = read_jsonl(out)
    else:
        import pandas as pd

        final = pd.read_parquet(out).to_dict("records")
    assert [int(r["id"]) for r in final] == list(range(400))
    assert all(r["reward"] == len(r["completion"]) for r in final)


def _strict(line):
    def refuse(token):
        raise ValueError(f"{token} is not JSON")
    return json.loads(line, parse_constant=refuse)


@pytest.mark.parametrize("suffix", ["jsonl", "json"])
def test_output_is_strict_json_where_the_input_or_info_holds_nan(tmp_path, suffix):
    import numpy as np

    from rewardkit.dataio import dumps

    src = tmp_path / "in.jsonl"  # Python writes NaN as the bare token NaN; it reads it back
    src.write_text("".join(json.dumps({"prompt": "q", "completion": str(i), "reference": "1",
                                       "weight": float("nan") if i else 0.5,
                                       "extra": {"x": [float("inf"), 1.0]}}) + "\n"
                           for i in range(3)))
    out = tmp_path / f"o.{suffix}"
    assert main(["score", str(src), "-r", "exact_match", "-q", "-o", str(out)]) == 0
    text = out.read_text()
    rows_out = ([_strict(line) for line in text.splitlines()] if suffix == "jsonl"
                else _strict(text))
    assert [r["weight"] for r in rows_out] == [0.5, None, None]
    assert rows_out[1]["extra"] == {"x": [None, 1.0]}
    assert [r["reward"] for r in rows_out] == [0.0, 1.0, 0.0]
    info = {"value": 1.0, "info": {"ratio": np.float32("nan"), "curve": np.array([1.0, np.inf])}}
    assert _strict(dumps(info)) == {"value": 1.0, "info": {"ratio": None, "curve": [1.0, None]}}
