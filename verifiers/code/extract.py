"""Find the program in a completion: the last fenced code block, else the whole text.

A generation cut off by the length limit often ends inside an open fence; its body is still the
program the model meant, so an unclosed last fence counts as a block.

Models often follow their program with a block showing what it prints (an untagged block after
"Output:", or one tagged ``text``/``output``/``console``). Such a block is not the program, so a
block whose fence names a known language outranks later blocks that name none or an unknown one:
the program is the last block tagged with a language, else the last untagged block, else the
last block.

Models also follow their program with an "Example usage" or "Tests" block in the same language
(``print(add(1, 2))``). When the tests need a name (the entry point, a call-style ``fn_name``, the
names an assert file reads), the program is the last block that defines one of them; when they
feed standard input, it is the last block that reads standard input. Only when no block
qualifies does the rule above choose. Which block ran, and why, is reported.
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
#: What reads standard input, in the languages the sandbox runs.
_READS_STDIN = re.compile(r"\binput\s*\(|\bstdin\b|\bopen\s*\(\s*0\b|\bscanf\s*\(|\bcin\b|"
                          r"\bgetchar\s*\(|\bfgets\s*\(|\bgetline\s*\(|\breadline\b|"
                          r"^\s*read\s", re.M)


@dataclass(frozen=True)
class ExtractedCode:
    """The program and where it came from.

    Attributes:
        code: the program text.
        language: the fence's language mapped to a sandbox language name, or None when the fence
            names none (or one not in :data:`LANGUAGE_ALIASES`).
        fence_tag: the fence's info word as written ("" when none or no fence).
        fenced: whether the code came from a fenced block (False: the whole completion).
        block: the chosen block's position among the completion's fenced blocks (from 0), or
            None when the code is the whole completion.
        blocks: how many fenced blocks the completion has.
        rule: why this block: ``"defines <name>"``, ``"reads standard input"`` or ``"last
            block"`` (the language rule of the module docs).
    """

    code: str
    language: str | None
    fence_tag: str
    fenced: bool
    block: int | None = None
    blocks: int = 0
    rule: str = "last block"


def normalise_language(name: str | None) -> str | None:
    """The sandbox name of a language alias (``"py"`` -> ``"python"``), or None if unknown."""
    if not name:
        return None
    return LANGUAGE_ALIASES.get(name.strip().lower())


def defines(code: str, name: str) -> bool:
    """Whether ``code`` defines ``name`` as a function (at any indentation: a method of a
    LeetCode ``class Solution`` counts). A regular expression, not a parse: a completion cut
    off mid-way still shows what it defines."""
    return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def _defined(code: str, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` that ``code`` defines as a function or a class, or None."""
    for name in names:
        if defines(code, name) or re.search(rf"^\s*class\s+{re.escape(name)}\b", code, re.M):
            return name
    return None


def extract_code(text: str, needs: tuple[str, ...] = (), reads_stdin: bool = False
                 ) -> ExtractedCode:
    """The fenced block of ``text`` that holds the program (see the module docs; an unclosed
    final fence counts), else all of it. ``needs``: names the tests take from the program;
    ``reads_stdin``: the tests feed standard input."""
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
    codes = ["\n".join(lines) + "\n" for _, lines in blocks]
    chosen, rule = None, "last block"
    for i in reversed(range(len(blocks))):
        name = _defined(codes[i], needs) if needs else None
        if name is not None:
            chosen, rule = i, f"defines {name}"
            break
        if reads_stdin and _READS_STDIN.search(codes[i]):
            chosen, rule = i, "reads standard input"
            break
    if chosen is None:
        tagged = [i for i, (t, _) in enumerate(blocks) if normalise_language(t)]
        untagged = [i for i, (t, _) in enumerate(blocks) if not t]
        chosen = (tagged or untagged or [len(blocks) - 1])[-1]
    tag = blocks[chosen][0]
    return ExtractedCode(codes[chosen], normalise_language(tag), tag, True, chosen, len(blocks),
                         rule)
