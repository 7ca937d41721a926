"""The trusted runner: runs a dataset's test code against the candidate, from outside the
candidate's process and sandbox.

A checker process (see :mod:`.checkers`) receives a job and the host end of the candidate's
channel.
It runs the test code here, on the trusted side, where ``candidate`` and every other name the
test borrows from the candidate's code are proxies: a call sends plain-data arguments over the
channel and gets plain data back (:mod:`.wire`). So a returned object cannot fake equality, the
candidate never sees the tests or ``check``, and an exit, a crash or a hang in the candidate only
breaks the channel, which fails the test. The verdict of each test is decided here: it passed
when its code (the ``check`` call, one top-level statement of an assert-style test file, or one
pytest-style ``test_*`` function) finished without an exception. Statements under ``if __name__
== "__main__":`` run like top-level ones. An exception is never dropped: any statement that
raises is a failed test of its own. A reference whose tests ran no ``assert`` and never called
the candidate proves nothing: that is reported (``no_test_executed``), never a pass.

Names the test reads but does not bind (resolved with Python's own scoping rules,
:mod:`symtable`) come from the candidate, as the benchmarks' harnesses run the test in the
program's globals: a function as a proxy, plain data by value, and a module the candidate
imported as the real standard-library module, imported here (never an object of the candidate).

Helpers the test takes from the dataset's prompt (HumanEval/38's ``encode_cyclic``) run in the
sandbox too, in a helper process the stub forks before the candidate's code loads (see
``candidate_stub.py``): prompt code is as untrusted as the data set it comes with, and never
runs on the host.

In call style the checker also calls the candidate and compares the values (:mod:`.compare`),
so the candidate's replies are decoded here, under this process's memory and CPU limits and a
bound on each reply's size checked before it is read, never in the scorer's own process. Each
test's time verdict is the candidate's own CPU time, read from the kernel's accounts of its run
(:mod:`.timing`), with a wall-clock backstop; both are enforced by a timer signal across every
read of a reply, decoding and the test's own code.

Run as ``python -m rewardkit.verifiers.code.harness FD MEMORY_MB [MAX_REPLY_BYTES]`` with FD the
control socket.
"""
from __future__ import annotations

import ast
import builtins
import math
import resource
import signal
import socket
import sys
import time
from typing import Any

from .channel import CandidateGone, CandidateTimeout, Channel, bind_names, error_fields
from .compare import CompareOptions, value_matches
from .messages import failure_message, printable, short_repr
from .scoping import free_names, module_bindings, stub_functions
from .testfile import (collect_test_functions, instrumented, required_parameters,
                       top_level_statements)
from .timing import CaseClock, open_meter
from .wire import MAX_MESSAGE_BYTES, WireError, from_tree, recv_msg, send_msg

class PromptCodeError(RuntimeError):
    """The dataset's prompt code, whose helpers the test needs, could not be run in the
    sandbox: an error of the reward, reported as the job's error."""


class _Alarm:
    """A test's time limit as a timer signal: from the moment the test could first be over it,
    the signal checks the test's clock (:meth:`.CaseClock.check`) and stops whatever runs past
    the limit here (a read of a reply, decoding a crafted one, the test's own code grinding on
    a huge value); otherwise it sets itself for the next check."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def __enter__(self) -> "_Alarm":
        signal.signal(signal.SIGALRM, self._fire)
        signal.setitimer(signal.ITIMER_REAL, self.channel.clock.first_check_in())
        return self

    def _fire(self, *_: Any) -> None:
        clock = self.channel.clock
        wait = clock.check()
        if wait > 0:
            signal.setitimer(signal.ITIMER_REAL, wait)
            return
        self.channel.gone = self.channel.gone or "the candidate timed out"
        raise CandidateTimeout(clock.reason or "time limit exceeded")

    def __exit__(self, *_: Any) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)


class Checker:
    """Runs one job: load the candidate (and the prompt's helpers, in the sandbox), bind the
    names the test borrows, run each test."""

    def __init__(self, job: dict[str, Any], sock: socket.socket,
                 max_reply_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.job = job
        self.timeout = float(job["timeout"])
        self.meter = open_meter(job.get("accounts"))
        self.clock = CaseClock(self.meter, float(job.get("wall_stretch", 1.0)),
                               float(job.get("wall_slack_s", 0.0)))
        self.channel = Channel(sock, self.clock, max_reply_bytes)
        self.helper: Channel | None = None
        self.results: list[dict[str, Any]] = []
        self.checks = 0

    def _count_check(self) -> None:
        self.checks += 1

    def run(self) -> dict[str, Any]:
        try:
            if self.job["style"] == "call":
                return self._run_calls()
            return self._run_tests()
        finally:
            if self.helper is not None:
                self.helper.sock.close()
            if self.meter is not None:
                self.meter.close()

    def _run_tests(self) -> dict[str, Any]:
        namespace, load_error = self._load()
        units = self._tests()
        if load_error is not None:
            verdict = "crashed" if self.channel.gone else "failed"
            for name, _, counted in units:
                if counted:
                    self._record(name, verdict, load_error, 0.0)
            if not self.results:
                self._record("test", verdict, load_error, 0.0)
            return self._reply(load_error)
        stopped: str | None = None
        exited = False
        for name, code, counted in units:
            if stopped is not None:
                if counted:
                    self._record(name, "not_run", stopped, 0.0)
                continue
            checks_before = self.checks
            verdict, message, elapsed, cpu = self._run_one(code, namespace,
                                                           exit_ends_script=True)
            if verdict in ("exited", "exited_failing"):
                # sys.exit(): the script ends here, as under `python test.py`; a non-zero
                # status is a failed test and the tests after it are not run.
                if verdict == "exited_failing":
                    self._record(name, "failed", message, elapsed, cpu)
                    stopped = f"not run: {message}"
                    continue
                if self.checks > checks_before:
                    self._record(name, "passed", None, elapsed, cpu)
                exited = True
                break
            # Any exception is a failed test, never dropped: a statement that is not a test in
            # itself (a `for` block, a `check(f)` call, a setup line) counts as one when it
            # fails, and when it ran checks of its own.
            if counted or verdict != "passed" or self.checks > checks_before:
                self._record(name, verdict, message, elapsed, cpu)
            if verdict in ("timeout", "crashed"):
                stopped = f"not run: {message}"
        if self.job["style"] == "assert" and not exited:
            for name, fn in collect_test_functions(namespace):
                if stopped is not None:
                    self._record(name, "not_run", stopped, 0.0)
                    continue
                needs = required_parameters(fn)
                if needs:
                    self._record(name, "failed", f"{name} needs arguments {needs} (pytest "
                                 "fixtures and parametrize are not supported)", 0.0)
                    continue
                verdict, message, elapsed, cpu = self._run_one(fn, namespace)
                self._record(name, verdict, message, elapsed, cpu)
                if verdict in ("timeout", "crashed"):
                    stopped = f"not run: {message}"
        return self._reply(None)

    def _reply(self, load_error: str | None) -> dict[str, Any]:
        reply = {"tests": self.results, "load_error": load_error, "calls": self.channel.calls,
                 "checks": self.checks}
        if load_error is None and self.channel.calls == 0 and self.checks == 0:
            reply["no_test_executed"] = True
        return reply

    def _record(self, name: str | None, verdict: str, message: str | None, elapsed: float,
                cpu: float | None = None) -> None:
        entry: dict[str, Any] = {"name": name, "verdict": verdict, "time_s": round(elapsed, 6)}
        if cpu is not None:
            entry["cpu_s"] = round(cpu, 6)
        if message:
            entry["message"] = printable(message)
        self.results.append(entry)

    def _prompt_helpers(self, namespace: dict[str, Any], wanted: set[str]) -> set[str]:
        """Bind the names in ``wanted`` that the dataset's prompt (the reference's ``prompt`` or
        the sample's prompt) defines, run in a helper process in the sandbox; the names bound.

        This happens before the candidate's code is loaded, so a prompt that cannot be run is
        never the candidate's doing: it is an error of the reward (:class:`PromptCodeError`),
        not a failed test."""
        prelude = self.job.get("prelude")
        wanted = wanted & module_bindings(prelude) - stub_functions(prelude) if prelude \
            else set()
        if not wanted:
            return set()
        try:
            with _Alarm(self.channel):
                self.helper = self.channel.spawn_helper()
                if self.helper is None:
                    raise PromptCodeError("the sandboxed program could not start a process for "
                                          "the prompt's code (fork failed or the program ended)")
                reply = self.helper.request({"op": "load", "code": prelude,
                                             "names": sorted(wanted)})
        except (CandidateGone, CandidateTimeout) as exc:
            raise PromptCodeError(f"running the prompt's code: {exc}") from None
        if reply.get("ok") is not True:
            kind, text = error_fields(reply.get("error"))
            raise PromptCodeError(f"the prompt's code raised {kind}: {text}")
        return bind_names(namespace, self.helper, reply.get("names"), wanted,
                     ("callable", "value", "module"))

    def _load(self) -> tuple[dict[str, Any], str | None]:
        job = self.job
        namespace: dict[str, Any] = {"__name__": "__test__", "__builtins__": builtins,
                                     "__rk_check__": self._count_check}
        entry = job.get("entry_point")
        free = free_names(job["test"])
        self.clock.start(self.timeout)
        from_prompt = self._prompt_helpers(namespace, free - {entry, "candidate"})
        wanted = free - from_prompt
        if entry:
            wanted.add(entry)
        self.clock.start(self.timeout)
        try:
            with _Alarm(self.channel):
                reply = self.channel.request({"op": "load", "code": job["code"],
                                              "names": sorted(wanted)})
        except (CandidateGone, CandidateTimeout) as exc:
            return namespace, f"loading the candidate's code: {exc}"
        if reply.get("ok") is not True:
            kind, text = error_fields(reply.get("error"))
            return namespace, f"the candidate's code raised {kind}: {text}"
        names = reply.get("names")
        if job["style"] == "humaneval":
            # check(candidate) receives the entry point; every other name the test uses is the
            # dataset's (the prompt's helpers, such as HumanEval/38's encode_cyclic), never the
            # candidate's own definition of it; only a module the program imported is taken,
            # as the real module.
            bind_names(namespace, self.channel, names, {entry}, ("callable",))
            bind_names(namespace, self.channel, names, wanted - {entry}, ("module",))
        else:
            bind_names(namespace, self.channel, names, wanted, ("callable", "value", "module"))
        if entry and not (isinstance(names, dict) and entry in names
                          and callable(namespace.get(entry))):
            return namespace, f"the candidate's code does not define {entry}()"
        if entry and "candidate" not in namespace:
            namespace["candidate"] = namespace[entry]
        return namespace, None

    def _tests(self) -> list[tuple[str, Any, bool]]:
        """(name, code, counted) in order: ``counted`` marks a test in itself (an ``assert``, the
        ``check`` call); any other statement becomes a test when it fails or runs checks."""
        test = self.job["test"]
        tree = ast.parse(test)
        if self.job["style"] == "humaneval":
            return [("test code", compile(instrumented(tree), "<test>", "exec"), False),
                    ("check", compile("check(__rk_candidate__)", "<check>", "exec"), True)]
        out: list[tuple[str, Any, bool]] = []
        for stmt in top_level_statements(tree):
            module = ast.Module(body=[stmt], type_ignores=[])
            code = compile(instrumented(module), "<test>", "exec")
            name = f"line {stmt.lineno}: {ast.get_source_segment(test, stmt) or ''}"[:200]
            out.append((name, code, isinstance(stmt, ast.Assert)))
        return out

    def _run_one(self, code: Any, namespace: dict[str, Any], exit_ends_script: bool = False
                 ) -> tuple[str, str | None, float, float | None]:
        """Run one test (compiled code, or a test function) under its time limit: (verdict,
        message, wall seconds, the candidate's CPU seconds or None where not measured). With
        ``exit_ends_script`` (a top-level statement), ``sys.exit(0)`` gives "exited"."""
        verdict, message, elapsed = self._run_timed(code, namespace, exit_ends_script)
        cpu = self.clock.cpu_used()
        if verdict == "passed" and self.clock.over_cpu(cpu):
            verdict, message = "timeout", self.clock.reason
        return verdict, message, elapsed, cpu

    def _run_timed(self, code: Any, namespace: dict[str, Any],
                   exit_ends_script: bool) -> tuple[str, str | None, float]:
        if self.job.get("entry_point"):
            namespace["__rk_candidate__"] = namespace.get(self.job["entry_point"])
        self.clock.start(self.timeout)
        start = time.perf_counter()
        try:
            with _Alarm(self.channel):
                if callable(code):
                    code()
                else:
                    exec(code, namespace)
        except CandidateTimeout as exc:
            return "timeout", str(exc), time.perf_counter() - start
        except CandidateGone as exc:
            return "crashed", str(exc), time.perf_counter() - start
        except SystemExit as exc:
            # The test code's own exit (a candidate's exit only ever arrives as CandidateGone):
            # at top level, exit status 0 ends the test script as `python test.py` would.
            if exit_ends_script and not self.channel.gone:
                if exc.code in (None, 0, False):
                    return "exited", None, time.perf_counter() - start
                return "exited_failing", f"the test code exited with status " \
                    f"{short_repr(exc.code)}", time.perf_counter() - start
            verdict = "crashed" if self.channel.gone else "failed"
            return verdict, self.channel.gone or f"the test code exited with status " \
                f"{short_repr(exc.code)}", time.perf_counter() - start
        except BaseException as exc:  # noqa: BLE001 - a failing test is a verdict
            verdict = "crashed" if self.channel.gone else "failed"
            return verdict, self.channel.gone or failure_message(exc, self.job["test"]), \
                time.perf_counter() - start
        if self.channel.gone:  # the test swallowed the candidate's exit: still a failure
            verdict = "timeout" if "timed out" in self.channel.gone else "crashed"
            return verdict, self.channel.gone, time.perf_counter() - start
        return "passed", None, time.perf_counter() - start

    # -- call style -----------------------------------------------------------------------------
    def _run_calls(self) -> dict[str, Any]:
        """``fn_name(*inputs[i]) == outputs[i]`` case by case, until the candidate is gone (the
        host then starts a fresh candidate for the rest)."""
        job = self.job
        fn = job["fn_name"]
        inputs, outputs = from_tree(job["inputs"]), from_tree(job["outputs"])
        options = CompareOptions(**job["compare"])
        self.clock.start(float(job["load_timeout"]))
        load_error = self._load_for_call(fn)
        if load_error is not None:
            self._record(None, "failed", load_error, 0.0)
            return {"tests": self.results, "load_error": load_error}
        for args, expected in zip(inputs, outputs):
            self.clock.start(self.timeout)
            start = time.perf_counter()
            entry: dict[str, Any] = {}
            try:
                with _Alarm(self.channel):
                    value = self.channel.call(fn, tuple(args), {})
                    matched = value_matches(value, expected, options)
                if matched:
                    entry["verdict"] = "passed"
                else:
                    entry["verdict"] = "wrong_answer"
                    entry["message"] = f"{fn}{short_repr(tuple(args))} returned {short_repr(value)}, " \
                                       f"expected {short_repr(expected)}"
            except CandidateTimeout as exc:
                entry = {"verdict": "timeout", "message": str(exc)}
            except CandidateGone as exc:
                entry = {"verdict": "crashed", "message": str(exc)}
            except Exception as exc:  # noqa: BLE001 - the candidate raised: a failed case
                entry = {"verdict": "failed", "message": f"{type(exc).__name__}: {exc}"[:2000]}
            entry["time_s"] = round(time.perf_counter() - start, 6)
            cpu = self.clock.cpu_used()
            if cpu is not None:
                entry["cpu_s"] = round(cpu, 6)
            if entry["verdict"] in ("passed", "wrong_answer") and self.clock.over_cpu(cpu):
                entry.update(verdict="timeout", message=self.clock.reason)
            if "message" in entry:
                entry["message"] = printable(entry["message"])
            self.results.append(entry)
            if self.channel.gone:
                break
        return {"tests": self.results, "load_error": None}

    def _load_for_call(self, fn: str) -> str | None:
        try:
            with _Alarm(self.channel):
                reply = self.channel.request({"op": "load", "code": self.job["code"],
                                              "names": [fn]})
        except (CandidateGone, CandidateTimeout) as exc:
            return f"loading the candidate's code: {exc}"
        if reply.get("ok") is not True:
            kind, text = error_fields(reply.get("error"))
            return f"the candidate's code raised {kind}: {text}"[:2000]
        names = reply.get("names")
        if not isinstance(names, dict) or not isinstance(names.get(fn), dict) \
                or names[fn].get("kind") != "callable":
            return f"the candidate's code does not define {fn}()"
        return None


def _limit_job_cpu(seconds: float) -> None:
    """Let this checker use at most ``seconds`` more CPU time (SIGXCPU ends it past that); the
    limit is moved forward for each job since the checker process is reused."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(used + seconds) + 1
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def serve(control: socket.socket, max_reply_bytes: int = MAX_MESSAGE_BYTES) -> None:
    """Checker loop: per job, a 1-byte message carrying the channel's fd, then the job."""
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(control, 1, 1)
        except OSError:
            return
        if not fds:
            return
        with socket.socket(fileno=fds[0]) as channel:
            try:
                job = recv_msg(control, max_nodes=None)
            except WireError:
                return
            _limit_job_cpu(float(job.get("cpu_s", 3600)))
            try:
                reply = Checker(job, channel, max_reply_bytes).run()
            except Exception as exc:  # noqa: BLE001 - reported as the job's error
                reply = {"error": f"{type(exc).__name__}: {exc}"}
        send_msg(control, reply)


def main(argv: list[str]) -> None:
    """Set this checker's own limits, then serve: whatever a candidate sends is decoded here, so
    it can cost no more memory than ``MEMORY_MB``, and no reply over ``MAX_REPLY_BYTES`` is
    read at all."""
    sys.setrecursionlimit(10_000)
    if len(argv) > 2:
        limit = int(argv[2]) << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    max_reply = int(argv[3]) if len(argv) > 3 else MAX_MESSAGE_BYTES
    serve(socket.socket(fileno=int(argv[1])), max_reply)


if __name__ == "__main__":
    main(sys.argv)
