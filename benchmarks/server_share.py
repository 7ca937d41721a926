"""Part 2e of benchmarks/bench_server.py: the server's batching gain against the in-process
ceiling, for each model size, with the four sides interleaved.

The ceiling is what batching can gain on this machine at all: samples/s of ``Scorer.score`` in
process on batches of 64 over batches of 1 (one process, the same torch threads). The server's
gain is requests/s of 64 single-sample clients against ``rewardkit serve`` with batching on
(``--max-batch-samples 64``) over off (``--max-batch-samples 1``). Goal: the gain is >= 90% of
the ceiling, pair by pair; and a trained RM of the shipped shape (``--model``) gains >= 3x.

Why interleaved: on a shared (or merely busy) machine the CPU a run gets drifts over seconds, and
a side run whole in its turn (0.5-2.5 s for the small models) reads that drift as its own rate —
repeats of one side spread by ±25%, more than the 10% the goal leaves. So the four sides start
once and stay up (an in-process scoring child, and the two servers), and each pair is a number of
rounds in which every side scores one short burst, in an order that rotates every round; a side's
rate is its samples over the seconds of all its bursts in the pair, so a slow stretch of the
machine falls on every side alike. Every burst's rate is kept and its spread printed.

A server burst is read at its steady rate (the responses between the first and the last 64):
its first responses fill a batch from idle, its last ones drain the last batch — costs a burst
pays once and the in-process sides never; counted, they made bursts of four batches read the
batching server about 14% slower than its steady rate.

    python benchmarks/bench_server.py --skip-overhead --rm-parts share --pairs 5 \
        [--share-rounds 3] [--share-burst-seconds 1.5] [--model TRAINED_RM]
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
from served_process import _start, _stop, rm_device  # noqa: E402

SHARE_SHAPES = (("the shipped RM's shape (hidden 128, 3 layers)", 128, 3, None),
                ("hidden 512, 4 layers", 512, 4, None),
                ("hidden 128, 3 layers, 32k vocabulary", 128, 3, 32768))
"""The model sizes: (what, hidden, layers, vocabulary or None for the tokenizer's own)."""

def _random_rm(out: Path, hidden: int, layers: int, vocab: int | None) -> str:
    from rewardkit.testing import make_tiny_reward_model

    path = make_tiny_reward_model(out, hidden_size=hidden, num_layers=layers)
    if vocab is not None:  # the embedding (and its memory traffic) of a real vocabulary
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained(path)
        model.resize_token_embeddings(vocab)
        model.save_pretrained(path)
    return str(path)


def scoring_child(model: str, threads: int) -> None:
    """The in-process side, kept up between bursts: reads ``n batch`` lines on stdin, scores the
    first ``n`` benchmark samples in batches of ``batch`` and answers one JSON line with the
    seconds it took and the values."""
    import torch

    import rewardkit
    from bench_server import rm_samples

    torch.set_num_threads(threads)
    scorer = rewardkit.load("reward_model", model=model, device=rm_device())
    samples = rm_samples()
    for batch in (1, 64):  # warm both shapes before the first timed burst
        scorer.score(samples[:batch])
    print("ready", flush=True)
    for line in sys.stdin:
        n, batch = (int(x) for x in line.split())
        sent = [samples[i % len(samples)] for i in range(n)]
        values: list[float] = []
        t = time.perf_counter()
        for b in range(0, n, batch):
            values.extend(s.value for s in scorer.score(sent[b:b + batch]))
        print(json.dumps({"seconds": time.perf_counter() - t, "values": values}), flush=True)


class _Child:
    """A running :func:`scoring_child`."""

    def __init__(self, model: str, threads: int, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--child", model, str(threads)],
                                     cwd=ROOT, env={**os.environ, **env}, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        while (line := self.proc.stdout.readline()) and line.strip() != "ready":
            pass
        if not line:
            raise RuntimeError("the in-process scoring child exited before it was ready")

    def burst(self, n: int, batch: int) -> tuple[float, list[float]]:
        self.proc.stdin.write(f"{n} {batch}\n")
        self.proc.stdin.flush()
        data = json.loads(self.proc.stdout.readline())
        return data["seconds"], data["values"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def steady_rate(done: list[float], edge: int) -> float:
    """Completions per second between the ``edge``-th completion and the ``edge``-th from the
    end (``done``: completion times, in order)."""
    steady = done[edge - 1:len(done) - edge]
    if len(steady) < 2 or steady[-1] <= steady[0]:
        raise ValueError(f"a burst of {len(done)} completions has no steady part past "
                         f"{edge} at each end; send more samples")
    return (len(steady) - 1) / (steady[-1] - steady[0])


def _server_burst(url: str, clients: int, n: int) -> tuple[float, list[float]]:
    """``clients`` concurrent clients send the first ``n`` benchmark samples, one a request
    (after an untimed request per client: bench_server's load generator). Returns the seconds
    ``n`` samples take at the burst's steady rate (:func:`steady_rate` past ``clients``
    responses at each end: the first ones fill a batch from idle, the last ones drain it,
    which the server pays once a burst and the in-process sides never) and the values."""
    from bench_server import _throughput

    done: list[float] = []
    _, values, _, _ = asyncio.run(_throughput(url, clients, n, 1, None, done))
    return n / steady_rate(done, clients), values


def model_core() -> tuple[int, list[int]] | None:
    """``(core, others)``: the CPU the model's processes get to themselves and the ones left
    to the servers' event loops and the load generator; None on a host with one CPU (or
    without CPU affinity)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return None
    return (cpus[-1], cpus[:-1]) if len(cpus) >= 2 else None


def pin(child_pid: int, server_pids: list[int], cores: tuple[int, list[int]]) -> None:
    """The in-process child and each server's worker processes (the fork server's children)
    on the model's core; each server, its helper processes and this load generator on the
    others. So the model has one core on every side, as in process, and the HTTP work of a
    side never takes its time."""
    import psutil

    core, others = cores
    psutil.Process(child_pid).cpu_affinity([core])
    psutil.Process().cpu_affinity(others)
    for pid in server_pids:
        server = psutil.Process(pid)
        server.cpu_affinity(others)
        for helper in server.children():
            helper.cpu_affinity(others)
            for worker in helper.children(recursive=True):
                worker.cpu_affinity([core])


def _check_same(values: dict[str, list[float]]) -> None:
    for a, b in (("in1", "in64"), ("off", "on"), ("in1", "on")):
        assert max(abs(x - y) for x, y in zip(sorted(values[a]), sorted(values[b]))) < 1e-3, \
            f"the sides {a} and {b} scored differently"


def measure_pair(bursts: dict[str, Callable[[], tuple[float, list[float]]]], rounds: int,
                 burst: int, first_round: int = 0) -> tuple[dict[str, float], dict[str, list[float]]]:
    """One pair: ``rounds`` rounds in which each side runs one burst of ``burst`` samples, the
    order rotated by one every round. Returns each side's rate (its samples over the seconds of
    all its bursts) and every burst's rate."""
    seconds = dict.fromkeys(bursts, 0.0)
    each: dict[str, list[float]] = {side: [] for side in bursts}
    names = list(bursts)
    for r in range(first_round, first_round + rounds):
        k = r % len(names)
        for side in names[k:] + names[:k]:
            took, values = bursts[side]()
            if len(values) != burst:
                raise RuntimeError(f"{side}: {len(values)} values for {burst} samples")
            seconds[side] += took
            each[side].append(burst / took)
    rates = {side: rounds * burst / seconds[side] for side in bursts}
    return rates, each


MIN_BURST = 256
"""The fewest samples in a burst (four batches of 64)."""


def burst_size(rates: dict[str, float], seconds: float) -> int:
    """Samples in a burst: what the fastest side scores in about ``seconds``, rounded up to a
    multiple of 64 and at least :data:`MIN_BURST` (so that a server burst's steady part, past
    its first and last 64 responses, is at least half of it)."""
    fastest = max(rates.values())
    return max(MIN_BURST, 64 * math.ceil(fastest * seconds / 64))


def bench_share(pairs: int, rounds: int, burst_seconds: float, threads: int, clients: int,
                concurrency: int, max_wait_ms: float, workers: str, model: str | None,
                pin_cores: bool = True) -> None:
    """For each model size, every pair: the ceiling, the server's gain and the gain as a share
    of the ceiling, with the load average before and after the pair and each side's burst
    spread; then the median and range over the pairs. A first round of :data:`MIN_BURST`
    samples a side warms every side up (untimed) and sizes the bursts (:func:`burst_size`).
    With ``pin_cores``, one torch thread and the model in worker processes, the processes are
    pinned (:func:`pin`)."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TOKENIZERS_PARALLELISM": "false"}
    conc = ("--concurrency", str(concurrency), "--workers", workers)
    cores = model_core() if pin_cores and threads == 1 and workers != "0" else None
    where = ("unpinned" if cores is None else
             f"the model's processes pinned to CPU {cores[0]}, the servers and the load "
             f"generator to CPU {','.join(map(str, cores[1]))}")
    print(f"\n2e. batching gain against its ceiling, interleaved: {pairs} pairs of {rounds} "
          f"rounds, each side a burst a round (order rotating; a burst is what the fastest side "
          f"scores in about {burst_seconds:g} s), torch threads "
          f"{threads}, {clients} clients of one sample, --concurrency {concurrency}, --workers "
          f"{workers}, --max-wait-ms {max_wait_ms:g}; {where}")
    print(f"{'pair':<6}{'ceiling: in process 1 / 64 (smp/s)':>40}{'server off / on (req/s)':>30}"
          f"{'share':>8}   load average (1 min) before / after the pair")
    mine = os.sched_getaffinity(0) if cores is not None else None
    try:
        _share_sizes(pairs, rounds, burst_seconds, threads, clients, env, conc, max_wait_ms,
                     model, cores)
    finally:
        if mine is not None:
            os.sched_setaffinity(0, mine)


def _share_sizes(pairs: int, rounds: int, burst_seconds: float, threads: int, clients: int,
                 env: dict[str, str], conc: tuple[str, ...], max_wait_ms: float,
                 model: str | None, cores: tuple[int, list[int]] | None) -> None:
    from bench_server import _rm_cmd

    with tempfile.TemporaryDirectory() as tmp:
        for what, hidden, layers, vocab in SHARE_SHAPES:
            trained = model is not None and vocab is None and (hidden, layers) == (128, 3)
            if trained:
                path, what = model, f"reward model {model}"
            else:
                path = _random_rm(Path(tmp) / f"rm{hidden}x{layers}v{vocab}", hidden, layers,
                                  vocab)
            child = _Child(path, threads, env)
            servers = {}
            try:
                servers["off"] = _start(_rm_cmd(path, "--max-batch-samples", "1", *conc), env)
                servers["on"] = _start(_rm_cmd(path, "--max-batch-samples", "64",
                                               "--max-wait-ms", f"{max_wait_ms:g}", *conc), env)
                if cores is not None:  # the workers start with the servers (--workers auto)
                    pin(child.proc.pid, [proc.pid for proc, _ in servers.values()], cores)
                _share_pairs(what, child, servers, pairs, rounds, burst_seconds, clients,
                             trained)
            finally:
                child.close()
                for proc, _ in servers.values():
                    _stop(proc)


def _share_pairs(what: str, child: _Child, servers: dict, pairs: int, rounds: int,
                 burst_seconds: float, clients: int, trained: bool) -> None:
    values: dict[str, list[float]] = {}
    burst = MIN_BURST

    def keep(side: str, result: tuple[float, list[float]]) -> tuple[float, list[float]]:
        values[side] = result[1]
        return result

    bursts = {"in1": lambda: keep("in1", child.burst(burst, 1)),
              "in64": lambda: keep("in64", child.burst(burst, 64)),
              "off": lambda: keep("off", _server_burst(servers["off"][1], clients, burst)),
              "on": lambda: keep("on", _server_burst(servers["on"][1], clients, burst))}
    warm, _ = measure_pair(bursts, 1, burst)
    burst = burst_size(warm, burst_seconds)
    print(f"{what}: bursts of {burst} samples (warm-up round, smp/s: "
          + ", ".join(f"{side} {rate:.0f}" for side, rate in warm.items()) + ")")
    shares, ceilings, gains = [], [], []
    for pair in range(pairs):
        load_before = os.getloadavg()[0]
        rates, each = measure_pair(bursts, rounds, burst, first_round=pair * rounds)
        _check_same(values)
        ceilings.append(rates["in64"] / rates["in1"])
        gains.append(rates["on"] / rates["off"])
        shares.append(gains[-1] / ceilings[-1])
        print(f"{pair + 1:<6}{rates['in1']:>15.1f} / {rates['in64']:<9.1f}"
              f"({ceilings[-1]:.2f}x){rates['off']:>14.1f} / {rates['on']:<8.1f}"
              f"({gains[-1]:.2f}x){shares[-1]:>7.0%}   load {load_before:.1f} / "
              f"{os.getloadavg()[0]:.1f}")
        print("      bursts (min-max): " + "; ".join(
            f"{side} {min(r):.0f}-{max(r):.0f}" for side, r in each.items()))
    print(f"median over {pairs} pairs (min-max): ceiling "
          f"{statistics.median(ceilings):.2f}x ({min(ceilings):.2f}-{max(ceilings):.2f}), "
          f"server {statistics.median(gains):.2f}x ({min(gains):.2f}-{max(gains):.2f}), "
          f"share {statistics.median(shares):.0%} ({min(shares):.0%}-{max(shares):.0%}); "
          f"pairs >= 90%: {sum(s >= 0.9 for s in shares)} of {pairs}; goal >= 90%"
          + (f", and the server >= 3x (pairs >= 3x: {sum(g >= 3 for g in gains)} of {pairs})"
             if trained else ""))


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    scoring_child(sys.argv[2], int(sys.argv[3]))
