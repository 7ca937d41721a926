"""One run in progress: its directory, its steps (compile, then run), its output."""
from __future__ import annotations

import os
import queue
import selectors
import shutil
import socket
import stat
import tempfile
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from .enforcement import refusal, unenforced
from .errors import SandboxError
from .forkserver import ForkServer, ServerDied
from .languages import BINARY, Language, resolve_tool, sandbox_path
from .limits import COMPILE_LIMITS, Limits
from .program import Program
from .result import RunResult, classify

_GRACE_S = 5.0  # how long past its wall limit the host waits for the server's verdict


@dataclass(frozen=True)
class Session:
    """What a started fork server offers its runs, as the sandbox that started it set it up:
    a run needs these facts and nothing else of the :class:`Sandbox`, so this module never
    imports the one that pools the runs.

    Attributes:
        server: the fork server.
        base: the directory the runs' own directories are made in.
        uids: one unprivileged uid per slot (empty where runs keep the caller's uid).
        enforcement: which limits this host enforces (:func:`enforcement.enforcement`).
        allow_unenforced: the limits runs may go without.
        private_ns: runs get their own mount, IPC and network namespaces.
        seccomp: runs install the system-call filter.
        ids: run ids, unique for this server.
    """

    server: ForkServer
    base: str
    uids: tuple
    enforcement: dict
    allow_unenforced: tuple
    private_ns: bool
    seccomp: bool
    ids: Iterator[int]

    @property
    def unenforced(self) -> list[str]:
        return unenforced(self.enforcement, self.allow_unenforced)


@dataclass(frozen=True)
class Build:
    """A compiled program, built once for every run of the same source: the compile step's
    result, and the binary (None where the compile failed)."""

    compile: RunResult
    binary: Optional[bytes]


class RunHandle:
    """One run in progress. ``channel`` is the host end of the program's fd 3 (when
    ``Program.channel`` is set). ``result()`` waits for the end; ``kill()`` stops it.

    ``slots`` hands out the slot numbers of the pool (a run waits for one and gives it back);
    ``connect`` returns the :class:`Session` of a live fork server (starting one if needed).
    ``build``: the program already compiled (its compile step is not repeated);
    ``build_only``: compile and stop, the binary kept in :attr:`build`."""

    def __init__(self, program: Program, language: Language, limits: Limits,
                 slots: "queue.Queue[int]", connect: Callable[[], Session],
                 build: Optional[Build] = None, build_only: bool = False) -> None:
        self.build = build
        self._build_only = build_only
        self._slots = slots
        self._connect = connect
        self._session: Optional[Session] = None
        self.program = program
        self.language = language
        self.limits = limits
        self.channel: Optional[socket.socket] = None
        self._child_channel: Optional[socket.socket] = None
        self._slot: Optional[int] = None
        self._dir: Optional[str] = None
        self._server: Optional[ForkServer] = None
        self._run_id: Optional[int] = None
        self._killed = False
        self._done = threading.Event()
        self._result: Optional[RunResult] = None
        self._started = threading.Event()
        self._accounts: Optional[dict] = None

    def __enter__(self) -> "RunHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._done.is_set():
            self.kill()
            self.result()
        if self.channel is not None:
            self.channel.close()

    def kill(self) -> None:
        """Stop the run (every process of it); its status becomes ``killed``."""
        self._killed = True
        if self._server is not None and self._run_id is not None:
            self._server.kill(self._run_id, "killed")

    def accounts(self, timeout: Optional[float] = None) -> Optional[dict]:
        """Where the kernel accounts this run's CPU time, for a trusted reader outside the run
        that judges time on it (the code reward's checker): ``cpu_file`` (the run's cgroup
        counter), read whole (``cpu_field`` None) or as its ``cpu_field`` line, times
        ``cpu_unit_s`` seconds; ``procs_file``, the run's processes (whose
        ``/proc/PID/schedstat`` says how long each waited for a CPU). Nothing the program does
        can change these counts: the kernel keeps them, for every process of the run however
        it was started. Waits until the run has started (at most ``timeout`` seconds); None
        for a program without ``Program.channel``, where the run's CPU time is not accounted
        (no CPU cgroup: see ``allow_unenforced``), or where it ended before it started."""
        self._started.wait(timeout)
        return self._accounts

    def _on_start(self, accounts: Optional[dict]) -> None:
        self._accounts = accounts
        self._started.set()

    def result(self, timeout: Optional[float] = None) -> RunResult:
        """Wait for the run to end (at most ``timeout`` seconds, then TimeoutError)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the run did not finish within {timeout} s")
        assert self._result is not None
        return self._result

    # -- internals ------------------------------------------------------------------------------
    def _begin(self, background: bool) -> None:
        if self.program.channel:
            self.channel, self._child_channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._slot = self._slots.get()
        try:
            self._session = self._connect()
            self._server = self._session.server
            self._prepare_dir()
        except BaseException as exc:
            self._finish(_error(_describe(exc)))
            if isinstance(exc, SandboxError):
                raise
            return
        if background:
            threading.Thread(target=self._main, name="rewardkit-sandbox-run", daemon=True).start()
        else:
            self._main()

    def _main(self) -> None:
        try:
            result = self._execute()
        except ServerDied as exc:
            result = _error(str(exc))
        except BaseException as exc:  # the sandbox failed, not the program: report, never raise
            result = _error(_describe(exc))
        self._finish(result)

    def _finish(self, result: RunResult) -> None:
        if self._child_channel is not None:
            self._child_channel.close()
            self._child_channel = None
        if self._dir is not None:
            rmtree(self._dir)
            self._dir = None
        if self._slot is not None:
            self._slots.put(self._slot)
            self._slot = None
        self._result = result
        self._done.set()
        self._started.set()

    def _prepare_dir(self) -> None:
        path = tempfile.mkdtemp(prefix=f"run{self._slot}-", dir=self._session.base)
        self._dir = path
        lang = self.language
        files = [(lang.source_file, self.program.source.encode("utf-8"))] + self.program.file_items()
        if self.build is not None and self.build.binary is not None:
            files.append((BINARY, self.build.binary))
        for name, data in files:
            target = os.path.join(path, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as fh:
                fh.write(data)
            if name == BINARY and self.build is not None:
                os.chmod(target, 0o700)
        owner = self._owner()
        if owner is not None:
            for root, dirs, names in os.walk(path):
                for entry in [root] + [os.path.join(root, n) for n in dirs + names]:
                    os.chown(entry, *owner)
        os.chmod(path, 0o700)

    def _read_binary(self) -> bytes:
        """The compiled program the compile step left in the run's directory (a regular file
        of at most ``max_file_mb``, as the compile step itself checked; checked again here)."""
        fd = os.open(os.path.join(self._dir, BINARY), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            info = os.fstat(fd)
            cap = min(COMPILE_LIMITS.max_file_mb, self.limits.max_file_mb) << 20
            if not stat.S_ISREG(info.st_mode) or info.st_size > cap:
                raise SandboxError(f"the compiled program is not a regular file of at most {cap} "
                                   "bytes")
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return fh.read(cap)
        finally:
            os.close(fd)

    def _owner(self) -> Optional[tuple[int, int]]:
        uids = self._session.uids
        if not uids:
            return None
        uid = uids[self._slot]
        return uid, uid

    def _execute(self) -> RunResult:
        session = self._session
        refused = refusal(session.enforcement, self.limits, session.allow_unenforced)
        if refused:  # fail closed: never a run under limits that are not in force
            return _error(f"run refused: {refused}")
        lang = self.language
        fmt = {"source": lang.source_file, "binary": BINARY, "memory_mb": self.limits.memory_mb}
        compiled = None
        if lang.compile and self.build is not None:
            compiled = self.build.compile
        elif lang.compile:
            argv = [a.format(**fmt) for a in lang.compile]
            # In the sandbox like the run: its own cgroup, and a private tmpfs bounded by the
            # run's disk limit (the compiler's temporary files too); only the binary comes out.
            limits = COMPILE_LIMITS.replace(
                max_file_mb=min(COMPILE_LIMITS.max_file_mb, self.limits.max_file_mb))
            compiled = self._step(argv, b"", limits, channel=False, in_process=False,
                                  limit_as=True, collect=BINARY)
            if self._build_only:
                self.build = Build(compiled, self._read_binary() if compiled.ok else None)
                return compiled
        if compiled is not None:
            if compiled.status == "sandbox_error":  # the sandbox failed, not the program
                return RunResult(status="sandbox_error", compile=compiled,
                                 error=f"the compile step failed: {compiled.error}")
            if compiled.status != "ok":
                return RunResult(status="compile_error", stderr=compiled.stderr,
                                 stdout=compiled.stdout, wall_s=compiled.wall_s,
                                 cpu_s=compiled.cpu_s, compile=compiled,
                                 error=f"compile step ended with {compiled.status}")
            if self._killed:
                return RunResult(status="killed", compile=compiled)
        argv = [a.format(**fmt) for a in lang.run] + list(self.program.args)
        result = self._step(argv, self.program.stdin_bytes, self.limits,
                            channel=self.program.channel, in_process=lang.in_process,
                            limit_as=lang.limit_address_space)
        result.compile = compiled
        return result

    def _step(self, argv: list[str], stdin: bytes, limits: Limits, *, channel: bool,
              in_process: bool, limit_as: bool, collect: Optional[str] = None) -> RunResult:
        """One process tree in a private tmpfs copy of the run's directory. ``collect``: a
        compile step's output file, copied back to the directory for the next step."""
        if not in_process and not argv[0].startswith("./"):
            tool = resolve_tool(argv[0])
            if tool is None:
                return _error(f"{argv[0]!r} is not installed; language {self.language.name!r} "
                              "is unavailable here")
            argv[0] = tool
        elif argv[0].startswith("./"):
            argv[0] = os.path.join(self._dir, argv[0][2:])
        stdin_fd = os.memfd_create("stdin")
        _write_all(stdin_fd, stdin)
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        fds = [stdin_fd, out_w, err_w]
        if channel:
            fds.append(self._child_channel.fileno())
        uid = self._owner()
        env = {"PATH": sandbox_path(), "HOME": self._dir, "TMPDIR": self._dir,
               "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        session = self._session
        self._run_id = next(session.ids)
        request = {"id": self._run_id, "dir": self._dir, "argv": argv, "args": list(self.program.args),
                   "wall_backstop_s": limits.wall_backstop_s,
                   "script": self.language.source_file,
                   "mode": "python" if in_process else ("compile" if collect else "exec"),
                   "collect": collect,
                   "env": env, "limits": limits.to_dict(), "limit_address_space": limit_as,
                   "uid": uid[0] if uid else None, "gid": uid[1] if uid else None,
                   "slot": self._slot, "private_ns": session.private_ns,
                   "seccomp": session.seccomp,
                   "private_tmpfs": True,
                   "cgroup_limits": [n for n in ("memory", "cpu", "pids")
                                     if session.enforcement.get(n, {}).get("enforced")],
                   "allow_unenforced": list(session.allow_unenforced)}
        try:
            future = self._server.submit(request, fds,
                                         on_start=self._on_start if channel else None)
        finally:
            for fd in fds[:3]:
                os.close(fd)
        if self._killed:
            self._server.kill(self._run_id, "killed")
        out, err, over = _collect(self._server, self._run_id, out_r, err_r, limits, future)
        try:
            done = future.result(timeout=limits.wall_backstop_s + _GRACE_S)
        except FutureTimeout:
            self._server.kill(self._run_id, "timeout")
            return _error("the sandbox fork server gave no verdict within "
                          f"{limits.wall_backstop_s + _GRACE_S} s "
                          "of the start of the run")
        if done.get("refused"):
            return _error(f"run refused: {done['setup_error']}; or set allow_unenforced")
        if done.get("setup_error"):
            return _error(f"the sandbox could not start the program: {done['setup_error']}")
        stdout = out.decode("utf-8", "replace")
        stderr = err.decode("utf-8", "replace")
        in_cgroup = bool(done.get("peak_bytes"))
        peak = done["peak_bytes"] / (1 << 20) if in_cgroup else done["maxrss_kb"] / 1024.0
        cpu_s = done["cgroup_cpu_s"] if done.get("cgroup_cpu_s") is not None else done["cpu_s"]
        status = classify(exit_code=done["exit_code"], signal=done["signal"],
                          reason=done["reason"], cpu_s=cpu_s, peak_memory_mb=peak,
                          stderr=stderr, cpu_limit_s=limits.cpu_s,
                          memory_limit_mb=limits.memory_mb, cgroup_oom=done.get("oom", False))
        return RunResult(status=status, exit_code=done["exit_code"], signal=done["signal"],
                         stdout=stdout, stderr=stderr, stdout_truncated=over[0],
                         stderr_truncated=over[1], wall_s=round(done["wall_s"], 6),
                         cpu_s=round(cpu_s, 6), peak_memory_mb=round(peak, 2),
                         unenforced=tuple(dict.fromkeys(
                             session.unenforced + list(done.get("unenforced") or []))),
                         peak_memory_scope="run" if in_cgroup else "process",
                         cpu_scope="run" if done.get("cgroup_cpu_s") is not None else "process")


def _collect(server: ForkServer, run_id: int, out_r: int, err_r: int, limits: Limits,
             future) -> tuple[bytes, bytes, list[bool]]:
    """Read stdout and stderr until both close, keeping at most ``max_output_bytes`` of each;
    past that, ask the server to kill the run (status ``output_limit``)."""
    cap = limits.max_output_bytes
    bufs = {out_r: bytearray(), err_r: bytearray()}
    over = {out_r: False, err_r: False}
    sel = selectors.DefaultSelector()
    for fd in bufs:
        sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + limits.wall_backstop_s + _GRACE_S
    done_at = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if future.done():
                done_at = done_at or now
                if now - done_at > 1.0:  # everything of the run is dead; nothing more can come
                    break
            if now > deadline:
                break
            for key, _ in sel.select(0.1):
                fd = key.fd
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(fd)
                    continue
                buf = bufs[fd]
                room = cap - len(buf)
                if room > 0:
                    buf += chunk[:room]
                if len(chunk) > room and not over[fd]:
                    over[fd] = True
                    server.kill(run_id, "output_limit")
    finally:
        sel.close()
        os.close(out_r)
        os.close(err_r)
    return bytes(bufs[out_r]), bytes(bufs[err_r]), [over[out_r], over[err_r]]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _error(message: str) -> RunResult:
    """A ``sandbox_error`` result; its ``error`` is never empty, whatever failed."""
    message = message.strip() or "the sandbox failed without a message (a bug: please report it)"
    return RunResult(status="sandbox_error", error=message)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else f"{type(exc).__name__} in the sandbox"


def rmtree(path: str) -> None:
    """Remove a run's directory even where the program took away its own permissions."""
    def fix(func, target, _exc):  # noqa: ANN001
        try:
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
            func(target)
        except OSError:
            pass
    shutil.rmtree(path, onerror=fix)
