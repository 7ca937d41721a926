"""The layout of docs/architecture.md holds: every import of the package (top-level or inside a
function) is parsed and checked against the rooms table there.

- no import circle between rooms, nor between the modules of one room, nor between the packages
  and modules side by side in one package (no package imports a module that imports it back);
- ``models`` and ``trainer`` do not import each other;
- no private name (``_x``, or a ``_module``) is imported from another room;
- each room imports only the rooms the table allows;
- an import of another room inside a function says why it is deferred (``# deferred: ...``).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"rewardkit": "rewardkit", "verifiers": "rewardkit.verifiers",
           "sandboxes": "rewardkit.sandboxes"}
TABLE_MARK = "<!-- rooms table: read by tests/test_architecture.py -->"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the module imported (the longest project module the import names)
    name: str | None  # the name taken from it (``from target import name``), if not a module
    line: int
    local: bool  # inside a function
    reason: bool  # a ``# deferred:`` comment on the line or the line above


def project_modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


MODULES = project_modules()


def _imports_of(module: str, path: Path) -> list[Import]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    in_function = {id(node) for fn in ast.walk(tree)
                   if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            pairs = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                source_module = ".".join(base + ([node.module] if node.module else []))
            else:
                source_module = node.module or ""
            pairs = [(f"{source_module}.{a.name}", None) if f"{source_module}.{a.name}" in MODULES
                     else (source_module, a.name) for a in node.names]
        else:
            continue
        near = " ".join(lines[max(0, node.lineno - 2):node.end_lineno])
        for target, name in pairs:
            if target.split(".")[0] != "rewardkit":
                continue
            while target not in MODULES and "." in target:
                target = target.rpartition(".")[0]
            out.append(Import(module, target, name, node.lineno, id(node) in in_function,
                              "# deferred" in near))
    return out


IMPORTS = [imp for module, path in MODULES.items() for imp in _imports_of(module, path)]


def rooms_table(text: str) -> dict[str, tuple[list[str], set[str] | None]]:
    """room -> (module prefixes, rooms it may import; None: anything)."""
    assert TABLE_MARK in text, "docs/architecture.md lost its rooms table"
    rows = {}
    for line in text.split(TABLE_MARK, 1)[1].strip().splitlines():
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in ("room", "") or set(cells[0]) <= set("-"):
            continue
        prefixes = re.findall(r"`([\w.]+)`", cells[1])
        allowed = cells[2]
        rows[cells[0]] = (prefixes, None if allowed == "anything" else
                          set() if allowed == "nothing" else
                          {a.strip() for a in allowed.split(",")})
    return rows


ROOMS = rooms_table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))


def room_of(module: str, rooms: dict = ROOMS) -> str:
    best, best_len = None, -1
    for room, (prefixes, _) in rooms.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = room, len(prefix)
    if best == "front door" and module != "rewardkit":
        best = None  # the prefix `rewardkit` names only the package's __init__
    if best is None and module.count(".") == 1:
        return "core"  # a module file directly in rewardkit/ is core unless the table says
    assert best is not None, f"{module} is in no room of docs/architecture.md's table"
    return best


def room_edges(imports: list[Import]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for imp in imports:
        a, b = room_of(imp.module), room_of(imp.target)
        if a != b:
            edges.setdefault(a, set()).add(b)
    return edges


def module_edges(imports: list[Import]) -> dict[str, set[str]]:
    """Module -> the project modules it imports, at the top, inside a function or under ``if
    TYPE_CHECKING:`` (an import only for type checkers hides a circle from the interpreter; the
    two modules still cannot be read, changed or tested one without the other)."""
    edges: dict[str, set[str]] = {}
    for imp in imports:
        if imp.module != imp.target:
            edges.setdefault(imp.module, set()).add(imp.target)
    return edges


def sibling_edges(imports: list[Import]) -> dict[str, set[str]]:
    """At every level of the package tree, which child (module or sub-package) of a package
    imports which other child of it: ``a.b.x`` importing ``a.c.y`` is the arrow ``a.b -> a.c``.

    A circle here is a package that imports a module which imports the package back
    (``trainer/arithmetic.py`` importing ``testing.arithmetic``, which imports
    ``trainer.config``), even when no module imports itself round the loop. An import of one's
    own package or sub-package is an arrow inside one child (:func:`module_edges` sees those)."""
    edges: dict[str, set[str]] = {}
    for imp in imports:
        a, b = imp.module.split("."), imp.target.split(".")
        shared = next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), None)
        if shared is not None:
            edges.setdefault(".".join(a[:shared + 1]), set()).add(".".join(b[:shared + 1]))
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One circle of the graph, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _where(imp: Import) -> str:
    what = f"{imp.target}.{imp.name}" if imp.name else imp.target
    return f"{MODULES[imp.module].relative_to(ROOT)}:{imp.line} imports {what}"


def test_every_module_is_in_a_room_and_the_table_is_not_empty():
    assert {"core", "runtime", "models", "trainer", "cli"} <= set(ROOMS)
    for module in MODULES:
        room_of(module)


def test_no_import_circle_between_rooms():
    cycle = find_cycle(room_edges(IMPORTS))
    assert cycle is None, "rooms import each other in a circle: " + " -> ".join(cycle)


def test_no_import_circle_between_the_modules_of_a_room():
    """Inside a room too, modules import one way: a function-local import back into a module
    that imports this one is a circle as well (it only hides until the function runs)."""
    cycle = find_cycle(module_edges(IMPORTS))
    if cycle:
        steps = [next(_where(i) for i in IMPORTS if i.module == a and i.target == b)
                 for a, b in zip(cycle, cycle[1:])]
        pytest.fail("modules import each other in a circle: " + " -> ".join(cycle) +
                    "\n" + "\n".join(steps))


def _inside(module: str, child: str) -> bool:
    return module == child or module.startswith(child + ".")


def every_cycle(edges: dict[str, set[str]]) -> list[list[str]]:
    """The circles of the graph, each named once: the arrow that closes a circle is taken out
    before the next is looked for."""
    edges = {node: set(targets) for node, targets in edges.items()}
    found = []
    while (cycle := find_cycle(edges)):
        found.append(cycle)
        edges[cycle[-2]].discard(cycle[-1])
    return found


def test_no_package_imports_a_module_that_imports_it_back():
    """The modules and sub-packages side by side in one package import one way, whole
    packages included: a package whose module imports another package that imports the first
    back is a circle even when no single module closes it."""
    report = []
    for cycle in every_cycle(sibling_edges(IMPORTS)):
        report.append(" -> ".join(cycle))
        report += ["    " + next(_where(i) for i in IMPORTS
                                 if _inside(i.module, a) and _inside(i.target, b))
                   for a, b in zip(cycle, cycle[1:])]
    assert not report, "packages and modules import each other in a circle:\n" + "\n".join(report)


def test_the_rooms_table_itself_has_no_circle():
    edges = {room: set(allowed) for room, (_, allowed) in ROOMS.items() if allowed}
    assert find_cycle(edges) is None


@pytest.mark.parametrize("a, b", [("models", "trainer"), ("trainer", "models")])
def test_models_and_trainer_are_peers(a, b):
    crossing = [_where(i) for i in IMPORTS
                if room_of(i.module) == a and room_of(i.target) == b]
    assert not crossing, f"{a} imports {b}: " + "; ".join(crossing)


def test_no_private_name_crosses_rooms():
    def private(imp: Import) -> bool:
        parts = imp.target.split(".") + ([imp.name] if imp.name else [])
        return any(p.startswith("_") and not p.startswith("__") for p in parts[1:])

    crossing = [_where(i) for i in IMPORTS
                if room_of(i.module) != room_of(i.target) and private(i)]
    assert not crossing, "private names used across rooms:\n" + "\n".join(crossing)


def test_each_room_imports_only_what_the_table_allows():
    wrong = []
    for imp in IMPORTS:
        a, b = room_of(imp.module), room_of(imp.target)
        allowed = ROOMS[a][1]
        if a != b and allowed is not None and b not in allowed:
            wrong.append(f"{_where(imp)} ({a} -> {b}; {a} may import: "
                         f"{', '.join(sorted(allowed)) or 'nothing'})")
    assert not wrong, "imports the rooms table does not allow:\n" + "\n".join(wrong)


def test_a_function_local_import_of_another_room_says_why_it_is_deferred():
    silent = [_where(i) for i in IMPORTS if i.local and not i.reason
              and room_of(i.module) != room_of(i.target)]
    assert not silent, ("function-local imports of another room without a `# deferred: "
                        "<why>` comment (import at the top, or defer a heavy dependency on "
                        "purpose):\n" + "\n".join(silent))


def test_the_checker_sees_function_local_imports_and_circles(tmp_path):
    """The checks above can fail: a circle hidden in a function-local import is found."""
    fake = tmp_path / "m.py"
    fake.write_text("def f():\n    from rewardkit.trainer.loop import Trainer\n")
    imports = _imports_of("rewardkit.models.fake", fake)
    assert imports and imports[0].local and room_of(imports[0].target) == "trainer"
    edges = room_edges(imports + [Import("rewardkit.trainer.loop", "rewardkit.models.train",
                                         None, 1, False, False)])
    assert find_cycle(edges) in (["models", "trainer", "models"],
                                 ["trainer", "models", "trainer"])


def test_the_checker_sees_a_circle_inside_a_room_through_a_function_local_import(tmp_path):
    """The module check can fail: ``train`` reaching ``train_ensemble`` inside a function while
    ``train_ensemble`` imports ``train`` at the top is a circle, and so is the same import made
    only for type checkers."""
    caller, callee = tmp_path / "train.py", tmp_path / "train_ensemble.py"
    caller.write_text("def train_reward_model(cfg):\n"
                      "    from .train_ensemble import ensemble_trainer\n")
    callee.write_text("from typing import TYPE_CHECKING\nfrom .train import RewardTrainer\n"
                      "if TYPE_CHECKING:\n    from .train import train_reward_model\n")
    imports = (_imports_of("rewardkit.models.train", caller) +
               _imports_of("rewardkit.models.train_ensemble", callee))
    assert [i.local for i in imports] == [True, False, False]
    circles = (["rewardkit.models.train", "rewardkit.models.train_ensemble",
                "rewardkit.models.train"],
               ["rewardkit.models.train_ensemble", "rewardkit.models.train",
                "rewardkit.models.train_ensemble"])
    assert find_cycle(module_edges(imports)) in circles
    assert find_cycle(module_edges(imports[:1] + imports[2:])) in circles
    assert find_cycle(module_edges(imports[1:])) is None


def test_the_checker_sees_a_package_that_imports_a_module_that_imports_it_back(tmp_path):
    """The package check can fail where the module check cannot: ``trainer.arithmetic`` ->
    ``testing.arithmetic`` -> ``trainer.config`` closes no loop of modules, but the packages
    ``trainer`` and ``testing`` import each other; and two modules of one package that import
    each other, one of them only for type checkers, are a circle of that package's children."""
    shim, task = tmp_path / "shim.py", tmp_path / "task.py"
    shim.write_text("from ..testing.arithmetic import task_config\n")
    task.write_text("from ..trainer.config import TrainConfig\n")
    imports = (_imports_of("rewardkit.trainer.arithmetic", shim) +
               _imports_of("rewardkit.testing.arithmetic", task))
    assert find_cycle(module_edges(imports)) is None
    assert find_cycle(sibling_edges(imports)) in (
        ["rewardkit.testing", "rewardkit.trainer", "rewardkit.testing"],
        ["rewardkit.trainer", "rewardkit.testing", "rewardkit.trainer"])
    assert find_cycle(sibling_edges(imports[1:])) is None

    run, sandbox = tmp_path / "run.py", tmp_path / "sandbox.py"
    run.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                   "    from .sandbox import Sandbox\n")
    sandbox.write_text("from .run import RunHandle, rmtree\n")
    imports = (_imports_of("rewardkit.sandboxes.run", run) +
               _imports_of("rewardkit.sandboxes.sandbox", sandbox))
    assert find_cycle(sibling_edges(imports)) in (
        ["rewardkit.sandboxes.run", "rewardkit.sandboxes.sandbox", "rewardkit.sandboxes.run"],
        ["rewardkit.sandboxes.sandbox", "rewardkit.sandboxes.run", "rewardkit.sandboxes.sandbox"])


def test_every_built_in_reward_lives_in_the_home_of_its_kind():
    """Rule-based rewards in ``verifiers/``, learned ones in ``models/``; the only other home is
    the client for a reward served elsewhere, with the other adapters in ``integrations/``."""
    from rewardkit.registry import _BUILTINS

    homes = {name: target.split(":")[0] for name, (target, _) in _BUILTINS.items()}
    elsewhere = {n: m for n, m in homes.items()
                 if not m.startswith(("rewardkit.verifiers.", "rewardkit.models."))}
    assert elsewhere == {"remote": "rewardkit.integrations.remote"}
    assert homes["exact_match"] == homes["regex"] == "rewardkit.verifiers.match"


def test_no_module_keeps_a_second_name_with_a_deprecation_warning():
    """The package has not been released: a moved module or a renamed option has one name,
    and the change is a line in CHANGELOG.md, not a shim that warns."""
    warned = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name) and node.id == "DeprecationWarning":
                warned.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not warned, "deprecated second names left:\n" + "\n".join(warned)

