"""Host-side runners, one per reference style. Each returns a :class:`Outcome`: one verdict per
test, the candidate's stderr excerpt and the sandbox statuses seen.

- HumanEval and assert styles: the candidate runs in the sandbox behind the stub; the test code
  runs in a checker process (:mod:`.checkers`, :mod:`.harness`) holding the other end of the channel.
- call style: a checker process calls the candidate through the channel and compares what comes
  back (:mod:`.compare`), so the candidate's replies are never decoded in this process; each
  call has its own time limit, and a candidate that hangs or dies is restarted for the rest.

In both, each test's time verdict is the candidate's own CPU time, which the checker reads from
the kernel's accounts of the run (``RunHandle.accounts``, :mod:`.timing`), with the wall-clock
backstop an I/O-style case of the same limit gets.
- I/O style: one sandboxed run per case, stdin in, stdout compared here.
"""
from __future__ import annotations

import functools
import marshal
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardkit.sandboxes import Limits, Program, Sandbox
from rewardkit.sandboxes.limits import WALL_STRETCH
from rewardkit.scorer import RewardInputError

from .compare import CompareOptions, text_matches
from .checkers import CheckerLimit, CheckerPool, CheckerTimeout
from .references import CodeReference
from .wire import to_tree

# Seconds allowed on top of the per-test limits for starting the interpreter and loading code.
START_SLACK_S = 2.0
# Seconds a stub gets to exit after its channel is closed before it is killed.
END_GRACE_S = 0.5


@dataclass
class Outcome:
    """What running the tests produced.

    Attributes:
        tests: one dict per test: ``verdict`` ("passed", "wrong_answer", "failed", "timeout",
            "crashed", "not_run", or a sandbox status), ``time_s``, and ``message`` on failure.
        stderr: the start of the candidate's stderr.
        statuses: sandbox statuses of the runs (why each candidate process ended).
        errors: the sandbox's own account of each run it failed (``RunResult.error``: a
            refused limit, a lost fork server...), so a failure of the sandbox is never read
            as a failure of the candidate.
        unenforced: limits the runs went without (opted out of with ``allow_unenforced``).
    """

    tests: list[dict[str, Any]] = field(default_factory=list)
    stderr: str = ""
    statuses: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    unenforced: list[str] = field(default_factory=list)

    def add_result(self, result: Any, where: str = "") -> None:
        """Record how one sandboxed run ended."""
        self.statuses.append(result.status)
        if result.status == "sandbox_error":
            self.errors.append(f"{where}{result.error}")
        for name in getattr(result, "unenforced", ()):
            if name not in self.unenforced:
                self.unenforced.append(name)

    def add_stderr(self, text: str, limit: int) -> None:
        if text and len(self.stderr) < limit:
            self.stderr = (self.stderr + text)[:limit]


#: The file beside the bootstrap that holds the compiled ``rk_wire`` module and stub.
BYTECODE_FILE = "rk_stub.bin"


@functools.lru_cache(maxsize=1)
def candidate_program() -> Program:
    """The Python program the sandbox runs: registers :mod:`.wire` as ``rk_wire``, then runs the
    stub. Built once; the candidate's code arrives later over the channel, so the program is the
    same for every sample.

    Both are compiled here, once, and travel as marshal data in :data:`BYTECODE_FILE`:
    compiling their 15 kB of source in every run cost a sandboxed sample more than the rest of
    its run did (5-13 ms). The sandbox runs Python in a fork of this very interpreter
    (``sys.executable``), so the bytecode is valid there; it is our own code, written before the
    candidate's exists."""
    here = Path(__file__).parent
    code = tuple(compile((here / f"{src}.py").read_text(encoding="utf-8"), f"{name}.py", "exec")
                 for src, name in (("wire", "rk_wire"), ("candidate_stub", "rk_stub")))
    bootstrap = (
        "import marshal, sys, types\n"
        f"with open({BYTECODE_FILE!r}, 'rb') as _f:\n"
        "    _WIRE, _STUB = marshal.loads(_f.read())\n"
        "_m = types.ModuleType('rk_wire')\n"
        "exec(_WIRE, _m.__dict__)\n"
        "sys.modules['rk_wire'] = _m\n"
        "del _m, _f, _WIRE\n"
        "exec(_STUB, {'__name__': '__main__'})\n"
    )
    return Program(source=bootstrap, language="python", channel=True,
                   files={BYTECODE_FILE: marshal.dumps(code)})


def _limits(base: Limits, cpu_s: float, wall_s: float, memory_mb: int) -> Limits:
    return base.replace(cpu_s=cpu_s, wall_s=wall_s, memory_mb=memory_mb)


def _check(checkers: CheckerPool, job: dict[str, Any], proc: Any, budget: float) -> dict[str, Any]:
    """Run ``job`` in a checker; a checker killed at its deadline or limits fails the tests.

    The checker times each test on the run's CPU time (``proc.accounts()``: None where it is
    not accounted, and the checker falls back to the wall clock), with the wall-clock backstop
    of an I/O-style case of the same limit: ``WALL_STRETCH * (limit + START_SLACK_S)``. The
    checker itself is killed only at the whole run's backstop."""
    job["cpu_s"] = budget + START_SLACK_S
    job["wall_stretch"], job["wall_slack_s"] = WALL_STRETCH, START_SLACK_S
    backstop = proc.limits.wall_backstop_s + START_SLACK_S
    job["accounts"] = proc.accounts(timeout=backstop)
    try:
        return checkers.run(job, proc.channel, timeout=backstop)
    except CheckerTimeout as exc:
        return {"tests": [{"name": "test", "verdict": "timeout", "time_s": budget,
                           "message": str(exc)}], "checker_lost": True}
    except CheckerLimit as exc:
        return {"tests": [{"name": "test", "verdict": "crashed", "time_s": 0.0,
                           "message": str(exc)}], "checker_lost": True}


def run_checked(sandbox: Sandbox, checkers: CheckerPool, ref: CodeReference, code: str,
               timeout: float, memory_mb: int, base: Limits, stderr_chars: int,
               prelude: str | None = None) -> Outcome:
    """HumanEval / assert style: test code in a checker process, candidate in the sandbox.
    ``prelude`` is the trusted prompt whose helpers the tests may use."""
    outcome = Outcome()
    budget = timeout * (ref.time_units + 1) + START_SLACK_S
    program = candidate_program()
    job = {"style": ref.style, "code": code, "test": ref.test, "entry_point": ref.entry_point,
           "prelude": prelude, "timeout": timeout}
    with sandbox.start(program, _limits(base, budget, budget, memory_mb)) as proc:
        reply = _check(checkers, job, proc, budget)
        hung = reply.get("checker_lost") or \
            any(t.get("verdict") == "timeout" for t in reply.get("tests") or [])
        result = _end(proc, hung)
    outcome.add_result(result)
    outcome.add_stderr(result.stderr, stderr_chars)
    if result.status == "sandbox_error":
        return outcome  # the candidate never ran: the sandbox's error is the outcome
    if "error" in reply:
        raise RuntimeError(f"the checker failed: {reply['error']}")
    if reply.get("no_test_executed") and all(t.get("verdict") == "passed"
                                             for t in reply.get("tests") or []):
        raise RewardInputError(
            "no test executed: the reference's tests ran no assert and never called the "
            "candidate, so they prove nothing (tests under if __name__ == '__main__' and "
            "pytest-style test_* functions are run; unittest classes are not)")
    outcome.tests = list(reply.get("tests") or [])
    if not outcome.tests:
        outcome.tests = [{"name": "test", "verdict": "failed", "time_s": 0.0,
                          "message": reply.get("load_error") or "no test ran"}]
    return outcome


def run_calls(sandbox: Sandbox, checkers: CheckerPool, ref: CodeReference, code: str,
              timeout: float, memory_mb: int, base: Limits, compare: CompareOptions,
              stderr_chars: int) -> Outcome:
    """Call style: ``fn_name(*inputs[i]) == outputs[i]``, each case with its own time limit,
    called and compared in a checker process; a candidate that hung or died is restarted for the
    cases after it."""
    outcome = Outcome()
    program = candidate_program()
    n = len(ref.inputs)
    options = {"mode": compare.mode, "rel_tol": compare.rel_tol, "abs_tol": compare.abs_tol,
               "unwrap_singleton": compare.unwrap_singleton}
    done = 0
    while done < n:
        budget = timeout * (n - done + 1) + START_SLACK_S
        job = {"style": "call", "code": code, "fn_name": ref.fn_name or "",
               "inputs": to_tree(list(ref.inputs[done:])),
               "outputs": to_tree(list(ref.outputs[done:])), "compare": options,
               "timeout": timeout, "load_timeout": timeout + START_SLACK_S}
        with sandbox.start(program, _limits(base, budget, budget, memory_mb)) as proc:
            reply = _check(checkers, job, proc, budget)
            tests = list(reply.get("tests") or [])
            hung = bool(reply.get("checker_lost") or reply.get("load_error")) or \
                any(t.get("verdict") in ("timeout", "crashed") for t in tests)
            result = _end(proc, hung)
        outcome.add_result(result)
        outcome.add_stderr(result.stderr, stderr_chars)
        if result.status == "sandbox_error":
            return outcome
        if "error" in reply:
            raise RuntimeError(f"the checker failed: {reply['error']}")
        for entry in tests:
            entry.pop("name", None)
        if reply.get("load_error") or reply.get("checker_lost") or not tests:
            # Nothing more can be learnt from this candidate: the rest fail the same way.
            first = tests[0] if tests else {"verdict": "failed", "message": "no reply"}
            outcome.tests += [{"verdict": first["verdict"], "time_s": 0.0,
                               "message": first.get("message")} for _ in range(n - done)]
            outcome.tests[done]["time_s"] = first.get("time_s", 0.0)
            break
        outcome.tests += tests
        done += len(tests)
    return outcome


def _end(proc: Any, hung: bool = False) -> Any:
    """End a stub's run: hang up the channel so the stub exits by itself (a few ms, and its
    stderr is complete), and kill it if it has not within ``END_GRACE_S`` (at once when it is
    known to hang)."""
    if hung:
        proc.kill()
        return proc.result(timeout=START_SLACK_S)
    try:
        proc.channel.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        return proc.result(timeout=END_GRACE_S)
    except TimeoutError:
        proc.kill()
        return proc.result(timeout=START_SLACK_S)


def run_io(sandbox: Sandbox, ref: CodeReference, code: str, language: str, timeout: float,
           memory_mb: int, base: Limits, compare: CompareOptions, stderr_chars: int) -> Outcome:
    """I/O style: each case is its own run (its own time limit); stdout is compared here."""
    outcome = Outcome()
    programs = [Program(source=code, language=language, stdin=text) for text in ref.inputs]
    limits = _limits(base, timeout, timeout + START_SLACK_S, memory_mb)
    results = sandbox.run_many(programs, limits)
    for i, (result, expected) in enumerate(zip(results, ref.outputs)):
        outcome.add_result(result, f"case {i}: ")
        outcome.add_stderr(result.stderr, stderr_chars)
        entry: dict[str, Any] = {"time_s": round(result.wall_s, 6)}
        if result.status == "ok":
            if text_matches(result.stdout, expected, compare):
                entry["verdict"] = "passed"
            else:
                entry["verdict"] = "wrong_answer"
                entry["message"] = f"case {i}: printed {_short(result.stdout)}, " \
                                   f"expected {_short(expected)}"
        else:
            entry["verdict"] = result.status
            entry["message"] = f"case {i}: {result.status}" + (
                f" (exit code {result.exit_code})" if result.exit_code not in (None, 0) else "")
            if result.status == "compile_error":
                entry["message"] += ": " + _compile_text(result)
        outcome.tests.append(entry)
    return outcome


def _compile_text(result: Any) -> str:
    compile_result = getattr(result, "compile", None)
    text = getattr(compile_result, "stderr", None) or result.stderr or ""
    return text[:1000]


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."

