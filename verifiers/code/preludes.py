"""The import preludes of the APPS, TACO and LiveCodeBench harnesses.

Their harnesses execute the candidate's program after a block of imports, so the benchmarks'
reference solutions (and the models trained on them) use ``List``, ``Counter``, ``heapq`` or
``sqrt`` without importing them. The lists below are read off each harness (APPS's and TACO's
``testing_util.py``, LiveCodeBench's ``lcb_runner/evaluation/testing_util.py``); NumPy, which
APPS and TACO also import as ``np``, is left out: candidates may import only the standard
library unless the ``python_packages`` option allows more.
"""
from __future__ import annotations

import functools
import importlib

#: LiveCodeBench: ``from M import *`` then ``import M`` for each, builtins restored after the
#: star imports, and a deeper recursion limit.
_LIVECODEBENCH_STAR = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy",
                       "math", "random", "statistics", "itertools", "functools", "operator",
                       "io", "sys", "json")
#: APPS and TACO: these modules, and these names from them.
_APPS_MODULES = ("sys", "time", "itertools", "collections", "math", "fractions", "random",
                 "heapq")
_APPS_NAMES = (
    ("itertools", ("accumulate", "product", "permutations", "combinations")),
    ("collections", ("Counter", "OrderedDict", "deque", "defaultdict", "ChainMap")),
    ("functools", ("lru_cache",)),
    ("math", ("sqrt", "sin", "cos", "tan", "ceil", "fabs", "floor", "gcd", "exp", "log",
              "log2")),
    ("typing", ("List", "Tuple")),
)


def _livecodebench() -> str:
    lines = [f"from {m} import *" for m in _LIVECODEBENCH_STAR]
    lines += ["from builtins import *", "from typing import *"]
    lines += [f"import {m}" for m in _LIVECODEBENCH_STAR]
    lines.append("sys.setrecursionlimit(50000)")
    return "\n".join(lines) + "\n"


def _apps() -> str:
    lines = [f"import {m}" for m in _APPS_MODULES]
    lines += [f"from {m} import {', '.join(names)}" for m, names in _APPS_NAMES]
    lines.append("from heapq import *")
    return "\n".join(lines) + "\n"


def _star_names(module: str) -> set[str]:
    """The names ``from module import *`` binds."""
    imported = importlib.import_module(module)
    public = getattr(imported, "__all__", None)
    if public is None:
        public = [name for name in vars(imported) if not name.startswith("_")]
    return set(public)


@functools.lru_cache(maxsize=None)
def prelude_for(harness: str) -> tuple[str, frozenset[str]]:
    """The prelude of ``harness`` ("apps", "taco" or "livecodebench") and the names it binds
    (standard-library modules inspected here; the prelude itself runs only in the sandbox)."""
    if harness == "livecodebench":
        names = set(_LIVECODEBENCH_STAR).union(
            *(_star_names(m) for m in _LIVECODEBENCH_STAR + ("typing",)))
        return _livecodebench(), frozenset(names)
    names = set(_APPS_MODULES) | _star_names("heapq")
    for _, listed in _APPS_NAMES:
        names.update(listed)
    return _apps(), frozenset(names)
