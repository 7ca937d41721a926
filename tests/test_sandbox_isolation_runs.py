"""One run sees nothing of another and leaves nothing behind; a compile writes only inside the
run's size-limited tmpfs; a task's data under the runtimes' prefixes is not readable."""
from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import time

import pytest

from rewardkit.sandboxes import Limits, Program, Sandbox
from rewardkit.testing.sandbox_attacks import (ALLOC, HOLD_FCNTL, HOLD_FLOCK, LEAK, SEE_FCNTL,
                                               SEE_FLOCK, TOUCH, WATCH, hostile_compile,
                                               large_gcc_file, peak_disk_usage, run_together)

STDLIB_FILE = os.path.join(sysconfig.get_paths()["stdlib"], "os.py")


def together(sb: Sandbox, first: str, second: str) -> tuple[str, str]:
    """What each of two programs run at once printed."""
    ra, rb = run_together(sb, first, second)
    return ra.stdout.strip(), rb.stdout.strip()


@pytest.fixture(scope="module")
def pair():
    with Sandbox(pool_size=2, limits=Limits(cpu_s=5, wall_s=10, memory_mb=512)) as sb:
        yield sb


@pytest.mark.parametrize("path", ["/etc/passwd", STDLIB_FILE])
@pytest.mark.parametrize("hold,see", [(HOLD_FLOCK, SEE_FLOCK), (HOLD_FCNTL, SEE_FCNTL)],
                         ids=["flock", "fcntl"])
def test_a_lock_on_a_shared_read_only_file_is_not_seen_by_a_concurrent_run(pair, path, hold, see):
    _, seen = together(pair, hold.format(path=path), see.format(path=path))
    assert seen != "SEEN"
    assert seen == "37"  # ENOLCK: a run gets no lock at all, rather than one others can see


def test_a_run_cannot_watch_another_open_a_shared_file(pair):
    watched, _ = together(pair, WATCH, TOUCH)
    assert watched == "errno 38"  # ENOSYS: no inotify instance, so nothing to leak either


CGROUP = "print(open('/proc/self/cgroup').read(), end='')\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs the memory cgroup (root)")
def test_what_a_run_leaves_charged_does_not_count_against_the_next_run():
    limits = Limits(memory_mb=200, cpu_s=5, wall_s=10)
    with Sandbox(pool_size=1) as sb:  # one slot: the next run follows in the same slot
        leak = sb.run(Program(LEAK + CGROUP), limits)
        after = [sb.run(Program(ALLOC + CGROUP), limits) for _ in range(2)]
        dirs = sb._server.capabilities["cgroups"]["dirs"]
        time.sleep(0.2)
        left = [e for d in dirs for e in os.listdir(d) if e.startswith("run")]
    # Whether the kernel has freed the leaked cycle by the next run depends on when its unix
    # garbage collector runs; with a cgroup of its own, the next run never depends on it.
    groups = [r.stdout.split("\n", 1)[1] for r in [leak] + after]
    assert len(set(groups)) == 3 and all("rewardkit-" in g for g in groups), groups
    assert leak.stdout.startswith("leaked")
    assert [r.status for r in after] == ["ok", "ok"], [r.peak_memory_mb for r in after]
    assert all(r.peak_memory_mb < 180 for r in after)
    assert left == []  # every run's cgroup is removed once the run is over


@pytest.mark.skipif(shutil.which("gcc") is None or large_gcc_file() is None,
                    reason="needs gcc and a large file to include")
def test_a_hostile_compile_writes_nothing_past_the_runs_disk_limit_to_the_host():
    limits = Limits(max_file_mb=64, cpu_s=30, wall_s=60)
    with Sandbox(pool_size=1) as sb:
        ok = sb.run(Program('#include <stdio.h>\nint main(){puts("hi");}\n', "c"), limits)
        with peak_disk_usage(sb._base) as disk:
            r = sb.run(Program(hostile_compile(large_gcc_file()), "c"), limits)
    assert ok.status == "ok" and ok.stdout == "hi\n" and ok.compile.status == "ok"
    # 7 x a >20 MB file: the object and the binary would each pass 140 MB on the host.
    assert r.status == "compile_error"
    assert disk.bytes <= limits.max_file_mb << 20, disk.bytes >> 20


@pytest.fixture
def planted():
    """A task's data where a user may well keep it: under /usr/local/share, the base
    interpreter's prefix, the virtualenv and site-packages (only where writable here)."""
    spots = [os.path.join(d, "rk-test-data") for d in (
        "/usr/local/share", sys.base_prefix, sys.prefix, sysconfig.get_paths()["purelib"])]
    made = []
    for d in spots:
        try:
            os.makedirs(d)
        except OSError:
            continue
        with open(os.path.join(d, "answers.jsonl"), "w") as fh:
            fh.write('{"expected": "42"}\n')
        made.append(d)
    if not made:
        pytest.skip("no runtime prefix is writable here")
    yield made
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def test_data_under_the_runtimes_prefixes_is_not_readable(planted):
    probe = ("import os\nfor d in %r:\n    try:\n        open(os.path.join(d, 'answers.jsonl'))\n"
             "        print('READ', d)\n    except OSError as e:\n        print(e.errno, d)\n"
             % (planted,))
    with Sandbox(pool_size=1) as sb:
        r = sb.run(Program(probe))
        stdlib = sb.run(Program("import json, decimal, sqlite3, zoneinfo\n"
                                "print(zoneinfo.ZoneInfo('Europe/Paris'))"))
    assert r.status == "ok" and "READ" not in r.stdout, r.stdout
    assert stdlib.status == "ok" and stdlib.stdout.strip() == "Europe/Paris", stdlib.stderr


def test_only_named_packages_are_importable():
    probe = "try:\n    import numpy\n    print(int(numpy.arange(4).sum()))\nexcept ImportError:\n    print('no')\n"
    with Sandbox(pool_size=1) as sb:
        default = sb.run(Program(probe))
    with Sandbox(pool_size=1, python_packages=("numpy",)) as sb:
        named = sb.run(Program(probe))
    assert default.stdout.strip() == "no"
    assert named.stdout.strip() == "6", named.stderr
    with pytest.raises(ValueError, match="not importable"):
        Sandbox(python_packages=("no_such_package_here",))
