"""Bounded time and memory from any thread, and results independent of parallelism."""
from __future__ import annotations

import threading
import time

import rewardkit
from rewardkit import Sample

# Passes the size guards and is outside the fast reader (\sec); sympy expands it for ~1 min.
SLOW_GOLD = r"\sec^2(x)+(x+y+z+1)^{40}"
SLOW_PRED = r"\boxed{\sec^2(x)+(x+y+z+w+2)^{40}}"


def test_timeout_holds_in_a_worker_thread_and_the_batch_goes_on():
    verifier = rewardkit.load("math", workers=1, timeout=0.5)
    result: dict = {}

    def run() -> None:
        result["scores"] = verifier.score([
            Sample("q", SLOW_PRED, SLOW_GOLD),
            Sample("q", r"\boxed{\sin(x)}", r"\sin x"),
        ])

    thread = threading.Thread(target=run)
    start = time.monotonic()
    thread.start()
    thread.join(timeout=30)
    try:
        assert not thread.is_alive(), "scoring hung"
        slow, fine = result["scores"]
        assert (slow.value, slow.info["reason"]) == (0.0, "timeout")
        assert fine.value == 1.0  # the replacement worker judged the rest of the batch
        assert time.monotonic() - start < 30
    finally:
        verifier.close()


def test_pathological_inputs_are_too_large_without_reaching_sympy():
    nested_frac = "1"
    for _ in range(500):
        nested_frac = r"\frac{" + nested_frac + "}{2}"
    inputs = [r"9^{9^{9^9}}", "100000!", "(" * 3000 + "1" + ")" * 3000, nested_frac, "1" * 200_000,
              r"(10^{8})!"]
    verifier = rewardkit.load("math")
    start = time.monotonic()
    scores = verifier.score([Sample("q", r"\boxed{" + x + "}", "1") for x in inputs])
    assert [s.info["reason"] for s in scores] == ["too_large"] * len(inputs)
    assert verifier._pool is None  # decided by the guards, no worker was started
    assert time.monotonic() - start < 10


def test_long_completion_is_read_linearly_and_huge_one_is_refused():
    verifier = rewardkit.load("math", max_completion_chars=100_000)
    ok, huge = verifier.score([Sample("q", "x" * 90_000 + r"\boxed{2}", "2"),
                               Sample("q", "x" * 200_000 + r"\boxed{2}", "2")])
    assert ok.value == 1.0
    assert huge.info["reason"] == "too_large"


BATCH = [
    (r"\boxed{\frac{\sqrt{2}}{2}}", r"\sin(\pi/4)"), (r"\boxed{x \geq 2}", r"[2, \infty)"),
    (r"\boxed{42}", "42"), (r"\boxed{\{1, 2\}}", "2, 1"), (r"\boxed{\tan x}", r"\sin x"),
    (r"\boxed{(1,2]}", "(1,2)"), (r"\boxed{10!}", "3628800"), (r"\boxed{3} \boxed{4}", "3"),
    (r"\boxed{\begin{pmatrix}1\\2\end{pmatrix}}", r"\begin{pmatrix}1\\2\end{pmatrix}"),
    (r"\boxed{\log_2 8}", "3"), (r"\boxed{y=2x+1}", "2x - y = -1"), ("nothing", "1"),
] * 3


def test_scores_are_identical_whatever_the_parallelism():
    samples = [Sample("q", c, g) for c, g in BATCH]
    with rewardkit.load("math", workers=1) as serial, rewardkit.load("math", workers=2) as par:
        a = [s.to_dict() for s in serial.score(samples)]
        b = [s.to_dict() for s in par.score(samples)]
        c = [s.to_dict() for s in par.score(samples[::-1])][::-1]
    assert a == b == c


def test_concurrent_calls_from_threads_get_their_own_results():
    verifier = rewardkit.load("math", workers=2, final_form=False)
    golds = [str(k) for k in range(8)]
    results: dict[int, list] = {}

    def run(k: int) -> None:
        samples = [Sample("q", rf"\boxed{{\sqrt{{{j}^2}} + \sin(0)}}", golds[k]) for j in range(6)]
        results[k] = [s.value for s in verifier.score(samples)]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    verifier.close()
    assert {k: v for k, v in results.items()} == {
        k: [1.0 if j == k else 0.0 for j in range(6)] for k in range(4)}
