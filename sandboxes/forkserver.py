"""Host side of the fork server: starts it, sends it runs, routes its replies.

One control socket (``SOCK_SEQPACKET``: message boundaries, and file descriptors travel with
``SCM_RIGHTS``) carries JSON messages both ways; one thread owns the server (starts it, then
reads its ``done`` replies and completes the matching futures), so any number of threads can
submit at once, and come and go.
"""
from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import Future
from typing import Any, Callable

from . import _cgroup
from .languages import sandbox_path

ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_zygote.py")

#: Modules the fork server imports once so runs start with them already loaded. Only pure
#: standard-library modules that start no threads (forking a process with threads is unsafe).
PRELOAD = ("abc", "array", "atexit", "base64", "bisect", "collections", "copy", "dataclasses",
           "datetime", "decimal", "enum", "fractions", "functools", "hashlib", "heapq", "io",
           "itertools", "json", "math", "numbers", "operator", "random", "re", "socket",
           "statistics", "string", "struct", "textwrap", "threading", "traceback", "types",
           "typing")


_SERIAL = itertools.count()


class ServerDied(RuntimeError):
    """The fork server exited; pending runs fail with ``sandbox_error``."""


class ForkServer:
    """A running fork server. Thread-safe: :meth:`submit` and :meth:`kill` may be called from
    any thread."""

    def __init__(self, *, isolation: str, base: str, hide: list[str], expose: list[str],
                 uids: list[int], slots: int, log_path: str, timeout: float = 30.0,
                 seccomp_bpf: bytes | None = None, allow_sockets: tuple = (),
                 cgroup_root: str = _cgroup.ROOT) -> None:
        host, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = host
        self._send_lock = threading.Lock()
        self._futures: dict[int, Future] = {}
        self._on_start: dict[int, Callable[[dict | None], None]] = {}
        self._futures_lock = threading.Lock()
        self._dead: str | None = None
        self._closing = False
        self._proc: subprocess.Popen | None = None
        self._log_path = log_path
        self._cgroup_dirs: list[str] = []
        config = {"isolation": isolation, "base": base, "hide": hide, "expose": expose,
                  "uids": uids, "slots": slots, "preload": list(PRELOAD),
                  "host_pid": os.getpid(),
                  "seccomp_bpf": seccomp_bpf.hex() if seccomp_bpf else None,
                  "allow_sockets": list(allow_sockets),
                  "cgroup_root": cgroup_root,
                  "cgroup_name": _cgroup.unique_name(f"rewardkit-{os.getpid()}-{next(_SERIAL)}")}
        # The server asks the kernel to SIGKILL it when its parent dies (PR_SET_PDEATHSIG), so
        # that it never outlives the host. For that signal Linux counts the *thread* that forked
        # it as the parent, not the process: started from a caller's thread, the server would be
        # killed as soon as that thread ends, with other threads' runs still in it. So one thread
        # of our own starts it, then reads its replies, and ends only when the server is gone or
        # :meth:`close` shuts the socket.
        started: Future = Future()
        self._thread = threading.Thread(target=self._own, args=(peer, config, timeout, started),
                                        name="rewardkit-sandbox", daemon=True)
        self._thread.start()
        try:
            self.capabilities: dict[str, Any] = started.result()
        except ServerDied as exc:
            self.close()  # the server has exited now: its log is complete
            raise ServerDied(f"{exc}; {self.log_tail()}") from None
        except BaseException:
            self.close()
            raise
        self._cgroup_dirs = list((self.capabilities.get("cgroups") or {}).get("dirs", []))

    def _own(self, peer: socket.socket, config: dict, timeout: float, started: Future) -> None:
        """The server's owner thread: start it, wait for ``ready``, then dispatch replies."""
        try:
            started.set_result(self._launch(peer, config, timeout))
        except BaseException as exc:
            started.set_exception(exc)
            return
        self._dispatch()

    def _launch(self, peer: socket.socket, config: dict, timeout: float) -> dict[str, Any]:
        env = {"PATH": sandbox_path(), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        try:
            # 0600: the base directory is reachable from runs, the server's log is not for them.
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
            with os.fdopen(os.open(self._log_path, flags, 0o600), "ab") as log:
                self._proc = subprocess.Popen(
                    [sys.executable, "-I", ZYGOTE, str(peer.fileno())], env=env,
                    pass_fds=(peer.fileno(),), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    cwd="/")
        finally:
            peer.close()
        self._send(config)
        self._sock.settimeout(timeout)
        try:
            ready = self._recv()
        except (OSError, ValueError) as exc:
            raise ServerDied(f"the sandbox fork server did not start: {exc}") from None
        if ready is None:
            raise ServerDied("the sandbox fork server exited at start")
        self._sock.settimeout(None)
        return ready["caps"]

    # -- messages -------------------------------------------------------------------------------
    def _send(self, obj: dict, fds: list[int] = ()) -> None:
        data = json.dumps(obj).encode()
        with self._send_lock:
            if fds:
                socket.send_fds(self._sock, [data], list(fds))
            else:
                self._sock.send(data)

    def _recv(self) -> dict | None:
        data = self._sock.recv(1 << 20)
        return json.loads(data) if data else None

    def _dispatch(self) -> None:
        lost = ""
        try:
            while True:
                msg = self._recv()
                if msg is None:
                    break
                if msg.get("op") == "started":
                    with self._futures_lock:
                        on_start = self._on_start.pop(msg["id"], None)
                    if on_start is not None:
                        on_start(msg.get("accounts"))
                elif msg.get("op") == "done":
                    with self._futures_lock:
                        fut = self._futures.pop(msg["id"], None)
                        self._on_start.pop(msg["id"], None)
                    if fut is not None:
                        fut.set_result(msg)
        except OSError as exc:
            lost = f" (its socket failed: {exc})"
        if self._closing:
            # Let the server finish its own shutdown (its PID namespace emptied) before this
            # thread ends: ending earlier would SIGKILL it halfway (see the note in __init__).
            # :meth:`close` kills it if it takes too long.
            self._proc.wait()
            self._fail_all("the sandbox was closed")
        else:
            self._fail_all(f"the sandbox fork server {self._how_it_ended()}{lost}; {self.log_tail()}")

    def _how_it_ended(self) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"

    def _fail_all(self, reason: str) -> None:
        with self._futures_lock:
            self._dead = self._dead or reason
            pending, self._futures = self._futures, {}
            self._on_start = {}
        for fut in pending.values():
            fut.set_exception(ServerDied(reason))

    # -- public ---------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._dead is None and self._proc is not None and self._proc.poll() is None

    def submit(self, request: dict, fds: list[int],
               on_start: Callable[[dict | None], None] | None = None) -> Future:
        """Start a run; the future resolves to the server's ``done`` message. ``on_start`` is
        called (from the server's reader thread) once the run's processes exist, with where
        the kernel accounts their CPU time (``_cgroup.RunCgroup.accounts``), or never where
        the run ends before it starts."""
        fut: Future = Future()
        with self._futures_lock:
            if self._dead:
                raise ServerDied(self._dead)
            self._futures[request["id"]] = fut
            if on_start is not None:
                self._on_start[request["id"]] = on_start
        try:
            self._send({"op": "run", "report_start": on_start is not None, **request}, fds)
        except OSError as exc:
            with self._futures_lock:
                self._futures.pop(request["id"], None)
                self._on_start.pop(request["id"], None)
            # The server may be gone before its reader thread noticed: say how it ended.
            raise ServerDied(f"the sandbox fork server {self._how_it_ended()} (sending it the "
                             f"run failed: {exc}); {self.log_tail()}") from exc
        return fut

    def kill(self, run_id: int, reason: str) -> None:
        try:
            self._send({"op": "kill", "id": run_id, "reason": reason})
        except OSError:
            pass

    def log_tail(self) -> str:
        try:
            with open(self._log_path, "rb") as fh:
                tail = fh.read()[-2000:].decode("utf-8", "replace").strip()
        except OSError:
            return "no server log"
        return f"server log: {tail}" if tail else "server log empty"

    def close(self) -> None:
        """Stop the server; the kernel then kills every process left in its PID namespace."""
        self._closing = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        _cgroup.remove(self._cgroup_dirs)
        self._fail_all("the sandbox was closed")
