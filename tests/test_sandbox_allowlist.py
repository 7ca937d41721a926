"""The run's seccomp filter is an allow-list: calls the runtimes never make are refused, socket
families are closed by default, and every supported language still runs under it."""
from __future__ import annotations

import ast
import os

import pytest

from rewardkit.sandboxes import Limits, Program, Sandbox
from rewardkit.sandboxes.languages import available_languages

LIMITS = Limits(cpu_s=5.0, wall_s=10.0, memory_mb=512)

# x86-64 numbers of calls a deny-list let through (see docs/sandbox.md).
UNLISTED = {"modify_ldt": 154, "personality": 135, "pidfd_open": 434, "pidfd_getfd": 438,
            "memfd_secret": 447, "move_pages": 279, "io_setup": 206, "mq_open": 240,
            "process_madvise": 440, "statmount": 457, "listmount": 458, "open_tree_attr": 467,
            "kcmp": 312, "setxattr": 188}
FAMILIES = {"unix": 1, "inet": 2, "inet6": 10, "netlink": 16, "vsock": 40, "packet": 17}


@pytest.fixture(scope="module")
def box():
    with Sandbox(pool_size=1, limits=LIMITS) as sb:
        caps = sb.capabilities()
        if caps.get("seccomp_filter") != "allow-list":
            pytest.skip(f"no allow-list filter here ({caps.get('seccomp_filter')}); "
                        "the capabilities report says so")
        yield sb


def _python(box, src):
    r = box.run(Program(src))
    assert r.status == "ok", r.stderr
    return ast.literal_eval(r.stdout)


def test_calls_outside_the_list_are_refused(box):
    src = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nout = {}\n"
           f"for name, nr in {UNLISTED!r}.items():\n"
           "    ctypes.set_errno(0)\n"
           "    out[name] = (libc.syscall(nr, 0, 0, 0, 0, 0), ctypes.get_errno())\n"
           "print(out)\n")
    out = _python(box, src)
    allowed = {name: v for name, v in out.items() if v[0] != -1 or v[1] not in (1, 38)}
    assert allowed == {}


def test_no_socket_family_by_default_but_socketpairs_work(box):
    src = ("import socket\nout = {}\n"
           f"for name, fam in {FAMILIES!r}.items():\n"
           "    try:\n        socket.socket(fam, socket.SOCK_DGRAM).close(); out[name] = 'open'\n"
           "    except OSError as e:\n        out[name] = e.errno\n"
           "a, b = socket.socketpair()\na.send(b'x')\nout['pair'] = b.recv(1).decode()\n"
           "print(out)\n")
    out = _python(box, src)
    assert out.pop("pair") == "x"
    assert {n: v for n, v in out.items() if v == "open"} == {}


def test_a_family_can_be_allowed_explicitly():
    src = "import socket\nsocket.socket(socket.AF_UNIX).close()\nprint('ok')\n"
    with Sandbox(pool_size=1, limits=LIMITS, allow_sockets=("unix",)) as sb:
        assert sb.run(Program(src)).stdout == "ok\n"
    with pytest.raises(ValueError, match="unknown socket families"):
        Sandbox(allow_sockets=("bluetooth",))


PROGRAMS = {
    "python": "import threading, subprocess, asyncio\nt = threading.Thread(target=print, "
              "args=('t',)); t.start(); t.join()\n"
              "print(subprocess.run(['echo', 's'], capture_output=True, text=True).stdout, end='')\n"
              "async def f(): return 'a'\nprint(asyncio.run(f()))\n",
    "c": "#include <stdio.h>\n#include <stdlib.h>\n#include <pthread.h>\n"
         "void *f(void *a) { puts(\"t\"); return a; }\n"
         "int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); pthread_join(t, 0);\n"
         "  fflush(stdout); system(\"echo s\"); puts(\"a\"); return 0; }\n",
    "cpp": "#include <iostream>\n#include <thread>\n#include <cstdlib>\n"
           "int main() { std::thread t([] { std::cout << \"t\" << std::endl; }); t.join();\n"
           "  std::system(\"echo s\"); std::cout << \"a\" << std::endl; }\n",
    "javascript": "const { execSync } = require('child_process');\n"
                  "const { Worker } = require('worker_threads');\n"
                  "const w = new Worker('require(\"worker_threads\").parentPort.postMessage(1)',"
                  " { eval: true });\n"
                  "w.on('message', () => { console.log('t'); "
                  "process.stdout.write(execSync('echo s').toString()); console.log('a'); });\n",
    "bash": "echo t | cat; (echo s) | tr x y; x=$(echo a); echo \"$x\"\n",
}


@pytest.mark.parametrize("language", list(PROGRAMS))
def test_every_language_runs_threads_and_child_processes_under_the_filter(box, language):
    if not available_languages()[language]:
        pytest.skip(f"{language} is not installed")
    r = box.run(Program(PROGRAMS[language], language), LIMITS)
    assert (r.status, r.stdout) == ("ok", "t\ns\na\n"), r.stderr or r.compile


def test_the_file_system_view_is_an_allow_list(box):
    from rewardkit.sandboxes.sandbox import DEV_ENTRIES, ETC_ENTRIES, RUNTIME_DIRS
    if box.capabilities().get("filesystem_view") != "allow-list":
        pytest.skip("no mount namespace here: the report says the view is the host's")
    src = ("import os\nout = {}\n"
           "for d in ['/etc', '/dev', '/var', '/opt', '/srv', '/home', '/boot', '/sys']:\n"
           "    out[d] = sorted(os.listdir(d)) if os.path.isdir(d) else None\n"
           "print(out)\n")
    seen = _python(box, src)
    assert set(seen["/etc"]) <= set(ETC_ENTRIES) | {e for e in seen["/etc"]
                                                    if e.startswith("python")}
    assert set(seen["/dev"]) <= set(DEV_ENTRIES) | {"fd", "stdin", "stdout", "stderr", "shm"}
    assert seen["/sys"] in (None, [], ["devices"])
    host = {d: sorted(os.listdir(d)) for d in ("/var", "/opt", "/srv", "/home", "/boot")
            if os.path.isdir(d) and d not in RUNTIME_DIRS}
    assert {d: seen[d] for d in host if seen[d]} == {}, "host dirs listable from a run"


def test_without_libseccomp_the_deny_list_applies_and_the_report_says_so(monkeypatch):
    from rewardkit.sandboxes import sandbox as sandbox_module
    from rewardkit.sandboxes.capabilities import format_report

    monkeypatch.setattr(sandbox_module, "compile_filter", lambda *_: None)
    with Sandbox(pool_size=1, limits=LIMITS) as sb:
        caps = sb.capabilities()
        if not caps["seccomp"]:
            pytest.skip("no seccomp on this machine at all")
        src = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               "print(libc.unshare(0x10000000), ctypes.get_errno())\n")
        refused = sb.run(Program(src)).stdout
    assert caps["seccomp_filter"] == "deny-list"
    assert "deny-list fallback" in format_report(caps)
    assert refused == "-1 1\n"  # the fallback still refuses the ways out
