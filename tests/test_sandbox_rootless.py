"""The sandbox run by an ordinary user: isolated through a user namespace where the kernel allows
one, limits only (and saying so) where it does not.

These tests need root only to become an unprivileged user (uid 65534, ``setpriv``): the sandbox
itself then runs without any privilege, exactly as for a normal user of the library.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

NOBODY = 65534
SANDBOXES = str(pathlib.Path(__file__).resolve().parent.parent / "sandboxes")

# Started by root: a new mount namespace (and, to take user namespaces away from the probe, a
# user namespace with root and nobody mapped, whose user-namespace limit is set to 0), then sh.
LAUNCH = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import _libc
no_userns, cmd = sys.argv[2] == "1", sys.argv[3]
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    _libc.unshare(_libc.CLONE_NEWNS | (_libc.CLONE_NEWUSER if no_userns else 0))
    os.write(ready_w, b"x")
    os.read(go_r, 1)
    if no_userns:
        with open("/proc/sys/user/max_user_namespaces", "w") as fh:
            fh.write("0")
    os.execv("/bin/sh", ["sh", "-c", cmd])
os.read(ready_r, 1)
if no_userns:
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as fh:
            fh.write("0 0 1\n65534 65534 1\n")
os.write(go_w, b"x")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_as_nobody(script: str, tmp: pathlib.Path, no_userns: bool = False,
                  env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``script`` with this interpreter as uid/gid 65534, no supplementary groups, a clean
    environment and ``HOME`` in ``tmp``. An interpreter under root's private home (pyenv in
    /root) is made reachable, read-only, in a throw-away mount namespace; the host is unchanged."""
    prefix = os.path.realpath(sys.base_prefix)
    setup = "mount --make-rprivate / && "
    if prefix.startswith("/root/"):
        top = "/root/" + prefix.split("/")[2]
        stash = tmp / "stash"
        stash.mkdir()
        setup += (f"mount --bind {top} {stash} && mount -t tmpfs -o mode=755 tmpfs /root && "
                  f"mkdir -p {top} && mount --bind -o ro {stash} {top} && ")
    probe = tmp / "probe.py"
    probe.write_text(script)
    home = tmp / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    extra = " ".join(f"{k}={v}" for k, v in (env or {}).items())
    cmd = (f"{setup}cd / && exec setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups "
           f"env -i PATH=/usr/bin:/bin HOME={home} {extra} {sys.executable} {probe}")
    out = subprocess.run([sys.executable, "-c", LAUNCH, SANDBOXES, "1" if no_userns else "0", cmd],
                         capture_output=True, text=True, timeout=120)
    if "No such file" in out.stderr or "Permission denied" in out.stderr:
        pytest.skip(f"interpreter not reachable for an unprivileged user: {out.stderr[-300:]}")
    return out


def _userns_for_nobody() -> str:
    """Why an unprivileged user cannot create a user namespace here ("" if it can)."""
    if not shutil.which("unshare"):
        return "util-linux unshare not installed"
    out = subprocess.run(["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY),
                          "--clear-groups", "unshare", "--user", "true"],
                         capture_output=True, text=True, cwd="/")
    return "" if out.returncode == 0 else f"unprivileged user namespaces unavailable: {out.stderr}"


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root and setpriv to become an unprivileged user")


@pytest.fixture
def tmp():
    with tempfile.TemporaryDirectory() as d:  # pytest's tmp_path is private to root
        os.chmod(d, 0o755)
        yield pathlib.Path(d)


ROOTLESS_PROBE = r"""
import json, os, socket
from rewardkit.sandboxes import Limits, Program, Sandbox, capabilities, capabilities_report
import rewardkit

SECRET, BASES = {secret!r}, {bases!r}
project = os.path.dirname(os.path.dirname(os.path.abspath(rewardkit.__file__)))
out = {{"caps": capabilities(), "report": capabilities_report()}}
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
port = listener.getsockname()[1]
# What the unprivileged user itself can do: each check below must differ inside a run.
out["outside"] = {{"secret": open(SECRET).read(), "project": os.path.exists(project + "/setup.py"),
                   "net": socket.create_connection(("127.0.0.1", port), timeout=1) and 0}}

PROBE = '''import json, os, socket
out = {{"uid": os.getuid(), "env": sorted(os.environ)}}
try:
    out["secret"] = open(%(secret)r).read()
except OSError as e:
    out["secret"] = e.errno
out["project"] = os.path.exists(%(project)r + "/setup.py")
out["root"] = sorted(os.listdir("/root"))
s = socket.socket(); s.settimeout(1)
out["net"] = s.connect_ex(("127.0.0.1", %(port)d))
out["procs"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
out["base"] = os.listdir("..") == [os.path.basename(os.getcwd())]
try:
    os.kill(%(host_pid)d, 0); out["kill_host"] = 0
except OSError as e:
    out["kill_host"] = e.errno
written = {{}}
for d in ["..", "/etc", "/tmp", "/var/tmp", %(project)r, %(home)r, "."]:
    try:
        with open(os.path.join(d, "rk-probe"), "w") as fh:
            fh.write("x")
        written[d] = "written"
    except OSError as e:
        written[d] = e.errno
out["write"] = written
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
out["status"] = {{k: status[k].strip() for k in ("CapEff", "NoNewPrivs", "Seccomp")}}
if os.fork() == 0:  # a daemon: double fork, own session
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "300"])
    os._exit(0)
print(json.dumps(out))
''' % dict(secret=SECRET, project=project, port=port, host_pid=os.getpid(), home=os.environ["HOME"])

BOMB = '''import os, time
n = 0
for _ in range(5000):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    except OSError:
        break
print(n, flush=True)
while True:
    try:
        os.fork()
    except OSError:
        pass
'''

def mine():
    pids = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{{p}}/status") as fh:
                st = dict(l.split(":", 1) for l in fh if ":" in l)
        except OSError:
            continue
        if int(st["Uid"].split()[0]) == os.getuid() and int(p) != os.getpid() and st["State"].split()[0] not in "ZX":
            pids.append(st["Name"].strip())
    return pids

limits = Limits(wall_s=2.0, cpu_s=1.0, max_processes=16)
# No cgroup for an ordinary user here: without the opt-out every run is refused (below).
with Sandbox(pool_size=1, limits=limits, isolation="namespaces", base_dir=BASES) as sb:
    out["refused"] = sb.run(Program("pass")).error
with Sandbox(pool_size=2, limits=limits, isolation="namespaces", base_dir=BASES,
             allow_sockets=("inet",), allow_unenforced=("memory", "cpu", "pids")) as sb:
    other = sb.start(Program("import time; open('mine', 'w'); time.sleep(30)"))  # a concurrent run
    r = sb.run(Program(PROBE))
    other.kill()
    out["other"] = other.result(5).status
    out["probe_status"], out["probe_stderr"] = r.status, r.stderr[-500:]
    out["unenforced"] = list(r.unenforced)
    out["run"] = json.loads(r.stdout) if r.status == "ok" else None
    out["after_daemon"] = [n for n in mine() if n == "sleep"]
    bomb = sb.run(Program(BOMB))
    out["bomb"] = [bomb.status, bomb.stdout.strip()]
    out["after_bomb"] = sb.run(Program("print(6 * 7)")).stdout.strip()
out["left_processes"] = mine()
out["left_files"] = os.listdir(BASES)
print("RESULT" + json.dumps(out))
"""


@needs_root
def test_rootless_runs_are_isolated_through_a_user_namespace(tmp):
    reason = _userns_for_nobody()
    if reason:
        pytest.skip(reason)
    secret = tmp / "secret.txt"  # readable by the unprivileged user, in a hidden directory
    secret.write_text("the answer")
    secret.chmod(0o644)
    bases = tmp / "bases"
    bases.mkdir()
    os.chown(bases, NOBODY, NOBODY)
    out = run_as_nobody(ROOTLESS_PROBE.format(secret=str(secret), bases=str(bases)), tmp,
                        env={"RK_SECRET_TOKEN": "s3cret"})
    assert "RESULT" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]
    res = json.loads(out.stdout.split("RESULT", 1)[1])
    caps = res["caps"]

    # The report claims the user namespace and what it gives, and nothing it does not give.
    assert not caps["running_as_root"]
    assert caps["namespaces"] == {"mount": True, "network": True, "pid": True, "ipc": True,
                                  "uts": True, "user": True}
    assert caps["user_namespace"]["uid_map"] == f"{NOBODY} {NOBODY} 1"
    assert caps["per_run_pid_namespace"] and caps["capabilities_dropped"]
    assert caps["uid_drop"] is False and caps["per_run_uid"] is False
    assert caps["cgroups"] is None and caps["seccomp"] and caps["filesystem_readonly"]
    # Rootless keeps the allow-lists: system calls (libseccomp) and the file-system view.
    assert caps["seccomp_filter"] == "allow-list" and caps["socket_families"] == []
    assert caps["filesystem_view"] == "allow-list"
    assert "own PID namespace" in caps["kills_all_run_processes"]
    assert "[yes] user namespace" in res["report"]
    assert "[NO ] unprivileged uid, one per concurrent run" in res["report"]
    assert "[NO ] cgroups" in res["report"]

    # Outside the sandbox the same user reaches all of this; inside a run, none of it.
    assert res["outside"] == {"secret": "the answer", "project": True, "net": 0}
    assert res["probe_status"] == "ok", res["probe_stderr"]
    # Limits it cannot enforce refuse the run, naming the limit and the fix; once opted out
    # of, every result says which limits it ran without.
    assert "memory_mb=" in res["refused"] and "allow_unenforced" in res["refused"]
    assert res["unenforced"] == ["memory", "cpu", "pids"]
    run = res["run"]
    assert run["uid"] == NOBODY
    assert run["secret"] == 2 and run["project"] is False  # hidden host dirs: ENOENT
    exposed = {p.split("/")[2] for p in caps["exposed_read_only"] if p.startswith("/root/")}
    assert set(run["root"]) <= exposed  # /root is empty but for an interpreter bound back
    assert run["net"] == 101  # ENETUNREACH: no interface, not even loopback
    assert run["procs"] == ["1", "2"]  # its init and itself: no host process, no other run
    assert run["base"] and res["other"] == "killed"  # no other run's directory either
    assert run["kill_host"] == 3  # ESRCH: host pids do not exist in its namespace
    assert run["write"].pop(".") == "written"
    assert all(v in (2, 13, 30) for v in run["write"].values()), run["write"]  # ENOENT/EACCES/EROFS
    assert run["status"] == {"CapEff": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
    assert "RK_SECRET_TOKEN" not in run["env"] and "PATH" in run["env"]

    # The daemon a run leaves and a fork bomb end with the run; nothing is left afterwards.
    assert res["after_daemon"] == []
    status, forked = res["bomb"]
    assert status == "timeout" and 0 < int(forked) <= 16
    assert res["after_bomb"] == "42"
    assert res["left_processes"] == [] and res["left_files"] == []


NO_USERNS_PROBE = """
from rewardkit.sandboxes import Limits, Program, Sandbox, SandboxError, capabilities
caps = capabilities()
print("CLAIMS", caps["uid_drop"], any(caps["namespaces"].values()), caps["filesystem_readonly"],
      caps["per_run_pid_namespace"])
# Nothing bounds the bomb's CPU or size here, so its waits for a CPU stretch the wall rule to
# its backstop (10 x wall_s, Limits.wall_backstop_s): a short wall_s keeps that short.
with Sandbox(pool_size=1, limits=Limits(wall_s=0.5, cpu_s=1),
             allow_unenforced=("memory", "cpu", "pids", "disk")) as sb:
    bomb = "import os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n        pass"
    print("RUNS", sb.run(Program("print(6 * 7)")).stdout.strip(), sb.run(Program(bomb)).status)
try:
    Sandbox(isolation="namespaces").run(Program("pass"))
except SandboxError as exc:
    print("REFUSED", "user namespace: False" in str(exc))
"""


@needs_root
def test_without_root_or_user_namespaces_nothing_is_claimed_and_limits_still_hold(tmp):
    out = run_as_nobody(NO_USERNS_PROBE, tmp, no_userns=True)
    assert "CLAIMS False False False False" in out.stdout, out.stdout + out.stderr
    assert "RUNS 42 timeout" in out.stdout and "REFUSED True" in out.stdout
