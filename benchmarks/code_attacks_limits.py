"""The sandbox's limits and isolation between runs, attacked: one class per guarantee.

Each class runs hostile programs (or hostile host conditions: no usable cgroup, leftovers of an
earlier sandbox) and reports, per attack, whether the guarantee *held*: the limit was enforced,
or the run was refused with an error naming it; nothing crossed from one run to another; the
host's disk, data and scheduler were not reached. ``bench_code_attacks.py`` prints them as
"held / total"; ``tests/test_code_attacks_limits.py`` runs the fast subset and asserts every
attack held. Run it against another checkout (``PYTHONPATH``) to compare two versions. The
hostile programs are :mod:`rewardkit.testing.sandbox_attacks`, which the sandbox's tests run
too (a checkout older than that module needs it copied in).

    python benchmarks/code_attacks_limits.py [--fast] [--honest 100]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from rewardkit.sandboxes import Limits, Program, Sandbox
from rewardkit.testing.sandbox_attacks import (ALLOC, HOLD_FCNTL, HOLD_FLOCK, LEAK, NICE_PROBE,
                                               PAGE_CACHE_CALLS, READ_PAGES, SEE_FCNTL,
                                               SEE_FLOCK, SEND_PAGES, SPREAD, TOUCH, WATCH,
                                               cgroup_weights, held_mb, hostile_compile,
                                               large_gcc_file, memory_cgroup_parent,
                                               peak_disk_usage, run_together)
from rewardkit.types import Sample
from rewardkit.verifiers.code import CodeVerifier


@dataclass
class Row:
    attack: str
    held: bool
    detail: str


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


SPREAD_LIMITS = Limits(memory_mb=64, cpu_s=5, wall_s=10)


def _memory_held(result) -> tuple[bool, str]:
    """Held: the run was refused naming the memory limit, or it held no more than its limit."""
    refused = result.status == "sandbox_error" and "memory_mb=" in (result.error or "")
    held = held_mb(result.stdout)
    detail = f"status={result.status}, the run's processes held {held} MB together"
    if result.error:
        detail += f", error={result.error[:140]!r}"
    return refused or (result.status != "sandbox_error"
                       and held <= SPREAD_LIMITS.memory_mb), detail


class FailClosed:
    """A limit the host cannot enforce refuses the run (naming it), never a silent fallback."""

    name = "fail closed"

    def run(self, fast: bool) -> list[Row]:
        rows = []
        with _env("REWARDKIT_SANDBOX_CGROUP_ROOT", "/nonexistent/cgroup"):
            with Sandbox(pool_size=1) as sb:
                r = sb.run(Program(SPREAD), SPREAD_LIMITS)
        held, detail = _memory_held(r)
        rows.append(Row("no usable cgroup: 4 processes under memory_mb=64", held, detail))

        parent = memory_cgroup_parent()
        made = []
        if parent and os.access(parent, os.W_OK):
            # What an earlier sandbox of a process with the same pid (a container restarted,
            # pid 1 again) would have left behind.
            for serial in range(40):
                path = os.path.join(parent, f"rewardkit-{os.getpid()}-{serial}")
                try:
                    os.mkdir(path)
                    made.append(path)
                except OSError:
                    pass
        try:
            with Sandbox(pool_size=1) as sb:
                r = sb.run(Program(SPREAD), SPREAD_LIMITS)
            held, detail = _memory_held(r)
            rows.append(Row("leftover cgroups of an earlier sandbox (same pid)", held, detail))
            with Sandbox(pool_size=1, isolation="namespaces") as sb:
                r = sb.run(Program(SPREAD), SPREAD_LIMITS)
            opaque = r.status == "sandbox_error" and "log empty" in (r.error or "")
            held, detail = _memory_held(r)
            rows.append(Row("leftover cgroups, isolation='namespaces': cause reported",
                            held and not opaque, detail))
        finally:
            for path in made:
                try:
                    os.rmdir(path)
                except OSError:
                    pass

        with _env("REWARDKIT_SANDBOX_CGROUP_ROOT", "/nonexistent/cgroup"):
            with CodeVerifier(pool_size=1, timeout=2.0, memory_mb=64) as v:
                score = v.score([Sample("", "```python\nprint(3)\n```",
                                        {"inputs": [""], "outputs": ["3"]})])[0]
        error = str(score.info.get("error") or "")
        rows.append(Row("code reward on a host without cgroups: Score carries the cause",
                        score.value == 0.0 and "memory_mb=" in error,
                        f"value={score.value}, error={error[:140]!r}"))
        return rows


# 60 processes, each in its own session, spinning until killed.
SPINNER = ("import os, time\nfor _ in range(60):\n    if os.fork() == 0:\n"
           "        os.setsid()\n        while True:\n            pass\ntime.sleep(30)\n")
HONEST = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n"
          "    pass\nprint('done')\n")


class UidCpu:
    """CPU time of every process of some uids, sampled from the host's /proc (so it counts
    what a run's own accounting may miss: processes in other sessions, orphans)."""

    def __init__(self, uids: list[int]) -> None:
        self.uids = set(uids)
        self.ticks: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    if os.stat(f"/proc/{name}").st_uid not in self.uids:
                        continue
                    with open(f"/proc/{name}/stat") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                used = int(fields[11]) + int(fields[12])  # utime + stime
                self.ticks[int(name)] = max(self.ticks.get(int(name), 0), used)
            time.sleep(0.01)

    def __enter__(self) -> "UidCpu":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    @property
    def seconds(self) -> float:
        return sum(self.ticks.values()) / os.sysconf("SC_CLK_TCK")


class CpuTime:
    """CPU time is the run's, all its processes together; a spinner cannot starve its
    neighbours into timeouts."""

    name = "cpu time"

    def __init__(self, honest: int = 100) -> None:
        self.honest = honest

    def run(self, fast: bool) -> list[Row]:
        rows = []
        budget = Limits(cpu_s=1.0, wall_s=4.0, memory_mb=512, max_output_bytes=1 << 22)
        with Sandbox(pool_size=1) as sb:
            sb.run(Program("pass"))
            with UidCpu(sb._uids) as meter:
                r = sb.run(Program(SPINNER), budget)
        used = meter.seconds
        rows.append(Row("60 spinners in their own sessions, cpu_s=1: CPU they got",
                        used <= 1.5 * budget.cpu_s,
                        f"{used:.2f} s of CPU (budget {budget.cpu_s} s), status={r.status}"))
        if fast:
            return rows
        pool = 4
        honest_limits = Limits(cpu_s=1.0, wall_s=3.0, memory_mb=512)
        programs, kinds = [], []
        for i in range(self.honest):
            if i % 3 == 0:
                programs.append(Program(SPINNER))
                kinds.append("spinner")
            programs.append(Program(HONEST))
            kinds.append("honest")
        with Sandbox(pool_size=pool) as sb:
            results = sb.run_many(programs, honest_limits)
        honest = [res for res, kind in zip(results, kinds) if kind == "honest"]
        wrong = [res for res in honest if res.status != "ok"]
        rows.append(Row(f"honest 0.3 s programs beside spinners (pool {pool}): wrongly timed out",
                        not wrong, f"{len(wrong)} / {len(honest)} "
                        f"({sorted({w.status for w in wrong})})"))
        return rows


class CompileDisk:
    """A compile writes only inside the run's size-limited tmpfs, not to the host's disk."""

    name = "compile disk"

    def run(self, fast: bool) -> list[Row]:
        big = large_gcc_file()  # included 7 times (.incbin): a ~250 MB object and binary
        if big is None or shutil.which("gcc") is None:
            return [Row("hostile C compile (no gcc or no large file to include)", True, "n/a")]
        limits = Limits(max_file_mb=64, cpu_s=30, wall_s=60)
        with Sandbox(pool_size=1) as sb:
            sb.run(Program("pass"))
            with peak_disk_usage(sb._base) as disk:
                r = sb.run(Program(hostile_compile(big), "c"), limits)
        mb = disk.bytes >> 20
        return [Row("hostile C compile (.incbin x7): host disk written",
                    mb <= limits.max_file_mb,
                    f"{mb} MB on the host's disk (bound {limits.max_file_mb} MB), "
                    f"status={r.status}")]


class DataReadable:
    """A task's data under a prefix the runtimes live in is not readable from a run."""

    name = "data readable"

    def run(self, fast: bool) -> list[Row]:
        spots = {
            "/usr/local/share": "/usr/local/share/rk-attack-data",
            "sys.base_prefix": os.path.join(sys.base_prefix, "rk-attack-data"),
            "the virtualenv": os.path.join(sys.prefix, "rk-attack-data"),
            "site-packages": os.path.join(sysconfig.get_paths()["purelib"], "rk_attack_data"),
        }
        made = {}
        for label, d in spots.items():
            try:
                os.makedirs(d, exist_ok=False)
                with open(os.path.join(d, "answers.jsonl"), "w") as fh:
                    fh.write('{"expected": "42"}\n')
                made[label] = d
            except OSError:
                pass
        probe = ("import os, json\nout = {}\n"
                 f"for label, d in {made!r}.items():\n"
                 "    try:\n        out[label] = open(os.path.join(d, 'answers.jsonl')).read()\n"
                 "    except OSError as e:\n        out[label] = None\n"
                 "print(json.dumps(out))\n")
        try:
            with Sandbox(pool_size=1) as sb:
                r = sb.run(Program(probe))
        finally:
            for d in made.values():
                shutil.rmtree(d, ignore_errors=True)
        seen = json.loads(r.stdout) if r.status == "ok" else {}
        rows = []
        for label in spots:
            if label not in made:
                rows.append(Row(f"dataset under {label} (not writable here)", True, "n/a"))
                continue
            rows.append(Row(f"dataset under {label}", r.status == "ok" and not seen.get(label),
                            "read" if seen.get(label) else f"hidden (status={r.status})"))
        return rows


class BetweenRuns:
    """One run sees nothing of another, and leaves nothing behind for the next."""

    name = "between runs"

    def _pair(self, sb: Sandbox, first: str, second: str) -> tuple[str, str]:
        """Run two programs at once; what each printed (or its status)."""
        ra, rb = run_together(sb, first, second)
        return ra.stdout.strip() or ra.status, rb.stdout.strip() or rb.status

    def run(self, fast: bool) -> list[Row]:
        rows = []
        stdlib_file = os.path.join(sysconfig.get_paths()["stdlib"], "os.py")
        with Sandbox(pool_size=2) as sb:
            for label, hold, see, path in (
                    ("flock on /etc/passwd", HOLD_FLOCK, SEE_FLOCK, "/etc/passwd"),
                    ("flock on a stdlib file", HOLD_FLOCK, SEE_FLOCK, stdlib_file),
                    ("fcntl read lock on /etc/passwd", HOLD_FCNTL, SEE_FCNTL, "/etc/passwd")):
                _, seen = self._pair(sb, hold.format(path=path), see.format(path=path))
                rows.append(Row(f"{label}: seen by a concurrent run", seen != "SEEN", seen))
            seen, _ = self._pair(sb, WATCH, TOUCH)
            rows.append(Row("inotify watch on /etc/passwd sees another run open it",
                            seen != "SEEN", seen))
            big = os.path.join(sysconfig.get_paths()["stdlib"], "pydoc_data", "topics.py")
            sent, read = self._pair(sb, SEND_PAGES.format(path=big, secret=0xA5C3),
                                    READ_PAGES.format(path=big))
            rows.append(Row("16-bit secret through the cached pages of a stdlib file (fadvise "
                            "DONTNEED, pread, preadv2 RWF_NOWAIT) to a concurrent run",
                            read != hex(0xA5C3), f"sender: {sent}, reader: {read}"))
            calls = sb.run(Program(PAGE_CACHE_CALLS.format(path=big))).stdout.split()
            accepted = [c.split("=")[0] for c in calls if c.endswith("=ok")]
            rows.append(Row("calls that drop or report cached pages of a shared file accepted",
                            bool(calls) and not accepted, " ".join(calls)))
        with Sandbox(pool_size=1) as sb:
            lim = Limits(memory_mb=200, cpu_s=5, wall_s=10)
            leak = sb.run(Program(LEAK), lim)
            after = sb.run(Program(ALLOC), lim)
        rows.append(Row("SCM_RIGHTS cycle of full pipes, then 150 MB under memory_mb=200 "
                        "in the same slot", after.status == "ok",
                        f"leak run: {leak.status}, next run: {after.status}, "
                        f"peak {after.peak_memory_mb} MB"))
        return rows


class Niceness:
    """``nice rewardkit ...`` lowers the runs' priority too (runs call setsid)."""

    name = "niceness"

    def run(self, fast: bool) -> list[Row]:
        rows = []
        for label, env, opt in (("with cgroups", {}, []),
                                ("without cgroups", {"REWARDKIT_SANDBOX_CGROUP_ROOT": "/nonexistent"},
                                 ["memory", "cpu", "pids"])):
            out = subprocess.run([sys.executable, "-c", NICE_PROBE, *opt], capture_output=True,
                                 text=True, env={**os.environ, **env}, timeout=120)
            try:
                res = json.loads(out.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                rows.append(Row(f"caller at nice 10 ({label})", False, out.stderr[-200:]))
                continue
            weight = res["weight"]
            # A one-slot sandbox weighs what one process at the caller's nice does (nice 10:
            # v1 shares 110 of a nice-0 process's 1024; v2 weight 11 of 100).
            nice = res.get("nice", 10)
            held = weight in (*cgroup_weights(nice), f"autogroup nice {nice}")
            rows.append(Row(f"caller at nice 10 ({label}): the run's weight", held, weight))
        return rows


def all_attacks(honest: int = 100) -> list:
    return [FailClosed(), CpuTime(honest), CompileDisk(), DataReadable(), BetweenRuns(),
            Niceness()]


def run_limits(fast: bool = False, honest: int = 100) -> list[Row]:
    """Run every class; print each row and the "held / total" line per class."""
    rows: list[Row] = []
    for attack in all_attacks(honest):
        got = attack.run(fast)
        for row in got:
            print(f"  {'held  ' if row.held else 'BROKEN'} [{attack.name}] {row.attack}: "
                  f"{row.detail}", flush=True)
        print(f"{attack.name}: held {sum(r.held for r in got)} / {len(got)}", flush=True)
        rows += got
    print(f"limits and isolation between runs: held {sum(r.held for r in rows)} / {len(rows)}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fast", action="store_true", help="the subset the test suite runs")
    parser.add_argument("--honest", type=int, default=100,
                        help="honest programs run beside spinners")
    args = parser.parse_args()
    run_limits(args.fast, args.honest)


if __name__ == "__main__":
    main()
