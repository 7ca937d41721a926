"""Behaviour of the sandbox API: statuses, limits, output capture, languages, channel, pool."""
from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest

from rewardkit.sandboxes import (COMPILE_LIMITS, Limits, Program, RunResult, Sandbox,
                                 available_languages)

FAST = Limits(cpu_s=2.0, wall_s=2.0, memory_mb=512)
LANGS = available_languages()


@pytest.fixture(scope="module")
def sb():
    with Sandbox(pool_size=2, limits=FAST) as box:
        yield box


def test_limits_reject_non_positive_values_with_a_hint():
    with pytest.raises(ValueError, match="cpu_s must be a positive number"):
        Limits(cpu_s=0)
    with pytest.raises(ValueError, match="max_open_files"):
        Limits(max_open_files=3)
    assert Limits().replace(wall_s=3).wall_s == 3


def test_program_rejects_paths_that_escape_the_working_directory():
    with pytest.raises(ValueError, match="relative path"):
        Program("pass", files={"../x": "a"})
    with pytest.raises(ValueError, match="relative path"):
        Program("pass", files={"/etc/passwd": "a"})
    with pytest.raises(TypeError, match="stdin"):
        Program("pass", stdin=3)


def test_unknown_language_is_a_clear_error(sb):
    with pytest.raises(ValueError, match="unknown language 'cobol'"):
        sb.run(Program("x", language="cobol"))


def test_ok_run_captures_stdout_stderr_stdin_args_and_files(sb):
    src = ("import sys\nprint(sys.argv[1:], input(), open('data/x.txt').read())\n"
           "print('warn', file=sys.stderr)")
    r = sb.run(Program(src, stdin="hello\n", args=["a", "b"], files={"data/x.txt": b"X"}))
    assert r.status == "ok" and r.exit_code == 0 and r.signal is None
    assert r.stdout == "['a', 'b'] hello X\n"
    assert r.stderr == "warn\n"
    assert r.wall_s > 0 and r.peak_memory_mb > 0


def test_nonzero_exit_and_uncaught_exception_are_runtime_errors(sb):
    r = sb.run(Program("import sys; sys.exit(3)"))
    assert (r.status, r.exit_code) == ("runtime_error", 3)
    r = sb.run(Program("def f():\n    raise ValueError('boom')\nf()"))
    assert r.status == "runtime_error" and r.exit_code == 1
    assert "ValueError: boom" in r.stderr
    assert "_zygote" not in r.stderr and "_run_child" not in r.stderr  # no server frames
    r = sb.run(Program("import sys; sys.exit('bye')"))
    assert (r.status, r.exit_code, r.stderr) == ("runtime_error", 1, "bye\n")


def test_exit_runs_atexit_handlers_and_joins_threads_like_the_interpreter(sb):
    src = ("import atexit, threading, time\n"
           "atexit.register(lambda: print('atexit'))\n"
           "threading.Thread(target=lambda: (time.sleep(0.05), print('thread'))).start()\n")
    r = sb.run(Program(src))
    assert r.status == "ok" and r.stdout == "thread\natexit\n"


def test_syntax_error_is_a_runtime_error_with_the_message(sb):
    r = sb.run(Program("def f(:\n  pass"))
    assert r.status == "runtime_error" and "SyntaxError" in r.stderr


def test_wall_time_limit_kills_a_sleeping_program(sb):
    r = sb.run(Program("import time; time.sleep(30)"), limits=FAST.replace(wall_s=0.5))
    assert r.status == "timeout" and 0.5 <= r.wall_s < 2.0


def test_cpu_time_limit_stops_a_busy_loop(sb):
    r = sb.run(Program("while True: pass"), limits=FAST.replace(cpu_s=1, wall_s=60))
    # The CPU limit ended it, not the wall clock: the kernel's SIGXCPU (RLIMIT_CPU) or the
    # sandbox's own SIGKILL when the run's cgroup has used its CPU seconds, whichever comes
    # first (they race at the limit), long before the 60 s wall clock. The wall clock is
    # generous because on a loaded host one CPU second can take many seconds of wall time.
    assert r.status == "timeout" and r.signal in (signal.SIGXCPU, signal.SIGKILL)
    assert r.wall_s < 30


def test_memory_limit_is_reported(sb):
    r = sb.run(Program("x = bytearray(800 * 1024 * 1024)"), limits=FAST.replace(memory_mb=256))
    assert r.status == "memory_limit" and "MemoryError" in r.stderr


def test_output_past_the_cap_is_truncated_flagged_and_stops_the_run(sb):
    limits = FAST.replace(max_output_bytes=1000)
    r = sb.run(Program("import sys\nwhile True: sys.stdout.write('x' * 4096)"), limits=limits)
    assert r.status == "output_limit" and r.stdout_truncated and len(r.stdout) == 1000
    r = sb.run(Program("print('y' * 999)"), limits=limits)
    assert r.status == "ok" and not r.stdout_truncated


def test_each_run_starts_from_a_clean_interpreter(sb):
    r1 = sb.run(Program("import math, sys\nmath.pi = 3\nsys.modules['leak'] = 1\nX = 1"))
    r2 = sb.run(Program("import math, sys\nprint(math.pi, 'leak' in sys.modules, 'X' in globals())"))
    assert r1.status == "ok" and r2.stdout == "3.141592653589793 False False\n"


def test_runs_have_private_directories(sb):
    r1 = sb.run(Program("import os\nopen('mine.txt', 'w').write('1')\nprint(os.getcwd())"))
    other = r1.stdout.strip()
    r2 = sb.run(Program(f"import os\nprint(os.listdir('.'), os.path.exists({other!r}))"))
    assert r2.stdout == "['main.py'] False\n"


def test_run_many_keeps_order_and_bounds_concurrency():
    with Sandbox(pool_size=2, limits=FAST) as box:
        progs = [Program(f"import time; time.sleep(0.2); print({i})") for i in range(6)]
        start = time.monotonic()
        results = box.run_many(progs)
        elapsed = time.monotonic() - start
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]
    assert elapsed >= 0.6  # 6 runs of 0.2 s, two at a time


def test_sandbox_is_safe_to_call_from_many_threads(sb):
    results: list[RunResult] = [None] * 12  # type: ignore[list-item]

    def work(i: int) -> None:
        results[i] = sb.run(Program(f"print({i} * {i})"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(12)]


def test_fork_server_outlives_the_thread_that_started_it():
    # The server dies with the thread that spawned it (PR_SET_PDEATHSIG counts threads): a
    # caller thread that starts the server and ends must not take other runs down with it.
    with Sandbox(pool_size=2, limits=FAST) as box:
        handles = []
        starter = threading.Thread(target=lambda: handles.append(
            box.start(Program("import time; time.sleep(0.5); print('survived')"))))
        starter.start()
        starter.join()
        with handles[0] as handle:
            r = handle.result(timeout=10)
        assert (r.status, r.stdout, r.error) == ("ok", "survived\n", None)


def test_runs_from_more_threads_than_slots_each_get_their_own_result():
    # Threads end at different times while others still run, as pool threads of a caller do.
    programs = {}
    n = 0
    for k in range(6):
        programs[k] = []
        for _ in range(4 + 2 * k):
            exit_code = 0 if n % 3 else n % 100 + 1
            programs[k].append((n, exit_code, Program(
                f"import sys\nprint({n})\nprint('e{n}', file=sys.stderr)\nsys.exit({exit_code})")))
            n += 1
    results: dict[int, RunResult] = {}
    with Sandbox(pool_size=2, limits=FAST) as box:
        def work(k: int) -> None:
            for number, _, program in programs[k]:
                results[number] = box.run(program)

        threads = [threading.Thread(target=work, args=(k,)) for k in programs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(results) == n == 54
    for runs in programs.values():
        for number, exit_code, _ in runs:
            r = results[number]
            assert r.status == ("ok" if exit_code == 0 else "runtime_error"), (number, r.error)
            assert (r.stdout, r.stderr, r.exit_code) == (f"{number}\n", f"e{number}\n", exit_code)


def test_a_lost_fork_server_is_a_sandbox_error_that_says_why():
    with Sandbox(pool_size=1, limits=FAST) as box:
        with box.start(Program("import time; time.sleep(5)")) as handle:
            os.kill(box._server._proc.pid, 9)
            r = handle.result(timeout=10)
        assert r.status == "sandbox_error"
        assert "fork server was killed by SIGKILL" in r.error
        assert box.run(Program("print('again')")).stdout == "again\n"  # a new server starts


def test_a_fork_server_lost_as_a_run_is_sent_is_a_sandbox_error_that_says_why(monkeypatch):
    """The server can die before its reader thread notices; the run that finds it gone while
    being sent says how it ended, as one lost mid-run does."""
    with Sandbox(pool_size=1, limits=FAST) as box:
        assert box.run(Program("print('up')")).stdout == "up\n"
        server = box._server

        def send_to_a_killed_server(obj, fds=()):
            os.kill(server._proc.pid, 9)
            server._proc.wait()
            raise BrokenPipeError(32, "Broken pipe")

        monkeypatch.setattr(server, "_send", send_to_a_killed_server)
        r = box.run(Program("print('lost')"))
        assert r.status == "sandbox_error"
        assert "fork server was killed by SIGKILL" in r.error and "Broken pipe" in r.error


def test_channel_is_a_private_bidirectional_stream_on_fd_3(sb):
    src = ("import socket\ns = socket.socket(fileno=3)\n"
           "while True:\n    data = s.recv(100)\n    if not data: break\n"
           "    s.sendall(data.upper())\n")
    with sb.start(Program(src, channel=True)) as proc:
        proc.channel.sendall(b"ping")
        assert proc.channel.recv(100) == b"PING"
        proc.channel.shutdown(socket.SHUT_WR)
        r = proc.result(timeout=5)
    assert r.status == "ok"


def test_without_channel_fd_3_is_closed(sb):
    r = sb.run(Program("import os\ntry:\n    os.fstat(3)\nexcept OSError: print('closed')"))
    assert r.stdout == "closed\n"


def test_kill_stops_an_interactive_run(sb):
    with sb.start(Program("import time; time.sleep(30)")) as proc:
        time.sleep(0.1)
        proc.kill()
        r = proc.result(timeout=5)
    assert r.status == "killed"


def test_to_dict_is_plain_data(sb):
    d = sb.run(Program("print(1)")).to_dict()
    assert d["status"] == "ok" and d["stdout"] == "1\n" and d["compile"] is None


def test_closed_sandbox_refuses_new_runs():
    box = Sandbox(pool_size=1)
    box.close()
    with pytest.raises(RuntimeError, match="closed"):
        box.run(Program("pass"))


@pytest.mark.skipif(not LANGS["c"], reason="gcc not installed")
def test_c_compiles_and_runs_and_reports_compile_errors(sb):
    src = "#include <stdio.h>\nint main(){int a,b;scanf(\"%d %d\",&a,&b);printf(\"%d\\n\",a+b);}"
    r = sb.run(Program(src, "c", stdin="2 3"))
    assert r.status == "ok" and r.stdout == "5\n" and r.compile.status == "ok"
    r = sb.run(Program("int main(){ return x; }", "c"))
    assert r.status == "compile_error" and "undeclared" in r.compile.stderr


@pytest.mark.skipif(not LANGS["c"], reason="gcc not installed")
def test_c_crash_is_a_runtime_error_with_its_signal(sb):
    r = sb.run(Program("int main(){ int *p = 0; return *p; }", "c"))
    assert r.status == "runtime_error" and r.signal == 11


@pytest.mark.skipif(not LANGS["cpp"], reason="g++ not installed")
def test_cpp_compiles_and_runs(sb):
    r = sb.run(Program("#include <cstdio>\nint main(){ std::puts(\"hi\"); }", "cpp"))
    assert r.status == "ok" and r.stdout == "hi\n"


@pytest.mark.skipif(not LANGS["javascript"], reason="node not installed")
def test_javascript_runs_with_stdin(sb):
    src = "const s=require('fs').readFileSync(0,'utf8');console.log(s.trim().toUpperCase())"
    r = sb.run(Program(src, "js", stdin="abc"))
    assert r.status == "ok" and r.stdout == "ABC\n"


@pytest.mark.skipif(not LANGS["bash"], reason="bash not installed")
def test_bash_runs(sb):
    r = sb.run(Program("read x; echo \"got $x\"; exit 4", "bash", stdin="y\n"))
    assert (r.status, r.exit_code, r.stdout) == ("runtime_error", 4, "got y\n")


def test_compile_limits_are_roomier_than_run_defaults():
    assert COMPILE_LIMITS.memory_mb >= Limits().memory_mb and COMPILE_LIMITS.cpu_s >= 10


def test_multiprocessing_works_inside_a_run(sb):
    src = ("import multiprocessing as mp\n"
           "if __name__ == '__main__':\n"
           "    with mp.Pool(2) as pool:\n"
           "        print(sum(pool.map(abs, [-1, -2, -3])))\n")
    r = sb.run(Program(src), limits=FAST.replace(wall_s=5, cpu_s=5))
    assert r.status == "ok" and r.stdout == "6\n", r.stderr


@pytest.mark.parametrize("parent", ["/dev/shm", "/var/tmp"])
def test_base_dir_can_live_in_a_hidden_scratch_dir(parent):
    if not os.access(parent, os.W_OK):
        pytest.skip(f"{parent} not writable")
    with Sandbox(pool_size=1, limits=FAST, base_dir=parent) as box:
        r = box.run(Program("import os\nopen('x', 'w').write('1')\nprint(sorted(os.listdir('.')))"))
        base = box._base
    assert r.status == "ok" and r.stdout == "['main.py', 'x']\n", r.error or r.stderr
    assert base.startswith(parent) and not os.path.exists(base)
