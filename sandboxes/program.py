"""What to run: source, language, stdin, extra files, arguments."""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Union

Data = Union[str, bytes]


def _as_bytes(value: Data, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{what} must be str or bytes, got {type(value).__name__}")


@dataclass(frozen=True)
class Program:
    """A program to run in the sandbox.

    Attributes:
        source: the program text (the main file of its language, e.g. ``main.py``).
        language: a name or alias from :data:`rewardkit.sandboxes.languages.LANGUAGES`.
        stdin: bytes fed to standard input (str is encoded as UTF-8).
        files: extra files written to the working directory first; keys are relative paths.
        args: command-line arguments after the program name.
        channel: give the program a private bidirectional byte stream to the host. The program
            sees its end as file descriptor 3 (in Python: ``socket.socket(fileno=3)``); the host
            gets the other end as ``handle.channel`` from :meth:`Sandbox.start`.
    """

    source: str
    language: str = "python"
    stdin: Data = b""
    files: dict = field(default_factory=dict)
    args: list = field(default_factory=list)
    channel: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.source, str):
            raise TypeError(f"Program.source must be str, got {type(self.source).__name__}")
        if not isinstance(self.language, str) or not self.language:
            raise TypeError("Program.language must be a non-empty str such as 'python'")
        _as_bytes(self.stdin, "Program.stdin")
        if not isinstance(self.files, dict):
            raise TypeError("Program.files must be a dict {relative path: str | bytes}")
        for name, content in self.files.items():
            norm = posixpath.normpath(name) if isinstance(name, str) else ""
            if not norm or norm.startswith(("/", "..")) or norm == ".":
                raise ValueError(
                    f"Program.files key {name!r} must be a relative path inside the working "
                    "directory (no leading '/', no '..')"
                )
            _as_bytes(content, f"Program.files[{name!r}]")
        if not all(isinstance(a, str) for a in self.args):
            raise TypeError("Program.args must be a list of str")

    @property
    def stdin_bytes(self) -> bytes:
        return _as_bytes(self.stdin, "Program.stdin")

    def file_items(self) -> list[tuple[str, bytes]]:
        """Files as (normalised relative path, bytes)."""
        return [(posixpath.normpath(k), _as_bytes(v, k)) for k, v in self.files.items()]
