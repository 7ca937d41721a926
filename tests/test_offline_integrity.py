"""`rewardkit score` checks the data, not its own markers: a rerun compares the output with the
input and resumes or refuses with the reason; workers die with a killed parent; a run whose rows
all fail exits non-zero; CLI mistakes get clean errors."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardkit.cli import main
from tests.conftest import alive, descendants

ROOT = Path(__file__).resolve().parents[1]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def rows(n, start=0):
    return [{"id": i, "prompt": f"q{i}", "completion": str(i % 3), "reference": "1"}
            for i in range(start, start + n)]


def score(*args):
    return main(["score", *map(str, args), "-r", "exact_match", "-q"])


def test_truncated_complete_jsonl_output_is_resumed_not_reported_complete(tmp_path, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    write_jsonl(src, rows(50))
    assert score(src, "-o", out) == 0
    full = out.read_text()
    lines = full.splitlines(keepends=True)
    out.write_text("".join(lines[:20]) + lines[20][:15])  # cut mid-line after completion
    capsys.readouterr()
    assert score(src, "-o", out) == 0
    printed = capsys.readouterr().out
    assert "already complete" not in printed
    assert "rows: 50 (20 from an earlier run)" in printed
    assert out.read_text() == full


def test_complete_output_rerun_says_nothing_to_do_and_counts_the_real_rows(tmp_path, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    write_jsonl(src, rows(30))
    assert score(src, "-o", out) == 0
    capsys.readouterr()
    assert score(src, "-o", out) == 0
    printed = capsys.readouterr().out
    assert "nothing to do" in printed and "rows: 30" in printed
    assert len(read_jsonl(out)) == 30


def test_truncated_complete_csv_output_is_refused_with_the_row_counts(tmp_path, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "o.csv"
    write_jsonl(src, rows(40))
    assert score(src, "-o", out) == 0
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:11]))  # header + 10 rows
    capsys.readouterr()
    assert score(src, "-o", out) == 1
    err = capsys.readouterr().err
    assert "holds 10 rows for 40 input rows" in err and "--overwrite" in err


def test_input_rewritten_in_place_is_refused_naming_the_change(tmp_path, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    write_jsonl(src, rows(20))
    assert score(src, "-o", out) == 0
    write_jsonl(src, rows(25, start=100))  # same path, other rows
    capsys.readouterr()
    assert score(src, "-o", out) == 1
    err = capsys.readouterr().err
    assert "in.jsonl' changed since" in err and "size" in err and "--overwrite" in err
    assert [r["id"] for r in read_jsonl(out)] == list(range(20))  # untouched
    # same size, different content is caught by the content hash
    write_jsonl(src, rows(20))
    assert score(src, "-o", out, "--overwrite") == 0
    text = src.read_text().replace('"q1"', '"Q1"')
    src.write_text(text)
    assert score(src, "-o", out) == 1
    assert "same size, different content" in capsys.readouterr().err


def test_part_finished_output_of_an_old_input_is_not_continued_with_new_rows(tmp_path, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    write_jsonl(src, rows(30))
    assert score(src, "-o", out) == 0
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:10]))
    write_jsonl(src, rows(30, start=1000))
    capsys.readouterr()
    assert score(src, "-o", out) == 1
    assert "changed since" in capsys.readouterr().err
    assert len(read_jsonl(out)) == 10


def test_journal_rows_that_do_not_match_the_input_are_refused(tmp_path, capsys):
    """Even without a fingerprint (state files of older versions), the rows are compared."""
    src, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    write_jsonl(src, rows(30))
    assert score(src, "-o", out) == 0
    state = tmp_path / ".o.jsonl.rewardkit-state.json"
    data = json.loads(state.read_text())
    del data["input_fingerprint"]
    state.write_text(json.dumps(data))
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:10]))
    write_jsonl(src, rows(30, start=1000))
    capsys.readouterr()
    assert score(src, "-o", out) == 1
    assert "does not hold row 1 of input" in capsys.readouterr().err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_and_resource_tracker_die_when_the_main_process_is_sigkilled(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", rows(4000))
    out = tmp_path / "o.jsonl"
    cmd = [sys.executable, "-m", "rewardkit", "score", str(tmp_path / "in.jsonl"), "-r",
           "tests.plugin_rewards:slow_len", "-O", "delay=0.005", "--chunk-size", "4", "-j", "2",
           "-q", "-o", str(out)]
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or out.stat().st_size < 500):
        time.sleep(0.05)
    kids = descendants(proc.pid)
    assert len(kids) >= 2, "the run should have started its worker processes"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 30
    while time.time() < deadline and any(alive(k) for k in kids):
        time.sleep(0.1)
    survivors = [k for k in kids if alive(k)]
    for k in survivors:  # leave nothing behind even when the assertion fails
        os.kill(k, signal.SIGKILL)
    assert survivors == []


def test_a_run_where_every_row_fails_exits_nonzero_after_writing(tmp_path, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "o.jsonl"
    write_jsonl(src, rows(5))
    assert score(src, "--completion-field", "answer", "-o", out) == 3
    captured = capsys.readouterr()
    assert "5 of 5 rows could not be scored" in captured.err
    assert "field 'answer' not found" in captured.out  # the first error is shown
    assert len(read_jsonl(out)) == 5  # written anyway


def test_max_error_fraction_sets_the_failure_threshold(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    good = rows(8)
    bad = [{"id": 99, "prompt": "p", "reference": "1"}] * 2  # no completion
    write_jsonl(src, good + bad)
    assert score(src, "-o", tmp_path / "a.jsonl") == 0  # 20% failed: default only fails at 100%
    assert score(src, "-o", tmp_path / "b.jsonl", "--max-error-fraction", "0.1") == 3
    assert score(src, "-o", tmp_path / "c.jsonl", "--max-error-fraction", "0.25") == 0
    with pytest.raises(SystemExit):
        score(src, "-o", tmp_path / "d.jsonl", "--max-error-fraction", "2")


@pytest.mark.parametrize("option, message", [
    ("mode=sideways", "regex mode must be"),
    ("pattern=(", "invalid regex pattern"),
])
def test_a_bad_option_value_is_a_clean_error_not_a_traceback(tmp_path, capsys, option, message):
    write_jsonl(tmp_path / "in.jsonl", rows(2))
    rc = main(["score", str(tmp_path / "in.jsonl"), "-r", "regex", "-O", option, "-o",
               str(tmp_path / "o.jsonl")])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("error: reward 'regex':") and message in err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_bad_json_rows_keep_the_error_position(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"completion": "a", "reference": "a"}\n'
                                       '{"completion": "a", "reference": }\n')
    score(tmp_path / "in.jsonl", "-o", tmp_path / "o.jsonl")
    error = read_jsonl(tmp_path / "o.jsonl")[1]["reward_info"]["error"]
    assert "line 2 is not valid JSON" in error and "column 34" in error


def test_a_null_field_is_reported_as_null_not_missing(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", [{"prompt": None, "completion": None, "reference": "a"},
                                        {"prompt": None, "completion": "a", "gold": None}])
    score(tmp_path / "in.jsonl", "-o", tmp_path / "o.jsonl")
    score(tmp_path / "in.jsonl", "--reference-field", "gold", "-o", tmp_path / "g.jsonl")
    first = read_jsonl(tmp_path / "o.jsonl")[0]["reward_info"]["error"]
    assert "'completion' is null" in first and "missing" not in first
    second = read_jsonl(tmp_path / "g.jsonl")[1]["reward_info"]["error"]
    assert "'gold' is null" in second


def test_a_datasetdict_folder_uses_the_documented_default_split(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "dd"
    datasets.DatasetDict({
        "train": datasets.Dataset.from_list(rows(3)),
        "test": datasets.Dataset.from_list(rows(5)),
    }).save_to_disk(str(folder))
    assert score(folder, "-o", tmp_path / "o.jsonl") == 0
    assert len(read_jsonl(tmp_path / "o.jsonl")) == 3
    assert score(folder, "--split", "test", "-o", tmp_path / "t.jsonl") == 0
    assert len(read_jsonl(tmp_path / "t.jsonl")) == 5


def test_too_large_completions_are_counted_in_the_summary(tmp_path, capsys):
    write_jsonl(tmp_path / "in.jsonl", [{"completion": "\\boxed{4}", "reference": "4"},
                                        {"completion": "1" * 200, "reference": "4"}])
    rc = main(["score", str(tmp_path / "in.jsonl"), "-r", "math", "-O", "max_completion_chars=100",
               "-q", "-o", str(tmp_path / "o.jsonl")])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "too_large: 1" in printed


def test_mistyped_flags_get_a_suggestion(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["score", "in.jsonl", "-r", "math", "-o", "o.jsonl", "--completion-feild", "x"])
    assert "did you mean --completion-field" in capsys.readouterr().err


def test_the_summary_says_where_the_output_was_written(tmp_path, capsys):
    write_jsonl(tmp_path / "in.jsonl", rows(3))
    assert score(tmp_path / "in.jsonl", "-o", tmp_path / "sub" / "o.jsonl") == 0
    assert f"output: {tmp_path / 'sub' / 'o.jsonl'} (3 rows)" in capsys.readouterr().out


def test_yaml_syntax_error_names_the_file_and_line(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("reward:\n  rewards: {a: [\n")
    write_jsonl(tmp_path / "in.jsonl", rows(1))
    assert main(["score", str(tmp_path / "in.jsonl"), "-c", str(tmp_path / "bad.yaml"), "-o",
                 str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("bad.yaml") >= 2 and "line 3" in err


def test_normalize_beside_reward_warns_that_it_is_ignored(tmp_path):
    import rewardkit
    from rewardkit.compose import ConfigWarning

    path = tmp_path / "r.yaml"
    path.write_text("reward:\n  rewards: {a: exact_match}\nnormalize: group\nclip: [0, 1]\n")
    with pytest.warns(ConfigWarning, match=r"r\.yaml: `clip:`, `normalize:` at the top level"):
        rewardkit.load(str(path))


def test_chunks_cut_between_prompts_read_at_a_dotted_prompt_field():
    """A dotted --prompt-field (verl's ``extra.question``) groups rows by that prompt: a chunk
    (and a --ray shard, cut by the same function) never splits one prompt's completions."""
    from rewardkit.offline import Fields, chunks

    rows = [{"extra": {"question": q}, "completion": c} for q in "AABBCC" for c in ("x",)]
    fields = Fields(prompt="extra.question")
    got = [[r["extra"]["question"] for r in chunk] for chunk in chunks(iter(rows), 2, fields)]
    assert got == [["A", "A"], ["B", "B"], ["C", "C"]]
