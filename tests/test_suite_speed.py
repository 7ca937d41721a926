"""What keeps `make test` short on a small machine: the test files go to its two workers
longest first, as ``tests/conftest.py``'s ``LONGEST_FIRST`` orders them (a long file started
last runs alone at the end while the other worker idles), and each worker's torch keeps to its
share of the cores (two workers with a pool of every core each spin against each other)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import LONGEST_FIRST, pytest_collection_modifyitems

pytest.importorskip("xdist")
from xdist.plugin import pytest_cmdline_main as resolve_workers  # noqa: E402
from xdist.scheduler import LoadFileScheduling  # noqa: E402

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[1]


def make_test_arguments() -> list[str]:
    """The pytest options of the Makefile's ``test`` target."""
    recipe = re.search(r"^test:.*\n\t\$\(PY\) -m pytest (.*)$", (ROOT / "Makefile").read_text(),
                       re.M)
    assert recipe, "the Makefile has no `test` target running `$(PY) -m pytest`"
    return shlex.split(recipe.group(1))


class Worker:
    """What the scheduler sees of a worker; what it is sent goes to the shared ``sent`` (the
    test indices, in the order handed out)."""

    def __init__(self, name: str, sent: list[list[int]]) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent = sent

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_make_test_hands_out_files_in_the_longest_first_order(pytester):
    # the long files hold few tests, the short ones many: the order xdist would sort by
    counts = {name: 1 + i % 2 for i, name in enumerate(LONGEST_FIRST)}
    counts.update({f"test_short_{i}.py": 40 + i for i in range(6)})
    items = [SimpleNamespace(path=Path("tests") / name, nodeid=f"tests/{name}::test_{k}")
             for name in sorted(counts) for k in range(counts[name])]
    pytest_collection_modifyitems(None, items)
    collection = [item.nodeid for item in items]

    config = pytester.parseconfig(*make_test_arguments())
    resolve_workers(config)  # `-n 2` into two worker specs, as at the start of a run
    assert config.getoption("numprocesses") == 2 and config.getoption("dist") == "loadfile"
    scheduler = LoadFileScheduling(config)
    sent: list[list[int]] = []
    workers = [Worker("gw0", sent), Worker("gw1", sent)]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()

    handed_out = [collection[batch[0]].split("::")[0] for batch in sent]
    handed_out += list(scheduler.workqueue)
    expected = list(dict.fromkeys(nodeid.split("::")[0] for nodeid in collection))
    assert expected[:len(LONGEST_FIRST)] == [f"tests/{name}" for name in LONGEST_FIRST]
    assert handed_out == expected


def test_each_xdist_worker_runs_torch_on_its_share_of_the_cores(pytester, monkeypatch):
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(test_threads="""
        import os

        def test_threads():
            import torch

            share = max(1, len(os.sched_getaffinity(0)) // 2)
            assert torch.get_num_threads() == share, (torch.get_num_threads(), share)
    """)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # as a fresh `make test` starts
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_every_test_the_default_run_leaves_out_but_slow_and_gpu_is_run_by_a_ci_step():
    """`make test` leaves the `integration` tests out to stay short; CI must still run them:
    a Makefile target selects each such marker and `.ci/run` calls that target after
    `make test`. (`slow` tests have a faster test covering them; `gpu` ones need a device.)"""
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"]
    left_out = set(re.findall(r"not (\w+)", options["addopts"])) - {"slow", "gpu"}
    assert left_out == {"integration"}
    declared = {line.split(":")[0] for line in options["markers"]}
    makefile = (ROOT / "Makefile").read_text()
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip().startswith("make ")]
    for marker in left_out:
        assert marker in declared
        targets = re.findall(rf"^([\w-]+):.*\n(?:\t.*\n)*?\t\$\(PY\) -m pytest [^\n]*-m {marker}\b",
                             makefile, re.M)
        assert targets, f"no Makefile target runs -m {marker}"
        calls = [i for i, line in enumerate(ci) for t in targets
                 if line == f"make {t}" or line.startswith(f"make {t} ")]
        assert calls, (targets, ci)
        assert calls[0] > ci.index("make test")
