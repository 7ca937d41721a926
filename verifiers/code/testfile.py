"""Reading an assert-style or HumanEval test file: the statements the checker runs one by one,
the asserts it counts, and the pytest-style test functions it calls afterwards."""
from __future__ import annotations

import ast
import functools
import inspect
from typing import Any, Callable


def is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either operand order)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and \
        any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides)


def top_level_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements, with the body of each ``if __name__ == "__main__":`` block
    spliced in its place (its asserts are tests like top-level ones; its ``else`` is dropped)."""
    out: list[ast.stmt] = []
    for node in tree.body:
        out.extend(node.body if is_main_guard(node) else [node])
    return out


def _raises(statements: list[ast.stmt]) -> bool:
    """Whether a ``raise`` is among ``statements`` (or blocks nested in them), outside any
    function or class they define."""
    todo = list(statements)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Raise):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                 ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _is_assert_method_call(node: ast.expr) -> bool:
    """``x.assertEqual(...)``, ``self.assertTrue(...)``, ``case.fail(...)``: unittest's checks."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and (node.func.attr.startswith("assert") or node.func.attr == "fail")


class _CountChecks(ast.NodeTransformer):
    """Puts ``__rk_check__()`` before every check: the checker counts the checks a test ran
    (evidence that it tested something, see ``harness.Checker``). A check is an ``assert``, an
    ``if`` that raises (``if f(x) != y: raise AssertionError``, also inside a helper the test
    calls) and a unittest ``assert*`` method call (``unittest.TestCase().assertEqual(...)``):
    test files written with ``raise`` test as much as those written with ``assert``."""

    @staticmethod
    def _counted(node: ast.stmt) -> list[ast.stmt]:
        call = ast.Expr(ast.Call(ast.Name("__rk_check__", ast.Load()), [], []))
        return [ast.copy_location(call, node), node]

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        return self._counted(node)

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)
        return self._counted(node) if _raises(node.body + node.orelse) else node

    def visit_Expr(self, node: ast.Expr) -> Any:
        self.generic_visit(node)
        return self._counted(node) if _is_assert_method_call(node.value) else node


def instrumented(tree: ast.AST) -> ast.AST:
    return ast.fix_missing_locations(_CountChecks().visit(tree))


def collect_test_functions(namespace: dict[str, Any]) -> list[tuple[str, Callable[[], Any]]]:
    """pytest-style tests the test code defined, in definition order: ``test*`` functions and
    ``test*`` methods of ``Test*`` classes without an ``__init__`` (pytest's default rules).
    Only objects the trusted test code defined, never a proxy of the candidate's names. Each is
    wrapped by :func:`run_to_the_end`."""
    found: list[tuple[str, Callable[[], Any]]] = []
    for name, obj in list(namespace.items()):
        if name.startswith("test") and inspect.isfunction(obj) and _from_test(obj):
            found.append((name, run_to_the_end(obj)))
        elif name.startswith("Test") and isinstance(obj, type) and "__init__" not in vars(obj):
            for attr, method in vars(obj).items():
                if attr.startswith("test") and inspect.isfunction(method) and _from_test(method):
                    found.append((f"{name}.{attr}", run_to_the_end(
                        lambda cls=obj, attr=attr: getattr(cls(), attr)())))
    return found


def run_to_the_end(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` such that calling it runs its body: an ``async def`` test is run to completion
    (calling it alone only makes a coroutine, a silent pass), and a test that ``yield``s fails
    (pytest refuses such tests too) rather than pass without running."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        if inspect.iscoroutine(result):
            import asyncio  # only for async tests: most checkers never need it

            return asyncio.run(result)
        if inspect.isgenerator(result) or inspect.isasyncgen(result):
            result.close()
            raise TypeError("a test function that yields is not run (pytest refuses such "
                            "tests too); write it without yield")
        return result

    return run


def _from_test(fn: Callable[..., Any]) -> bool:
    return getattr(getattr(fn, "__code__", None), "co_filename", None) == "<test>"


def required_parameters(fn: Callable[..., Any]) -> list[str]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.default is p.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
