"""Running untrusted programs (installed as ``rewardkit.sandboxes``).

``Sandbox().run(Program(source, language))`` → :class:`RunResult`. Runs are isolated with Linux
namespaces, a read-only file system, a per-run uid and rlimits where the platform allows;
:func:`capabilities_report` says exactly which protections are active. See docs/sandbox.md.
"""
from .capabilities import capabilities, capabilities_report
from .languages import LANGUAGES, Language, available_languages, get_language
from .limits import COMPILE_LIMITS, Limits
from .program import Program
from .result import STATUSES, RunResult
from .errors import SandboxError
from .run import RunHandle
from .sandbox import Sandbox

__all__ = ["Sandbox", "Program", "Limits", "RunResult", "RunHandle", "SandboxError",
           "capabilities", "capabilities_report", "Language", "LANGUAGES", "get_language",
           "available_languages", "STATUSES", "COMPILE_LIMITS"]
