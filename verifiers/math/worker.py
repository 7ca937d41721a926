"""A worker process for the sympy path: ``python -m rewardkit.verifiers.math.worker MEMORY_MB``.

It reads length-prefixed pickled tasks on stdin and writes results on its original stdout;
anything else a library prints goes to stderr so the channel stays clean. Its address space is
capped with ``RLIMIT_AS`` once the imports are done, and it exits when stdin closes, so it never
outlives its parent. The parent enforces the per-task deadline by killing it.
"""
from __future__ import annotations

import os
import pickle
import struct
import sys
from typing import Any, BinaryIO

HEADER = struct.Struct(">Q")


def write_frame(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _limit_memory(megabytes: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: the deadline still bounds the worker
        return
    limit = megabytes * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _warm_up() -> None:
    """Load latex2sympy's parser tables and the parts of sympy that load on first use (relations
    as sets, sets, matrices, equations, trigonometry) now, so that the first real task of a new
    worker is not charged for them: each is hundreds of milliseconds once, milliseconds after."""
    # imported by main() after fd 1 is moved: nothing an import prints reaches the channel
    from .config import MathOptions
    from .normal_form import read_answers, read_gold
    from .symbolic import compare_symbolic

    opts = MathOptions()
    for gold_text, pred in ((r"\frac{\sqrt{3}}{2}", r"x=\sin(\pi/3)"), (r"(1, 2]", r"\{1, 2\}"),
                            (r"\begin{pmatrix}1\\2\end{pmatrix}", r"x \geq 2"),
                            (r"x \neq 5", r"x \neq 6"), (r"f(2) < f(1)", r"f(1) > f(2)"),
                            (r"\sec x", r"\frac{1}{\cos x}"), (r"y = x^2", r"x^2 - y = 0")):
        gold = read_gold(gold_text, opts)
        compare_symbolic(gold, read_answers([pred], gold, opts)[0], opts)


def main() -> None:
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inbox = sys.stdin.buffer
    # after fd 1 is moved to stderr: nothing an import prints can reach the reply channel
    from .symbolic import compare_symbolic
    from .verdict import decide, verdict

    _warm_up()
    _limit_memory(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
    write_frame(channel, ("ready", os.getpid()))
    while True:
        header = _read_exact(inbox, HEADER.size)
        if header is None:
            return
        body = _read_exact(inbox, HEADER.unpack(header)[0])
        if body is None:
            return
        task_id, gold, answers, opts, prompt = pickle.loads(body)
        try:
            result = decide(gold, answers, opts, prompt, slow=compare_symbolic)
        except (MemoryError, RecursionError) as exc:
            result = verdict(False, None, None, gold.shown, "too_large",
                             detail=f"{type(exc).__name__} while judging")
        except Exception as exc:  # noqa: BLE001 - a sympy failure is a verdict, not a crash
            result = verdict(False, None, None, gold.shown, "unparsable",
                             detail=f"{type(exc).__name__}: {str(exc)[:200]}")
        write_frame(channel, ("result", task_id, result))


if __name__ == "__main__":
    main()
