"""A served process under a benchmark: start ``rewardkit serve`` and read its URL, stop it, and
measure it with its worker processes (process tree, CPU seconds, GPU memory). Shared by
benchmarks/bench_server.py and benchmarks/server_load.py."""
from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DEVICE_VARIABLE = "REWARDKIT_BENCH_DEVICE"
"""Where the reward model runs (``--device``); children (servers, in-process runs) read it."""


def rm_device() -> str:
    return os.environ.get(DEVICE_VARIABLE, "cpu")


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live process below it (a served model runs in a worker process, a
    child of multiprocessing's fork server, itself a child of the server)."""
    import psutil  # the bench extra

    try:
        return [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.NoSuchProcess:
        return [pid]


def gpu_memory_mib(pid: int) -> float | None:
    """GPU memory the process ``pid`` and its worker processes hold, as the driver reports it
    (None without a GPU)."""
    if rm_device() == "cpu":
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    pids = {str(p) for p in process_tree(pid)}
    used = [float(fields[1]) for fields in (
        [x.strip() for x in line.split(",")] for line in out.splitlines())
        if len(fields) == 2 and fields[0] in pids]
    return sum(used) if used else None


def _start(cmd: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError(f"server exited: {cmd}")
        found = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
        if found:
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return proc, found.group(1)
    proc.kill()
    raise RuntimeError(f"server did not start: {cmd}")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process and the live processes below it (its worker
    processes) have used so far, all their threads (Linux /proc)."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")
