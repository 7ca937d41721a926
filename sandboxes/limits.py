"""Resource limits of one sandboxed run."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any


#: How far a run's wall limit may stretch while it waits for a CPU (times ``wall_s``): on a
#: host where other work takes 9 cores' time in 10, an honest run still finishes.
WALL_STRETCH = 10.0


@dataclass(frozen=True)
class Limits:
    """What one run may use. Every limit applies to the whole run (the program and every process
    it starts), except ``max_file_mb`` which bounds each file it writes.

    Attributes:
        cpu_s: CPU seconds (user + system). Past it the program gets SIGXCPU, one second later
            SIGKILL; the status is ``timeout``.
        wall_s: wall-clock seconds from start to exit, not counting the time the run waited
            for a CPU that other processes held (the kernel's run-queue delay of its processes),
            up to :attr:`wall_backstop_s` in all; past it every process of the run is killed and
            the status is ``timeout``. It stops a program that sleeps or blocks: time verdicts
            on a loaded host come from ``cpu_s``, the run's own CPU time, so an honest program
            is never judged by its neighbours' load.
        memory_mb: address space of each process (``RLIMIT_AS``) and, where memory cgroups are
            available, resident memory of the whole run. Allocation past it fails (``MemoryError``
            in Python); the status is ``memory_limit``.
        max_processes: processes and threads of the run together (``RLIMIT_NPROC``, counted per
            sandbox uid, which each concurrent run has to itself).
        max_file_mb: size of any one file the run writes (``RLIMIT_FSIZE``); also bounds the
            private working directory's size (a few times this value).
        max_open_files: open file descriptors per process (``RLIMIT_NOFILE``).
        max_output_bytes: bytes kept of stdout and of stderr each; a run that writes more is
            killed, its output truncated and flagged, and its status is ``output_limit``.
        max_cpus: cores the run's processes may use at once, together (cgroup ``cpu.max``), so
            a run that forks spinners cannot starve the runs beside it.

    ``cpu_s`` counts the CPU time of every process of the run together, however started (a
    process in its own session included), where the CPU cgroup is available; ``memory_mb``
    and ``max_processes`` bound the whole run where the memory and pids cgroups are. Where the
    host cannot enforce a limit the run is refused (see ``Sandbox(allow_unenforced=...)``).
    """

    cpu_s: float = 10.0
    wall_s: float = 10.0
    memory_mb: int = 1024
    max_processes: int = 64
    max_file_mb: int = 64
    max_open_files: int = 256
    max_output_bytes: int = 1 << 20
    max_cpus: float = 1.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(
                    f"Limits.{f.name} must be a positive number, got {value!r}; "
                    f"e.g. Limits({f.name}={f.default!r})"
                )
        if self.max_open_files < 16:
            raise ValueError(
                f"Limits.max_open_files={self.max_open_files} is too small for any interpreter "
                "to start; use at least 16"
            )

    @property
    def wall_backstop_s(self) -> float:
        """The most wall-clock time a run may take however long it waited for a CPU:
        ``WALL_STRETCH`` times ``wall_s``."""
        return self.wall_s * WALL_STRETCH

    def replace(self, **changes: Any) -> "Limits":
        """A copy with some limits changed (validated like the constructor)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Limits of a compile step (gcc/g++ need more memory and time than a typical test run).
COMPILE_LIMITS = Limits(cpu_s=30.0, wall_s=30.0, memory_mb=2048, max_processes=32,
                        max_file_mb=256, max_open_files=256, max_output_bytes=64 << 10)
