"""The trusted runner: runs a dataset's test code against the candidate, from outside the
candidate's process and sandbox.

A judge process (see :mod:`.judges`) receives a job and the host end of the candidate's channel.
It runs the test code here, on the trusted side, where ``candidate`` and every other name the
test borrows from the candidate's code are proxies: a call sends plain-data arguments over the
channel and gets plain data back (:mod:`.wire`). So a returned object cannot fake equality, the
candidate never sees the tests or ``check``, and an exit, a crash or a hang in the candidate only
breaks the channel, which fails the test. The verdict of each test is decided here: it passed
when its code (the ``check`` call, or one ``assert`` statement) finished without an exception.

Run as ``python -m rewardkit.verifiers.code.harness FD`` with FD the control socket.
"""
from __future__ import annotations

import ast
import builtins
import socket
import sys
import time
import traceback
from typing import Any, Callable

from .wire import WireError, from_tree, recv_msg, send_msg, to_tree


class CandidateGone(BaseException):
    """The candidate process ended, hung up, or broke the protocol. A BaseException so that a
    test's ``except Exception`` cannot swallow it into a pass."""


class CandidateTimeout(BaseException):
    """The candidate did not answer within the test's time limit."""


class CandidateError(Exception):
    """The candidate raised an exception that is not a builtin one (its type name and message
    are in the text)."""


def _rebuild(kind: str, message: str) -> Exception:
    """The candidate's exception on the trusted side: the same builtin type when it is one (a
    test may expect ``ValueError``), else :class:`CandidateError`. Never a type the candidate
    defined."""
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - some builtin exceptions take other arguments
            pass
    return CandidateError(f"{kind}: {message}")


class Channel:
    """The trusted end of the candidate's channel, with the current test's deadline."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.deadline = float("inf")
        self.gone: str | None = None
        self.calls = 0

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.gone:
            raise CandidateGone(self.gone)
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise CandidateTimeout("time limit exceeded")
        try:
            self.sock.settimeout(remaining)
            send_msg(self.sock, message)
            return recv_msg(self.sock)
        except socket.timeout:
            self.gone = "the candidate timed out"
            raise CandidateTimeout("time limit exceeded") from None
        except (WireError, OSError) as exc:
            self.gone = f"the candidate process ended or hung up ({exc})"
            raise CandidateGone(self.gone) from None

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        try:
            message = {"op": "call", "name": name, "args": to_tree(list(args)),
                       "kwargs": to_tree(dict(kwargs))}
        except WireError as exc:
            raise TypeError(f"cannot pass this argument to the candidate's {name}(): {exc}") \
                from None
        self.calls += 1
        reply = self.request(message)
        if reply.get("ok") is True:
            try:
                return from_tree(reply.get("value"))
            except WireError as exc:
                self.gone = f"the candidate sent a malformed value ({exc})"
                raise CandidateGone(self.gone) from None
        kind, text = _error_fields(reply.get("error"))
        if reply.get("fatal"):
            self.gone = f"the candidate exited ({kind}: {text})"
            raise CandidateGone(self.gone)
        raise _rebuild(kind, text)


def _error_fields(error: Any) -> tuple[str, str]:
    if isinstance(error, list) and len(error) == 2 and all(isinstance(e, str) for e in error):
        return error[0][:200], error[1][:2000]
    return "Error", "the candidate reported a malformed error"


def proxy(channel: Channel, name: str) -> Callable[..., Any]:
    """A trusted-side stand-in for the candidate's function ``name``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return channel.call(name, args, kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def free_names(source: str) -> set[str]:
    """Names ``source`` reads but binds nowhere (no assignment, parameter, import or def) and
    that are not builtins: the ones the test expects the candidate's code (or the prelude) to
    define. Over-approximating is harmless: a name the candidate does not define is skipped."""
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return read - bound - set(dir(builtins))


def _message(exc: BaseException, test: str) -> str:
    """A failure's message; a bare ``assert`` is named by its line of the test."""
    if isinstance(exc, AssertionError) and not str(exc):
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<test>"]
        lines = test.splitlines()
        if frames and frames[-1].lineno and 0 < frames[-1].lineno <= len(lines):
            return f"assertion failed (test line {frames[-1].lineno}): " \
                   f"{lines[frames[-1].lineno - 1].strip()[:300]}"
        return "assertion failed"
    return f"{type(exc).__name__}: {exc}"[:2000]


class Judge:
    """Runs one job: load the candidate, bind the names the test borrows, run each test."""

    def __init__(self, job: dict[str, Any], sock: socket.socket) -> None:
        self.job = job
        self.timeout = float(job["timeout"])
        self.channel = Channel(sock)
        self.results: list[dict[str, Any]] = []

    def run(self) -> dict[str, Any]:
        namespace, load_error = self._load()
        statements = self._tests()
        if load_error is not None:
            verdict = "crashed" if self.channel.gone else "failed"
            for name, _ in statements:
                if name is not None:
                    self._record(name, verdict, load_error, 0.0)
            return self._reply(load_error)
        setup_error: str | None = None
        for name, code in statements:
            if setup_error is not None:
                self._record(name, "not_run", setup_error, 0.0)
                continue
            verdict, message, elapsed = self._run_one(code, namespace)
            if name is None:  # a setup statement: only its failure matters
                if verdict != "passed":
                    setup_error = f"setup failed: {message}"
                continue
            self._record(name, verdict, message, elapsed)
            if verdict in ("timeout", "crashed"):
                setup_error = f"not run: {message}"
        if setup_error is not None and not self.results:
            self._record("test", "failed", setup_error, 0.0)
        return self._reply(None)

    def _reply(self, load_error: str | None) -> dict[str, Any]:
        return {"tests": self.results, "load_error": load_error, "calls": self.channel.calls}

    def _record(self, name: str | None, verdict: str, message: str | None, elapsed: float) -> None:
        entry: dict[str, Any] = {"name": name, "verdict": verdict, "time_s": round(elapsed, 6)}
        if message:
            entry["message"] = message
        self.results.append(entry)

    def _load(self) -> tuple[dict[str, Any], str | None]:
        job = self.job
        namespace: dict[str, Any] = {"__name__": "__test__", "__builtins__": builtins}
        prelude_names: set[str] = set()
        if job.get("prelude"):
            try:
                exec(compile(job["prelude"], "<prelude>", "exec"), namespace)
                prelude_names = {k for k in namespace if not k.startswith("__")}
            except Exception:  # noqa: BLE001 - a prelude that does not run only loses helpers
                namespace = {"__name__": "__test__", "__builtins__": builtins}
        entry = job.get("entry_point")
        wanted = free_names(job["test"]) - prelude_names
        if entry:
            wanted.add(entry)
        self.channel.deadline = time.monotonic() + self.timeout
        try:
            reply = self.channel.request({"op": "load", "code": job["code"],
                                          "names": sorted(wanted)})
        except (CandidateGone, CandidateTimeout) as exc:
            return namespace, f"loading the candidate's code: {exc}"
        if reply.get("ok") is not True:
            kind, text = _error_fields(reply.get("error"))
            return namespace, f"the candidate's code raised {kind}: {text}"
        names = reply.get("names")
        for name, spec in (names.items() if isinstance(names, dict) else ()):
            if name not in wanted or not isinstance(spec, dict):
                continue
            if spec.get("kind") == "callable":
                namespace[name] = proxy(self.channel, name)
            elif spec.get("kind") == "value":
                try:
                    namespace[name] = from_tree(spec.get("value"))
                except WireError:
                    continue
        if entry and not (isinstance(names, dict) and entry in names
                          and callable(namespace.get(entry))):
            return namespace, f"the candidate's code does not define {entry}()"
        if entry and "candidate" not in namespace:
            namespace["candidate"] = namespace[entry]
        return namespace, None

    def _tests(self) -> list[tuple[str | None, Any]]:
        """(name, code) pairs in order; name None marks a setup statement."""
        test = self.job["test"]
        if self.job["style"] == "humaneval":
            return [(None, compile(test, "<test>", "exec")),
                    ("check", compile("check(__rk_candidate__)", "<check>", "exec"))]
        tree = ast.parse(test)
        out: list[tuple[str | None, Any]] = []
        asserts = [isinstance(s, ast.Assert) for s in tree.body]
        if not any(asserts):
            return [("test", compile(tree, "<test>", "exec"))]
        for stmt, is_assert in zip(tree.body, asserts):
            code = compile(ast.Module(body=[stmt], type_ignores=[]), "<test>", "exec")
            name = f"line {stmt.lineno}: {ast.get_source_segment(test, stmt) or ''}"[:200]
            out.append((name if is_assert else None, code))
        return out

    def _run_one(self, code: Any, namespace: dict[str, Any]) -> tuple[str, str | None, float]:
        if self.job.get("entry_point"):
            namespace["__rk_candidate__"] = namespace.get(self.job["entry_point"])
        self.channel.deadline = time.monotonic() + self.timeout
        start = time.perf_counter()
        try:
            exec(code, namespace)
        except CandidateTimeout:
            return "timeout", f"time limit of {self.timeout:g} s exceeded", \
                time.perf_counter() - start
        except CandidateGone as exc:
            return "crashed", str(exc), time.perf_counter() - start
        except BaseException as exc:  # noqa: BLE001 - a failing test is a verdict
            verdict = "crashed" if self.channel.gone else "failed"
            return verdict, self.channel.gone or _message(exc, self.job["test"]), \
                time.perf_counter() - start
        if self.channel.gone:  # the test swallowed the candidate's exit: still a failure
            return "crashed", self.channel.gone, time.perf_counter() - start
        return "passed", None, time.perf_counter() - start


def serve(control: socket.socket) -> None:
    """Judge loop: per job, a 1-byte message carrying the channel's fd, then the job."""
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(control, 1, 1)
        except OSError:
            return
        if not fds:
            return
        with socket.socket(fileno=fds[0]) as channel:
            try:
                job = recv_msg(control)
            except WireError:
                return
            try:
                reply = Judge(job, channel).run()
            except Exception as exc:  # noqa: BLE001 - reported as the job's error
                reply = {"error": f"{type(exc).__name__}: {exc}"}
        send_msg(control, reply)


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    serve(socket.socket(fileno=int(sys.argv[1])))
