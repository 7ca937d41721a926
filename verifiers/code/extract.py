"""Find the program in a completion: the last fenced code block, else the whole text.

A generation cut off by the length limit often ends inside an open fence; its body is still the
program the model meant, so an unclosed last fence counts as a block.

Models often follow their program with a block showing what it prints (an untagged block after
"Output:", or one tagged ``text``/``output``/``console``). Such a block is not the program, so a
block whose fence names a known language outranks later blocks that name none or an unknown one:
the program is the last block tagged with a language, else the last untagged block, else the
last block.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Fence info strings people and models write, mapped to the sandbox's language names.
LANGUAGE_ALIASES: dict[str, str] = {
    "python": "python", "py": "python", "python3": "python", "py3": "python",
    "c": "c", "h": "c",
    "cpp": "cpp", "c++": "cpp", "cc": "cpp", "cxx": "cpp", "hpp": "cpp",
    "javascript": "javascript", "js": "javascript", "node": "javascript", "nodejs": "javascript",
    "bash": "bash", "sh": "bash", "shell": "bash", "zsh": "bash",
}

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^\n`]*$")


@dataclass(frozen=True)
class ExtractedCode:
    """The program and where it came from.

    Attributes:
        code: the program text.
        language: the fence's language mapped to a sandbox language name, or None when the fence
            names none (or one not in :data:`LANGUAGE_ALIASES`).
        fence_tag: the fence's info word as written ("" when none or no fence).
        fenced: whether the code came from a fenced block (False: the whole completion).
    """

    code: str
    language: str | None
    fence_tag: str
    fenced: bool


def normalise_language(name: str | None) -> str | None:
    """The sandbox name of a language alias (``"py"`` -> ``"python"``), or None if unknown."""
    if not name:
        return None
    return LANGUAGE_ALIASES.get(name.strip().lower())


def extract_code(text: str) -> ExtractedCode:
    """The last fenced block of ``text`` that holds the program (see the module docs; an unclosed
    final fence counts), else all of it."""
    blocks: list[tuple[str, list[str]]] = []
    open_marker: str | None = None
    current: list[str] = []
    tag = ""
    for line in text.splitlines():
        match = _FENCE.match(line)
        if open_marker is None:
            if match:
                open_marker, tag, current = match.group(1), match.group(2), []
            continue
        if match and not match.group(2) and match.group(1)[0] == open_marker[0] \
                and len(match.group(1)) >= len(open_marker):
            blocks.append((tag, current))
            open_marker = None
            continue
        current.append(line)
    if open_marker is not None and current:
        blocks.append((tag, current))
    if not blocks:
        return ExtractedCode(text, None, "", False)
    tag, lines = next((b for b in reversed(blocks) if normalise_language(b[0])),
                      next((b for b in reversed(blocks) if not b[0]), blocks[-1]))
    return ExtractedCode("\n".join(lines) + "\n", normalise_language(tag), tag, True)
