"""Reward server, side by side in one run.

1. Overhead per request, ``exact_match``, one sample per request, one client after the other:
   p50/p99 latency of ``Scorer.score`` called in process vs. ``POST /v1/score`` to ``rewardkit
   serve`` (a separate process, keep-alive connection). Goal: ≤ 2 ms p50 added.
2. A learned reward model on CPU, or on a GPU with ``--device cuda`` (``--model DIR``, e.g. ``data/learned/base`` trained with
   ``data/learned/recipe.yaml``; without it a random sequence classifier of that shape: hidden
   128, 3 layers), scoring the 800 distinct samples of ``data/learned/rm_test.jsonl`` (prompt +
   chosen, prompt + rejected) in turn, every side with the same torch thread count
   (``--torch-threads``, default 1) and the tokenizer's own threads off
   (``TOKENIZERS_PARALLELISM=false``), so that no gain comes from thread contention:
   a. the ceiling: ``Scorer.score`` in process on batches of 1 vs of 64 — what batching can
      gain on this machine at most; then 64 concurrent clients each sending one sample per
      request (as OpenRLHF's rollout workers do): requests/s of ``rewardkit serve`` with
      batching off (``--max-batch-samples 1``) vs on (``--max-batch-samples 64``, and
      ``--max-wait-ms``, default 0), one batch in flight on both (``--concurrency 1``).
      Goal: ≥ 3×.
   b. the same against a server that scores each request as its own batch inside its handler,
      the way OpenRLHF's ``serve_rm`` does.
   c. large batches: ``Scorer.score`` in process vs one client sending requests of that many
      samples to the server. Goal: ≥ 0.95×.
   d. 2a's batching server with the model in a thread of the server (``--workers 0``) vs in a
      worker process (``--workers auto``, the default).
   e. (benchmarks/server_share.py) for each model size (the shipped RM's shape, hidden 512 x 4
      layers, and one with a 32k vocabulary), 2a's ceiling beside 2a's server gain, and the
      gain as a share of the ceiling, every pair, with the load average before and after it;
      the four sides stay up and run interleaved in short bursts (``--share-rounds`` rounds a
      pair, a burst a side each round, sized to ``--share-burst-seconds`` of the fastest side),
      so that the machine's drift falls on every side alike. Goal: >= 90% in every pair; and
      with ``--model`` (a trained RM of the shipped shape) a gain >= 3x.
   The servers run the model where ``--workers`` says (default ``auto``: a worker process;
   ``--off-workers`` for 2a's batching-off side alone); the CPU time per item counts the
   server and its worker processes.
   Both sides run the same Scorer on the same model and must return the same values.
3. ``--load-minutes M`` (benchmarks/server_load.py): 64 concurrent clients sending mixed math/code/RM requests for M
   minutes (a failed attempt is retried with the same request id); prints requests lost or
   answered twice, samples sent vs scored per reward, and the server's RSS over time.

4. ``--fairness-runs N`` (benchmarks/server_fairness.py): a newcomer's one-sample request
   while another client's two requests of slow ``math`` (or spinning ``code``) samples are
   queued, after large batches of fast samples; its latency against two slow samples plus a
   second, and the server's count of the samples each request's first sample waited behind
   (``rewardkit_samples_ahead``), which does not depend on the machine's load.

The pairs alternate order and every pair is printed.

    python benchmarks/bench_server.py [--pairs 3] [--requests 1000] [--rm-requests 512]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its siblings
from served_process import (DEVICE_VARIABLE, _cpu_s, _start, _stop,  # noqa: E402
                            gpu_memory_mib, rm_device)
from server_share import bench_share  # noqa: E402

SAMPLE = {"prompt": "What is the capital of France?", "completion": "Paris", "reference": "Paris"}


def rm_samples() -> list[dict[str, str]]:
    """Distinct samples for the reward model (identical ones would be scored once per batch,
    which flatters batching): each test pair's prompt + chosen and prompt + rejected."""
    out = []
    with open(ROOT / "data" / "learned" / "rm_test.jsonl") as f:
        for line in f:
            row = json.loads(line)
            out += [{"prompt": row["prompt"], "completion": row[side]}
                    for side in ("chosen", "rejected")]
    return out


def _percentiles(values: list[float]) -> tuple[float, float]:
    values = sorted(values)
    return (statistics.median(values) * 1e3,
            values[min(len(values) - 1, int(0.99 * len(values)))] * 1e3)


# -- 1. overhead -----------------------------------------------------------------------------------
def in_process_latencies(n: int) -> list[float]:
    import rewardkit

    scorer = rewardkit.load("exact_match")
    sample = rewardkit.Sample(**SAMPLE)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        scorer.score([sample])
        out.append(time.perf_counter() - t)
    return out


def server_latencies(url: str, n: int) -> list[float]:
    import httpx

    body = {"samples": [SAMPLE]}
    out = []
    with httpx.Client(base_url=url) as client:
        for _ in range(50):  # warm the connection and the server
            client.post("/v1/score", json=body)
        for _ in range(n):
            t = time.perf_counter()
            r = client.post("/v1/score", json=body)
            out.append(time.perf_counter() - t)
            assert r.status_code == 200 and r.json()["scores"][0]["value"] == 1.0
    return out


def bench_overhead(pairs: int, n: int) -> None:
    proc, url = _start([sys.executable, "-m", "rewardkit", "serve", "--reward", "exact_match",
                        "--port", "0"])
    print(f"\n1. overhead per request, exact_match, {n} sequential requests of one sample")
    print(f"{'pair':<6}{'in process p50/p99 (ms)':>26}{'server p50/p99 (ms)':>24}"
          f"{'added p50 (ms)':>16}")
    added = []
    try:
        for pair in range(pairs):
            runs = {}
            order = ("local", "server") if pair % 2 == 0 else ("server", "local")
            for side in order:
                runs[side] = (in_process_latencies(n) if side == "local"
                              else server_latencies(url, n))
            lp50, lp99 = _percentiles(runs["local"])
            sp50, sp99 = _percentiles(runs["server"])
            added.append(sp50 - lp50)
            print(f"{pair + 1:<6}{lp50:>14.3f} / {lp99:<9.3f}{sp50:>12.3f} / {sp99:<9.3f}"
                  f"{sp50 - lp50:>14.3f}   (order: {' then '.join(order)})")
    finally:
        _stop(proc)
    print(f"median added p50 over {pairs} pairs: {statistics.median(added):.3f} ms "
          f"(goal <= 2 ms)")


# -- 2. learned RM: dynamic batching vs batching off, and vs in process ---------------------------
def serve_peer(model: str) -> None:
    """One request, one batch, scored inside the request handler, as OpenRLHF's serve_rm does
    (its handler calls the model synchronously on the request's queries)."""
    import uvicorn

    import rewardkit

    scorer = rewardkit.load("reward_model", model=model, device=rm_device())
    app = FastAPI()

    @app.post("/v1/score")
    async def score(request: Request) -> JSONResponse:
        data = await request.json()
        scores = scorer.score(data["samples"])
        return JSONResponse({"scores": [s.to_dict() for s in scores]})

    uvicorn.run(app, host="127.0.0.1", port=0, log_level="info", access_log=False)


async def _throughput(url: str, clients: int, total: int, per_request: int = 1,
                      pid: int | None = None, done: list[float] | None = None
                      ) -> tuple[float, list[float], float | None, list[float]]:
    """Requests per second of ``clients`` concurrent clients sending ``total`` requests of
    ``per_request`` samples, the server's (``pid``) CPU seconds over them and every request's
    latency (aiohttp: a light client, so that the load generator takes as little of the shared
    CPU as it can; it drops idle connections after 2 s, before the server's 5 s keep-alive
    timeout closes them under its feet). ``done``, if given, receives each timed request's
    completion time, in order."""
    import aiohttp

    samples = rm_samples()
    values: list[float] = []
    latencies: list[float] = []
    counter = iter(range(clients))  # warm-up: one request per client

    async def client(http: aiohttp.ClientSession) -> None:
        for i in counter:
            body = json.dumps({"samples": [samples[(i * per_request + k) % len(samples)]
                                           for k in range(per_request)]})
            start = time.perf_counter()
            async with http.post(url + "/v1/score", data=body,
                                 headers={"content-type": "application/json"}) as r:
                assert r.status == 200, await r.text()
                values.extend(s["value"] for s in (await r.json())["scores"])
            latencies.append(time.perf_counter() - start)
            if done is not None:
                done.append(start + latencies[-1])

    timeout = aiohttp.ClientTimeout(total=1800)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients, keepalive_timeout=2),
                                     timeout=timeout) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
        values.clear()
        latencies.clear()
        if done is not None:
            done.clear()
        counter = iter(range(total))
        cpu = _cpu_s(pid) if pid else 0.0
        t = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        elapsed = time.perf_counter() - t
        cpu = _cpu_s(pid) - cpu if pid else None
    return total / elapsed, values, cpu, latencies


def _rm_cmd(model: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rewardkit", "serve", "--reward", "reward_model",
            "-O", f"model={model}", "-O", f"device={rm_device()}", "--port", "0", *extra]


def _paired(title: str, header: tuple[str, str], sides: dict[str, Any], pairs: int,
            goal: float | None, unit: str) -> list[float]:
    """Run the two sides ``pairs`` times, order alternating; print every pair and the ratio
    (second side over first). Each side also reports the CPU milliseconds it spent per
    request or sample (the server process, or the scoring process): on a machine shared with
    other jobs the rate depends on the CPU share each side was granted, the CPU time per item
    much less, so its ratio (first side's over second's) is printed beside, and after it what
    else each side measured (latency percentiles, GPU memory, tokens/s)."""
    first, second = list(sides)
    print(f"\n{title}")
    print(f"{'pair':<6}{header[0]:>30}{header[1]:>30}{'ratio':>9}   CPU ms per item (ratio)")
    ratios = []
    for pair in range(pairs):
        order = (first, second) if pair % 2 == 0 else (second, first)
        rates, values, cpu, notes = {}, {}, {}, {}
        for side in order:
            rates[side], values[side], cpu[side], notes[side] = sides[side]()
        assert max(abs(a - b) for a, b in zip(sorted(values[first]), sorted(values[second]))
                   ) < 1e-3, "the two sides scored differently"
        ratios.append(rates[second] / rates[first])
        cpus = (f"{cpu[first]:.2f} / {cpu[second]:.2f} ({cpu[first] / cpu[second]:.2f}x)"
                if cpu[first] and cpu[second] else "-")
        print(f"{pair + 1:<6}{rates[first]:>24.1f} {unit:<5}{rates[second]:>24.1f} {unit:<5}"
              f"{ratios[-1]:>8.2f}x   {cpus}   (order: {' then '.join(order)})")
        for side in (first, second):
            if notes[side]:
                print(f"      {header[list(sides).index(side)]}: {notes[side]}")
    print(f"median ratio over {pairs} pairs: {statistics.median(ratios):.2f}x"
          + (f" (goal >= {goal}x)" if goal is not None else ""))
    return ratios


def _served(cmd: list[str], env: dict[str, str], clients: int, total: int,
            per_request: int = 1):
    def run() -> tuple[float, list[float], float | None, str]:
        proc, url = _start(cmd, env)
        try:
            rate, values, cpu, latencies = asyncio.run(_throughput(url, clients, total,
                                                                   per_request, proc.pid))
            gpu = gpu_memory_mib(proc.pid)
        finally:
            _stop(proc)
        p50, p99 = _percentiles(latencies)
        note = f"latency p50 {p50:.1f} ms, p99 {p99:.1f} ms"
        if gpu is not None:
            note += f", GPU memory of the server process {gpu:.0f} MiB"
        return (rate * per_request, values, cpu * 1e3 / (total * per_request) if cpu else None,
                note)
    return run


def in_process_throughput(model: str, n: int, batch: int, threads: int) -> None:
    """Samples per second of ``Scorer.score`` on batches of ``batch`` (a child process with the
    same torch threads as the server); prints one JSON line."""
    import torch

    import rewardkit

    from transformers import AutoTokenizer

    torch.set_num_threads(threads)
    device = rm_device()
    scorer = rewardkit.load("reward_model", model=model, device=device)
    samples = rm_samples()
    scorer.score(samples[:batch])  # warm-up
    gpu = torch.cuda if device.startswith("cuda") else None
    if gpu is not None:
        gpu.synchronize()
        gpu.reset_peak_memory_stats()
    values: list[float] = []
    sent = [samples[(b * batch + k) % len(samples)]
            for b in range(n // batch) for k in range(batch)]
    t, cpu = time.perf_counter(), time.process_time()
    for b in range(n // batch):
        values.extend(s.value for s in scorer.score(sent[b * batch:(b + 1) * batch]))
    seconds = time.perf_counter() - t
    tok = AutoTokenizer.from_pretrained(model)
    tokens = sum(len(tok(s["prompt"] + s["completion"]).input_ids) for s in sent)
    note = f"{tokens / seconds:,.0f} real tokens/s"
    if gpu is not None:
        note += f", peak GPU memory allocated {gpu.max_memory_allocated() / 2**20:.0f} MiB"
    print(json.dumps({"rate": len(values) / seconds, "values": values, "note": note,
                      "cpu_ms": (time.process_time() - cpu) * 1e3 / len(values)}))


def _in_process(model: str, env: dict[str, str], n: int, batch: int, threads: int):
    def run() -> tuple[float, list[float], float, str]:
        out = subprocess.run([sys.executable, __file__, "--in-process", model, str(n), str(batch),
                              str(threads)], cwd=ROOT, env={**os.environ, **env},
                             capture_output=True, text=True, check=True)
        data = json.loads(out.stdout.strip().splitlines()[-1])
        return data["rate"], data["values"], data["cpu_ms"], data["note"]
    return run


RM_PARTS = ("ceiling", "clients", "peer", "large", "workers", "share")

def bench_rm(pairs: int, total: int, hidden: int, layers: int, threads: int,
             clients: int, big_batch: int, big_total: int, concurrency: int,
             model: str | None = None, max_wait_ms: float = 0,
             parts: tuple[str, ...] = RM_PARTS, workers: str = "auto",
             off_workers: str | None = None, share: tuple[int, float, bool] = (3, 1.5, True)
             ) -> None:
    from rewardkit.testing import make_tiny_reward_model

    given = model
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TOKENIZERS_PARALLELISM": "false"}
    off_workers = workers if off_workers is None else off_workers
    off_conc = ("--concurrency", str(concurrency), "--workers", off_workers)

    def batching(where: str) -> tuple[str, ...]:
        return ("--max-batch-samples", "64", "--max-wait-ms", f"{max_wait_ms:g}",
                "--concurrency", str(concurrency), "--workers", where)

    batched = batching(workers)
    where = {"0": "in a thread of the server", "auto": "in a worker process (--workers auto)"}
    on_where = where.get(workers, f"in {workers} worker processes")
    off_where = where.get(off_workers, f"in {off_workers} worker processes")
    with tempfile.TemporaryDirectory() as tmp:
        if model is None:
            model = str(make_tiny_reward_model(Path(tmp) / "rm", hidden_size=hidden,
                                               num_layers=layers))
            what = f"random Qwen2 classifier, hidden {hidden}, {layers} layers"
        else:
            what = f"reward model {model}"
        what += f", torch threads {threads} on every side"
        runs = {
            "ceiling": lambda: _paired(
                f"2a. ceiling ({what}): what batching can gain on this machine at most — "
                f"samples/s of Scorer.score in process on batches of 1 vs of 64, {total} samples",
                ("batches of 1", "batches of 64"),
                {"1": _in_process(model, env, total, 1, threads),
                 "64": _in_process(model, env, total, 64, threads)}, pairs, None, "smp/s"),
            "clients": lambda: _paired(
                f"2a. learned RM on {rm_device()} ({what}): {clients} concurrent clients, {total} requests "
                "of one sample; requests/s of `rewardkit serve` with batching off "
                f"(--max-batch-samples 1) vs on (64, --max-wait-ms {max_wait_ms:g}), "
                f"--concurrency {concurrency} on both; the model runs {off_where} (off) and "
                f"{on_where} (on)",
                ("batching off", "dynamic batching"),
                {"off": _served(_rm_cmd(model, "--max-batch-samples", "1", *off_conc), env, clients,
                                total),
                 "on": _served(_rm_cmd(model, *batched), env, clients, total)},
                pairs, 3.0, "req/s"),
            "peer": lambda: _paired(
                "2b. the same, peer: each request scored as its own batch in its handler (as "
                "OpenRLHF's serve_rm) vs `rewardkit serve`",
                ("one request one batch", "dynamic batching"),
                {"peer": _served([sys.executable, __file__, "--serve-peer", model], env, clients,
                                 total),
                 "on": _served(_rm_cmd(model, *batched), env, clients, total)},
                pairs, 3.0, "req/s"),
            "large": lambda: _paired(
                f"2c. large batches ({what}): samples/s of Scorer.score on batches of {big_batch} "
                f"in process vs one client sending requests of {big_batch} samples to "
                f"`rewardkit serve --concurrency 1 --max-batch-samples {big_batch}`",
                ("in process", "server"),
                {"in": _in_process(model, env, big_total, big_batch, threads),
                 "server": _served(_rm_cmd(model, "--concurrency", "1", "--max-batch-samples",
                                           str(big_batch), "--workers", workers), env, 1,
                                   big_total // big_batch,
                                   big_batch)},
                pairs, 0.95, "smp/s"),
            "share": lambda: bench_share(pairs, share[0], share[1], threads, clients,
                                         concurrency, max_wait_ms, workers, given, share[2]),
            "workers": lambda: _paired(
                f"2d. where the model runs ({what}): {clients} concurrent clients, {total} "
                "requests of one sample, dynamic batching as in 2a; requests/s with the model "
                "in a thread of the server (--workers 0) vs in a worker process (--workers auto)",
                ("in a thread", "in a process"),
                {"thread": _served(_rm_cmd(model, *batching("0")), env, clients, total),
                 "process": _served(_rm_cmd(model, *batching("auto")), env, clients, total)},
                pairs, None, "req/s"),
        }
        for part in parts:
            runs[part]()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000, help="overhead: requests per run")
    parser.add_argument("--rm-requests", type=int, default=512, help="RM: requests per run")
    parser.add_argument("--rm-clients", type=int, default=64, help="RM: concurrent clients")
    parser.add_argument("--big-batch", type=int, default=256, help="RM: large batch size")
    parser.add_argument("--big-samples", type=int, default=1024,
                        help="RM: samples per large-batch run")
    parser.add_argument("--hidden", type=int, default=128,
                        help="RM width (128 and 3 layers: the shape of data/learned/base)")
    parser.add_argument("--layers", type=int, default=3, help="RM depth")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch threads (OMP_NUM_THREADS) of every side")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="RM: batches in flight per server (both sides of 2a and 2b)")
    parser.add_argument("--workers", default="auto",
                        help="RM: `serve --workers` of every server side (auto, the default: "
                             "the model runs in one worker process; 0: in a thread of the "
                             "server; N: in N worker processes)")
    parser.add_argument("--off-workers",
                        help="RM: `serve --workers` of the batching-off side of 2a, if it "
                             "should differ from --workers")
    parser.add_argument("--device", default="cpu",
                        help="RM: where the reward model runs on every side (cpu, cuda; on "
                             "cuda the servers' GPU memory and the latency percentiles are "
                             "printed too)")
    parser.add_argument("--model", help="RM: a trained reward model folder (default: a random "
                                        "classifier of --hidden and --layers)")
    parser.add_argument("--max-wait-ms", type=float, default=0,
                        help="RM: --max-wait-ms of the batching server")
    parser.add_argument("--rm-parts", default=",".join(RM_PARTS),
                        help="RM: which comparisons to run, of " + ",".join(RM_PARTS))
    parser.add_argument("--share-rounds", type=int, default=3,
                        help="share (2e): rounds per pair; each round every side scores one "
                             "burst, the order rotating (default 3)")
    parser.add_argument("--share-unpinned", action="store_true",
                        help="share (2e): leave every process to the scheduler (by default, "
                             "with one torch thread, the model's processes share one CPU and "
                             "the servers and the load generator the others)")
    parser.add_argument("--share-burst-seconds", type=float, default=1.5,
                        help="share (2e): a burst is what the fastest side scores in about this "
                             "long (a multiple of 64 samples, at least 256; default 1.5)")
    parser.add_argument("--skip-rm", action="store_true")
    parser.add_argument("--load-minutes", type=float, default=0,
                        help="also run the mixed load (math/code/RM) for this many minutes")
    parser.add_argument("--load-clients", type=int, default=64)
    parser.add_argument("--rss-every", type=float, default=30.0,
                        help="load: seconds between RSS samples")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--fairness-runs", type=int, default=0,
                        help="also run the fairness check (math and code) this many times")
    parser.add_argument("--serve-peer", metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--in-process", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.share_rounds < 1 or args.share_burst_seconds <= 0:
        parser.error("--share-rounds must be at least 1 and --share-burst-seconds positive")
    os.environ.setdefault(DEVICE_VARIABLE, args.device)  # children inherit it
    if args.serve_peer:
        serve_peer(args.serve_peer)
        return
    if args.in_process:
        model, n, batch, threads = args.in_process
        in_process_throughput(model, int(n), int(batch), int(threads))
        return
    print(f"cpu cores: {os.cpu_count()}")
    if not args.skip_overhead:
        bench_overhead(args.pairs, args.requests)
    if not args.skip_rm:
        bench_rm(args.pairs, args.rm_requests, args.hidden, args.layers, args.torch_threads,
                 args.rm_clients, args.big_batch, args.big_samples, args.concurrency,
                 args.model, args.max_wait_ms, tuple(args.rm_parts.split(",")), args.workers,
                 args.off_workers,
                 (args.share_rounds, args.share_burst_seconds, not args.share_unpinned))
    if args.fairness_runs:
        from server_fairness import bench_fairness

        bench_fairness(args.fairness_runs)
    if args.load_minutes:
        from server_load import bench_load

        bench_load(args.load_minutes, args.load_clients, args.hidden, args.layers, args.model,
                   args.rss_every)


if __name__ == "__main__":
    main()
