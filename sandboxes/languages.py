"""The languages the sandbox can run, one declarative entry each.

Adding a language is adding a :class:`Language` to :data:`LANGUAGES`. Placeholders in ``run``
and ``compile``: ``{source}`` (the source file name), ``{binary}`` (the compiled program),
``{memory_mb}`` (the run's memory limit).
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    """How to build and run one language.

    Attributes:
        name: canonical name (``Program.language`` may also use any of ``aliases``).
        source_file: the file the source is written to in the working directory.
        run: argv of the run step; argv[0] is looked up on PATH when the sandbox starts.
        compile: argv of the compile step, or None for interpreted languages.
        aliases: other names accepted for the language (e.g. fence tags such as ``py``).
        in_process: run Python source inside a fresh fork of the pre-started interpreter rather
            than exec'ing a new interpreter (saves ~50 ms per run; see docs/sandbox.md).
        limit_address_space: apply ``RLIMIT_AS``. Off for runtimes that reserve far more virtual
            memory than they use (V8); those get their own heap flag in ``run`` instead.
    """

    name: str
    source_file: str
    run: tuple
    compile: tuple | None = None
    aliases: tuple = ()
    in_process: bool = False
    limit_address_space: bool = True

    @property
    def tools(self) -> tuple:
        """Executables this language needs, looked up on PATH."""
        needed = [self.compile[0]] if self.compile else []
        if not self.run[0].startswith("./"):  # not the compiled program itself
            needed.append(self.run[0])
        return tuple(needed)


LANGUAGES: tuple[Language, ...] = (
    Language("python", "main.py", (sys.executable, "-I", "{source}"),
             aliases=("py", "python3", "py3"), in_process=True),
    Language("c", "main.c", ("./{binary}",),
             compile=("gcc", "-O2", "-std=gnu17", "-pipe", "-o", "{binary}", "{source}", "-lm"),
             aliases=("gcc",)),
    Language("cpp", "main.cpp", ("./{binary}",),
             compile=("g++", "-O2", "-std=gnu++17", "-pipe", "-o", "{binary}", "{source}"),
             aliases=("c++", "cxx", "cc", "g++")),
    Language("javascript", "main.js", ("node", "--max-old-space-size={memory_mb}", "{source}"),
             aliases=("js", "node", "nodejs"), limit_address_space=False),
    Language("bash", "main.sh", ("bash", "{source}"), aliases=("sh", "shell")),
)

BINARY = "main"


def get_language(name: str) -> Language:
    """The language called ``name`` (or one of its aliases), case-insensitive."""
    key = name.strip().lower()
    for lang in LANGUAGES:
        if key == lang.name or key in lang.aliases:
            return lang
    known = ", ".join(lang.name for lang in LANGUAGES)
    raise ValueError(f"unknown language {name!r}; known: {known} (or their aliases)")


def resolve_tool(tool: str) -> str | None:
    """Absolute path of an executable, or None where it is not installed."""
    if os.path.isabs(tool):
        return tool if os.access(tool, os.X_OK) else None
    return shutil.which(tool, path=sandbox_path())


def sandbox_path() -> str:
    """PATH inside the sandbox: this interpreter's bin dir first, then the system dirs."""
    dirs = [os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]
    return ":".join(dict.fromkeys(dirs))


def available_languages() -> dict[str, bool]:
    """Which languages have their tools installed on this machine."""
    return {lang.name: all(resolve_tool(t) for t in lang.tools) for lang in LANGUAGES}
