"""Every stage of the math reward is bounded: extraction is linear (floods get a verdict), a
sample is bounded by its own compute (not by load or queueing), restarts use a spare worker,
trivial samples never wait for a slow one, and batches waiting for the pool get it in the order
they asked."""
from __future__ import annotations

import os
import signal
import threading
import time
from types import SimpleNamespace

import pytest

import rewardkit
from rewardkit import Sample

MB = 1_000_000
# Each of these took from 6 s to past 120 s with quadratic extraction; linear reading takes
# milliseconds. The bound below is generous for a loaded machine and far below quadratic time.
FLOODS = {
    "newlines": "\n" * MB,
    "newlines then box": "\n" * MB + r"\boxed{2}",
    "unclosed answer tags": "<answer>" * (MB // 8),
    "answer tags then one closed": "<answer>" * (MB // 8) + "2</answer>",
    "answer lines": "Answer\n" * (MB // 7),
    "spaces after a phrase": "the answer is" + " " * MB,
    "gsm8k markers": "####" * (MB // 4),
    "brace-less boxes": "\\boxed " * (MB // 7),
    "nested boxes": "\\boxed{" * (MB // 20) + "2" + "}" * (MB // 20),
    "dollars": "$" * MB,
    "think tags": "<think>" * (MB // 7),
    "code fences": "```" * (MB // 3),
}


@pytest.mark.parametrize("preset", ["default", "eval"])
def test_megabyte_floods_get_a_verdict_quickly(preset):
    with rewardkit.load("math", preset=preset, max_completion_chars=2 * MB) as verifier:
        start = time.monotonic()
        scores = verifier.score([Sample("q", text, "2") for text in FLOODS.values()])
        elapsed = time.monotonic() - start
    verdicts = dict(zip(FLOODS, scores))
    assert elapsed < 20, f"{len(FLOODS)} floods took {elapsed:.1f}s"
    assert verdicts["newlines then box"].value == 1.0
    assert verdicts["answer tags then one closed"].value == 1.0
    assert verdicts["brace-less boxes"].info["reason"] == "too_large"  # more than 64 boxes
    assert verdicts["nested boxes"].info["reason"] == "too_large"
    assert all(s.ok for s in scores)


def test_trivial_samples_do_not_wait_for_a_slow_one():
    """While one thread's sample keeps a worker busy, other threads' plain answers are judged in
    their own thread: they all finish before the slow verdict arrives."""
    slow = Sample("q", r"\boxed{\sec^2(x)+(x+y+z+w+2)^{40}}", r"\sec^2(x)+(x+y+z+1)^{40}")
    with rewardkit.load("math", workers=1, timeout=1.0) as verifier:
        verifier.score([Sample("q", r"\boxed{\sin x}", r"\sin x")])  # pool started
        done: dict = {}
        thread = threading.Thread(target=lambda: done.setdefault("slow", verifier.score([slow])))
        thread.start()
        while not verifier.pool._idle == [] and thread.is_alive():
            time.sleep(0.01)  # wait until the slow sample holds the only worker
        trivial = verifier.score([Sample("q", rf"\boxed{{{k}}}", str(k)) for k in range(200)])
        slow_finished_first = "slow" in done
        thread.join(timeout=60)
    assert [s.value for s in trivial] == [1.0] * 200
    assert not slow_finished_first
    assert done["slow"][0].info["reason"] == "timeout"


def test_a_sample_is_bounded_by_its_own_compute_not_by_wall_time():
    """A worker that gets no CPU for twice the timeout (as on an overloaded machine; here it is
    stopped) still gives its sample's real verdict: only the task's own CPU time counts."""
    sample = Sample("q", r"\boxed{\log_{2} 8}", "3")  # outside the fast reader: sympy
    with rewardkit.load("math", workers=1, timeout=0.5, final_form=False) as verifier:
        [alone] = verifier.score([sample])
        pid = verifier.pool._all[0].proc.pid
        os.kill(pid, signal.SIGSTOP)
        timer = threading.Timer(1.2, lambda: _cont(pid))
        timer.start()
        try:
            [loaded] = verifier.score([sample])
        finally:
            timer.cancel()
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:  # killed as timed out (what must not happen)
                pass
    assert alone.value == 1.0
    assert (loaded.value, loaded.info.get("reason")) == (alone.value, alone.info.get("reason"))


def _cont(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def test_a_timed_out_worker_is_replaced_by_a_started_spare():
    slow = Sample("q", r"\boxed{\sec^2(x)+(x+y+z+w+2)^{40}}", r"\sec^2(x)+(x+y+z+1)^{40}")
    with rewardkit.load("math", workers=1, timeout=0.5) as verifier:
        verifier.score([Sample("q", r"\boxed{\sin x}", r"\sin x")])
        time.sleep(0)  # the spare starts with the pool
        scores = verifier.score([slow, Sample("q", r"\boxed{\tan x}", r"\tan x"), slow])
        pool = verifier.pool
        assert [s.info.get("reason") for s in scores] == ["timeout", None, "timeout"]
        assert pool.replacements == 2 and pool.spares_used >= 1
        assert len(pool._spares) == 1  # topped up again


def test_batches_waiting_for_the_pool_get_workers_in_the_order_they_asked():
    """A server runs one batch per slot on one pool: when a worker frees up, the batch that
    has waited longest takes it, not whichever thread wakes first (a newcomer's one-sample
    batch must not lose that race to another client's later batches)."""
    from rewardkit.verifiers.math.pool import WorkerPool

    for _ in range(20):
        pool = WorkerPool(size=1, memory_limit_mb=512)
        pool._top_up_spares = lambda: None  # no processes: the held worker is the whole pool
        # a worker the test holds: alive (what the pool reads of its process), nothing to kill
        held = SimpleNamespace(proc=SimpleNamespace(poll=lambda: None), kill=lambda: None)
        pool._all.append(held)
        got: list[str] = []
        threads = []
        for name in ("first", "second", "third"):
            def ask(name=name):
                (w,) = pool._acquire(1)
                got.append(name)
                pool._release([w])
            threads.append(threading.Thread(target=ask))
            threads[-1].start()
            while len(pool._asking) < len(threads):  # queued in this order
                time.sleep(0.001)
        pool._release([held])
        for t in threads:
            t.join(10)
        assert got == ["first", "second", "third"]
