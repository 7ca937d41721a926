"""Reward over-optimisation on the arithmetic task: one learned proxy against reward ensembles.

    python examples/overoptimisation.py                 # every arm, 3 seeds
    python examples/overoptimisation.py --seeds 0 --runs single,par   # a quick look

The gold reward is the ``math`` verifier (is the sum right?). The proxy is a reward model trained
by ``train rm`` on a small preference set built the way preference data is usually collected:
the policy's right answer against one of its own wrong answers, which are mostly carry slips
(+10). So the proxy learns "not a carry slip" better than "the right sum", and has errors a
policy can find. GRPO then runs, with the same seed, steps, learning rate and KL coefficient,
against

  (a) ``single``  the one proxy reward model,
  (b) ``mean``    an ensemble of K reward models (``train rm --ensemble K``: seeds + bootstrap),
  (c) ``uwo``     the same ensemble, mean − λ·variance (or ``mean_minus_std`` with --penalty),
  (d) ``min``     the same ensemble, worst case,
  (e) ``kl_strong``  the single proxy with ``--kl-strong`` × the KL coefficient,
  (f) ``par``     the single proxy shaped by PAR (Fu et al. 2025): σ(r − r_ref), r_ref the
                  proxy's reward of a reference completion of the same prompt (what the
                  warm-start policy writes), bounded and centred per prompt,
  (g) ``early_stop``  the single proxy with the trainer's over-optimisation monitor
                  (``stop_on_overoptimisation``: stop once the held-out gold fell while the proxy
                  rose ``--patience`` evaluations in a row; it reads the gold reward),
  (h) ``refresh`` the proxy fine-tuned every ``--refresh-every`` steps on the policy's own
                  samples, paired right over wrong by the gold verifier (``reward_refresh_every``),
  (i) ``disagreement_stop``  the single proxy stopped once its reward and the ensemble's
                  disagreement on the held-out samples rose ``--disagreement-patience``
                  evaluations in a row (``stop_on_disagreement``; never reads the gold reward),
  (j) ``adaptive_kl``  the single proxy with β adapted every step to hold the KL near
                  ``--kl-target`` (``kl_target``, Ziegler et al. 2019),
  (k) ``disagreement_penalty``  the proxy, standardised as the members are, less
                  ``--disagreement-lam`` × the members' disagreement (``combine: std``),

evaluating the gold and the training reward on held-out prompts every ``--eval-every`` steps.
The stop arms' curves end where they stopped (by default the rule is replayed on the single
proxy's run of the same seed, see ``--stops``).
``--member-data by_slip`` trains member i on wrong answers of one slip family only, so the
members err in different places (the single proxy is unchanged).
It writes, under ``--out``: the data, the reward models, one run folder per reward,
``results.json``, ``results.md`` (the table and the wall time) and ``overoptimisation.png``
(gold and proxy against steps, every arm's seed mean with its min–max band, and gold against
KL). See docs/overoptimisation.md for a run's figures.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ARITH = ROOT / "data" / "arithmetic"
RUNS = ("single", "mean", "penalty", "min", "kl_strong", "par", "early_stop", "refresh",
        "disagreement_stop", "adaptive_kl", "disagreement_penalty")
DEFAULT_RUNS = RUNS[:-1]
"""The arms of the default invocation (the main table in docs/overoptimisation.md); ``--runs``
adds (k), measured on its own seeds after that table."""
ENSEMBLE_ARMS = {"mean", "penalty", "min", "disagreement_stop", "disagreement_penalty"}
STOP_ARMS = {"early_stop", "disagreement_stop"}
"""Arms that are the single proxy's run cut short by a stop rule. With ``--stops replay`` (the
default) the rule is applied to the single proxy's logged evaluations of the same seed instead
of training again: on a CPU a run is deterministic, so the run with the stop is that prefix."""


# -- data --------------------------------------------------------------------------------------
def data_paths(out: Path) -> dict[str, Path]:
    return {"pairs": out / "rm_pairs.jsonl", "heldout": out / "rm_heldout.jsonl",
            "reference": out / "reference.jsonl", "prompts": out / "prompts_ref.jsonl",
            "eval_prompts": out / "eval_ref.jsonl"}


def build_data(out: Path, pairs: int, noise: float, seed: int) -> dict[str, Path]:
    """Preference pairs on training prompts, held-out pairs, and a reference set (what the
    warm-start policy writes) to standardise ensemble members on."""
    from rewardkit.testing.arithmetic import SLIPS, noisy_answer, write_jsonl

    rng = random.Random(seed)
    train = [json.loads(line) for line in open(ARITH / "train.jsonl")]
    test = [json.loads(line) for line in open(ARITH / "test.jsonl")]
    wrong = [(o, p) for o, p in SLIPS if o != 0]
    offsets, weights = zip(*wrong)

    def pair(row: dict[str, Any], flip: bool) -> dict[str, Any]:
        right = int(row["answer"])
        bad = right + rng.choices(offsets, weights)[0]
        bad = bad if bad >= 0 else right + 10
        chosen, rejected = (str(bad), str(right)) if flip else (str(right), str(bad))
        return {"prompt": row["prompt"], "chosen": chosen, "rejected": rejected}

    picked = rng.sample(train, pairs)
    paths = data_paths(out)
    write_jsonl([pair(r, rng.random() < noise) for r in picked], paths["pairs"])
    write_jsonl([pair(r, False) for r in test[:200]], paths["heldout"])
    write_jsonl([{"prompt": r["prompt"], "completion": noisy_answer(r["answer"], rng)}
                 for r in rng.sample(train, 400)], paths["reference"])
    # PAR's reference completion of each prompt: a draw of what the warm-start policy writes
    for rows, key in ((train, "prompts"), (test, "eval_prompts")):
        write_jsonl([{**r, "reference_completion": noisy_answer(r["answer"], rng)}
                     for r in rows], paths[key])
    return paths


# -- reward models -------------------------------------------------------------------------------
def train_reward_models(out: Path, data: dict[str, Path], args: argparse.Namespace
                        ) -> tuple[dict[str, Any], dict[str, Any]]:
    from rewardkit.models.train import train_reward_model
    from rewardkit.models.train_config import RewardTrainConfig

    common = dict(task="rm", model=str(ARITH / "policy"), data=str(data["pairs"]),
                  eval_data=str(data["heldout"]), steps=args.rm_steps, batch_size=16,
                  learning_rate=3e-4, chat_template=False, seed=args.seed, device="cpu",
                  eval_every=0, progress=False, plots=False, tensorboard=False)
    single = train_reward_model(RewardTrainConfig(output_dir=str(out / "rm_single"), **common))
    if not ENSEMBLE_ARMS & set(args.runs.split(",")):  # no arm reads the ensemble
        return single, None
    if args.member_data == "by_slip":
        return single, train_members_by_slip(out, data, args, common)
    report = train_reward_model(RewardTrainConfig(
        output_dir=str(out / "rm_ensemble"), ensemble=args.members, ensemble_form="models",
        bootstrap=True, **common))
    return single, report


SLIP_FAMILIES = ((10,), (-10,), (-1, 1), (11, 9, 20, -20))
"""``--member-data by_slip``: member i's wrong answers are all of family i (mod 4), so the
members are taught different things and err in different places."""


def train_members_by_slip(out: Path, data: dict[str, Path], args: argparse.Namespace,
                          common: dict[str, Any]) -> dict[str, Any]:
    """K reward models, member i on pairs whose wrong answers come from one slip family, saved
    as the manifest ``train rm --ensemble`` writes, so ``ensemble`` loads them the same way."""
    from rewardkit.models.train import train_reward_model
    from rewardkit.models.train_config import RewardTrainConfig
    from rewardkit.models.train_ensemble import write_manifest
    from rewardkit.testing.arithmetic import write_jsonl

    rng = random.Random(args.seed + 1)
    prompts = [json.loads(line) for line in open(data["pairs"])]
    root = out / "rm_ensemble"
    for i in range(args.members):
        family = SLIP_FAMILIES[i % len(SLIP_FAMILIES)]
        rows = []
        for row in prompts:
            right = sum(int(t) for t in row["prompt"].rstrip("=").split("+"))
            wrong = right + rng.choice(family)
            rows.append({"prompt": row["prompt"], "chosen": str(right),
                         "rejected": str(wrong if wrong >= 0 else right + 10)})
        path = root / f"pairs_{i}.jsonl"
        write_jsonl(rows, path)
        train_reward_model(RewardTrainConfig(**{
            **common, "data": str(path), "seed": args.seed + i,
            "output_dir": str(root / f"member_{i}")}))
    write_manifest(root, args.members)
    return _heldout_report(root, data["heldout"], args.members)


def _heldout_report(root: Path, heldout: Path, k: int) -> dict[str, Any]:
    """The figures ``train rm --ensemble`` reports, for members trained one by one."""
    import numpy as np

    import rewardkit
    from rewardkit.models.train_ensemble import summarize

    pairs = [json.loads(line) for line in open(heldout)]
    samples = [rewardkit.Sample(p["prompt"], p["chosen"]) for p in pairs] + [
        rewardkit.Sample(p["prompt"], p["rejected"]) for p in pairs]
    values = np.array([[s.value for s in rewardkit.load(
        "reward_model", model=str(root / f"member_{i}" / "final")).score(samples)]
        for i in range(k)])
    report = summarize(values, [f"member_{i}" for i in range(k)])
    report["members"] = [{"accuracy": a} for a in report["member_accuracy"].values()]
    return report


# -- policy runs -----------------------------------------------------------------------------------
SCORING = {"max_padding": 0.1}
"""How every reward model here cuts a scoring call into forward passes: a fixed share of padding
(the rule that ``max_padding: auto`` starts from on a CPU). ``auto`` then cuts by each pass's
measured time, so the passes, and with them the last bits of every score, would follow the
machine's load, and through the rewards the policy's trajectory: a run would not repeat."""


def reward_spec(name: str, out: Path, data: dict[str, Path], args: argparse.Namespace
                ) -> dict[str, Any]:
    single = {"reward": "reward_model",
              "options": {"model": str(out / "rm_single" / "final"), **SCORING}}
    if name in ("single", "kl_strong", "early_stop", "refresh", "disagreement_stop",
                "adaptive_kl"):
        return single
    if name == "par":
        return {"reward": "shaped", "options": {
            "reward": single["reward"], "options": single["options"], "method": "par",
            "reference_field": "reference_completion"}}
    if name == "disagreement_penalty":
        proxy = {"reward": "ensemble", "options": {
            "members": [single], "combine": "mean", "reference": str(data["reference"])}}
        return {"reward": {"rewards": {
            "proxy": {**proxy, "weight": 1.0},
            "disagreement": {**ensemble_spec(out, data, "std"),
                             "weight": -args.disagreement_lam}}}, "options": {}}
    combine = {"mean": "mean", "min": "min", "penalty": args.penalty}[name]
    return ensemble_spec(out, data, combine, args.lam)


def ensemble_spec(out: Path, data: dict[str, Path], combine: str = "mean", lam: float = 1.0
                  ) -> dict[str, Any]:
    return {"reward": "ensemble", "options": {
        "model": str(out / "rm_ensemble" / "final"), "combine": combine, "lam": lam,
        "reference": str(data["reference"]), "model_options": dict(SCORING)}}


def run_policy(name: str, out: Path, data: dict[str, Path], args: argparse.Namespace,
               seed: int) -> list[dict[str, float]]:
    from rewardkit.testing.arithmetic import task_config
    from rewardkit.trainer.loop import train
    from rewardkit.trainer.overoptimisation import Overoptimised

    import torch

    torch.set_num_threads(args.threads)
    spec = reward_spec(name, out, data, args)
    refresh = name == "refresh"
    watch = name == "disagreement_stop" or (name == "single" and getattr(args, "watch", False))
    run_dir = out / f"grpo_{name}_seed{seed}"
    if (args.reuse or args.only_finished) and (run_dir / "final").is_dir():
        return curve(run_dir)                          # finished by an earlier invocation
    if args.only_finished:
        return None
    if run_dir.exists():
        shutil.rmtree(run_dir)
    cfg = task_config(
        run_dir, reward=spec["reward"], reward_options=spec["options"],
        data=str(data["prompts"]),
        gold_reward={"reward": "math", "options": {"preset": "gsm8k"}},
        reference_field="answer", eval_data=str(data["eval_prompts"]),
        eval_every=args.eval_every, eval_samples=4, eval_max_prompts=200, eval_k=[1],
        gold_eval_prompts=args.gold_prompts,
        steps=args.steps, batch_size=128, group_size=8, mini_batch_size=128,
        learning_rate=args.lr, warmup_steps=10, clip_eps_high=0.28,
        kl_coef=args.kl_coef * (args.kl_strong if name == "kl_strong" else 1.0),
        kl_target=args.kl_target if name == "adaptive_kl" else None,
        kl_adapt_rate=args.kl_adapt_rate,
        stop_on_overoptimisation=args.patience if name == "early_stop" else 0,
        reward_refresh_every=args.refresh_every if refresh else 0,
        reward_refresh={"data": str(data["pairs"]), "steps": args.refresh_steps,
                        "new_weight": args.refresh_weight, "batch_size": 16,
                        "learning_rate": 3e-4} if refresh else {},
        monitor_reward=ensemble_spec(out, data) if watch else None,
        stop_on_disagreement=args.disagreement_patience if name == "disagreement_stop" else 0,
        disagreement_margin=args.disagreement_margin,
        keep_before_stop=name == "disagreement_stop" and args.keep_before_stop,
        seed=seed, plots=True, progress=not args.quiet)
    try:
        train(cfg)
    except Overoptimised as exc:  # the early-stop arms end here, by design
        print(f"  {name} seed {seed}: stopped by the monitor ({exc})", flush=True)
        if cfg.keep_before_stop and (run_dir / "before_stop").is_dir():
            return curve(run_dir)[:-1]  # the policy kept is the evaluation's before the stop
    return curve(run_dir)


def replay_stop(name: str, points: list[dict[str, float]], args: argparse.Namespace
                ) -> list[dict[str, float]]:
    """The single proxy's evaluations up to where arm ``name``'s stop rule, fed the same
    evaluations in order, stops the run (the trainer's own rule classes)."""
    from rewardkit.trainer.early_stop import DISAGREEMENT, DisagreementStop
    from rewardkit.trainer.overoptimisation import (GOLD, PROXY, Overoptimised,
                                                    OveroptimisationMonitor)

    if name == "early_stop":
        rule = OveroptimisationMonitor(args.patience)

        def feed(p: dict[str, float]) -> None:
            rule.update({PROXY: p["proxy"], GOLD: p["gold"]}, p["kl"])
        check = rule.raise_if_overoptimised
    else:
        if any("disagreement" not in p for p in points):
            raise SystemExit("disagreement_stop: the single proxy's run has no eval/disagreement "
                             "(run it with the ensemble as monitor_reward)")
        stop = DisagreementStop(args.disagreement_patience, args.disagreement_margin)

        def feed(p: dict[str, float]) -> None:
            stop.update({PROXY: p["proxy"], DISAGREEMENT: p["disagreement"]})
        check = stop.raise_if_diverging
    back = int(name == "disagreement_stop" and args.keep_before_stop)
    for i, p in enumerate(points):
        feed(p)
        try:
            check()
        except Overoptimised:
            return points[:max(i + 1 - back, 1)]
    return points


def curve(run_dir: Path) -> list[dict[str, float]]:
    rows = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    return [{"step": r["step"], "proxy": r["eval/reward_mean"], "gold": r["eval/gold_mean"],
             "kl": r.get("eval/kl", 0.0),
             **({"disagreement": r["eval/disagreement"], "monitor": r["eval/monitor_mean"]}
                if "eval/disagreement" in r else {})}
            for r in rows if "eval/gold_mean" in r]


def summarise(points: list[dict[str, float]]) -> dict[str, Any]:
    best = max(points, key=lambda p: p["gold"])
    first, last = points[0], points[-1]
    return {"gold_start": first["gold"], "gold_best": best["gold"], "best_step": best["step"],
            "kl_at_best": best["kl"], "gold_final": last["gold"], "step_final": last["step"], "proxy_start": first["proxy"],
            "proxy_at_best": best["proxy"], "proxy_final": last["proxy"],
            "gap_final": last["proxy"] - last["gold"], "kl_final": last["kl"],
            "proxy_rise_after_best": last["proxy"] - best["proxy"],
            "gold_fall_after_best": best["gold"] - last["gold"]}


# -- the figure and the table ------------------------------------------------------------------
def band(runs: list[list[dict[str, float]]], key: str) -> tuple[list[int], list[float],
                                                                 list[float], list[float]]:
    """Per evaluation step: the mean over the seeds that reached it, and their min and max."""
    by_step: dict[int, list[float]] = {}
    for points in runs:
        for p in points:
            by_step.setdefault(int(p["step"]), []).append(p[key])
    steps = sorted(by_step)
    return (steps, [sum(by_step[s]) / len(by_step[s]) for s in steps],
            [min(by_step[s]) for s in steps], [max(by_step[s]) for s in steps])


def plot(curves: dict[str, list[list[dict[str, float]]]], labels: dict[str, str],
         path: Path) -> None:
    """Gold and proxy against steps, every arm's seed mean with a min-max band over seeds,
    and gold against KL (every seed's points)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 5.6))
    for name, runs in curves.items():
        steps, mean, low, high = band(runs, "gold")
        line, = axes[0].plot(steps, mean, marker="o", ms=3, label=labels[name],
                             ls="--" if name in STOP_ARMS else "-")
        if name in STOP_ARMS:  # where the run stopped (the policy kept)
            axes[0].plot(steps[-1], mean[-1], "X", ms=9, color=line.get_color())
        axes[0].fill_between(steps, low, high, color=line.get_color(), alpha=0.15)
        steps, mean, low, high = band(runs, "proxy")
        axes[2].plot(steps, mean, "o-", ms=3, color=line.get_color(), label=labels[name])
        axes[2].fill_between(steps, low, high, color=line.get_color(), alpha=0.15)
        for i, points in enumerate(runs):
            axes[1].plot([p["kl"] for p in points], [p["gold"] for p in points], "o-", ms=2,
                         lw=0.8, color=line.get_color(), label=labels[name] if i == 0 else None)
    axes[0].set(xlabel="GRPO step", ylabel="gold: held-out accuracy (math verifier)",
                title="gold against steps (mean over seeds, band = min-max)")
    axes[1].set(xlabel="KL estimate (k3) on the training batch", ylabel="gold: held-out accuracy",
                title="gold against KL (every seed)")
    axes[2].set(xlabel="GRPO step", ylabel="proxy: the reward each arm optimises",
                title="proxy against steps (mean, min-max band)")
    for ax in axes:
        ax.grid(alpha=0.3)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def over_seeds(per_seed: list[dict[str, Any]],
               single: list[dict[str, Any] | None] | None = None) -> dict[str, Any]:
    """Mean, min and max over seeds of the figures the verdict reads, and the verdict: final
    gold at least 90% of the arm's own peak, and a peak no lower than the single proxy's peak
    on the same seed (``single``: its per-seed summaries)."""
    out: dict[str, Any] = {}
    for key in ("gold_start", "gold_best", "gold_final", "kl_final", "step_final"):
        values = [s[key] for s in per_seed]
        out[key] = {"mean": sum(values) / len(values), "min": min(values), "max": max(values)}
    kept = [s["gold_final"] >= 0.9 * s["gold_best"] for s in per_seed]
    out["keeps_90pct_of_peak"] = f"{sum(kept)}/{len(kept)} seeds"
    out["final_over_peak"] = {"mean": sum(s["gold_final"] / s["gold_best"] for s in per_seed)
                              / len(per_seed),
                              "min": min(s["gold_final"] / s["gold_best"] for s in per_seed),
                              "max": max(s["gold_final"] / s["gold_best"] for s in per_seed)}
    if single is not None:
        high = [b is not None and s["gold_best"] >= b["gold_best"] - 1e-9
                for s, b in zip(per_seed, single)]
        out["peak_at_least_single"] = f"{sum(high)}/{len(high)} seeds"
        # the stricter reading for a stop arm, whose own peak is whatever it saw before it
        # stopped: the final gold against the best gold the same seed's run reached at all
        ratios = [s["gold_final"] / b["gold_best"] for s, b in zip(per_seed, single)
                  if b is not None]
        if ratios:
            out["final_over_single_peak"] = {"mean": sum(ratios) / len(ratios),
                                             "min": min(ratios), "max": max(ratios)}
            out["keeps_90pct_of_single_peak"] = (f"{sum(r >= 0.9 for r in ratios)}/"
                                                 f"{len(ratios)} seeds")
    return out


def table(summaries: dict[str, dict[str, Any]], labels: dict[str, str]) -> str:
    def f(b: dict[str, float]) -> str:
        return f"{b['mean']:.3f} ({b['min']:.3f}–{b['max']:.3f})"

    head = ("| arm | gold at start | best gold | final gold | final / own peak | final ≥ 90% of "
            "own peak | final / single proxy's peak | final ≥ 90% of single proxy's peak | "
            "peak ≥ single proxy's | last step | final KL (k3, training batch) |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n")
    rows = "".join(
        f"| {labels[n]} | {f(s['gold_start'])} | {f(s['gold_best'])} | **{f(s['gold_final'])}** "
        f"| {f(s['final_over_peak'])} | {s['keeps_90pct_of_peak']} | "
        f"{f(s['final_over_single_peak']) if 'final_over_single_peak' in s else '–'} | "
        f"{s.get('keeps_90pct_of_single_peak', '–')} | "
        f"{s.get('peak_at_least_single', '–')} | {s['step_final']['mean']:.0f} "
        f"({s['step_final']['min']:.0f}–{s['step_final']['max']:.0f}) | {f(s['kl_final'])} |\n"
        for n, s in summaries.items())
    return head + rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/overoptimisation"),
                        help="output folder")
    parser.add_argument("--figure", type=Path, default=None,
                        help="also copy the figure here (e.g. docs/img/overoptimisation.png)")
    parser.add_argument("--pairs", type=int, default=2000, help="preference pairs for the proxy")
    parser.add_argument("--label-noise", type=float, default=0.0,
                        help="share of pairs with chosen and rejected swapped")
    parser.add_argument("--rm-steps", type=int, default=500, help="reward-model training steps")
    parser.add_argument("--members", type=int, default=4, help="K of the ensemble")
    parser.add_argument("--member-data", choices=("bootstrap", "by_slip"), default="bootstrap",
                        help="bootstrap: `train rm --ensemble K` (seeds + bootstrap resamples of "
                        "the proxy's pairs); by_slip: member i's wrong answers all come from one "
                        "slip family (+10 / -10 / ±1 / others), so members err differently")
    parser.add_argument("--penalty", choices=("uwo", "mean_minus_std"), default="uwo",
                        help="the ensemble penalty of arm (c)")
    parser.add_argument("--lam", type=float, default=1.0, help="λ of the penalty")
    parser.add_argument("--steps", type=int, default=150, help="GRPO steps of every run")
    parser.add_argument("--eval-every", type=int, default=10, help="GRPO steps between evals")
    parser.add_argument("--gold-prompts", type=int, default=None,
                        help="measure gold on its own samples of this many held-out prompts (at "
                        "most 500), on a random stream of its own, so its size changes nothing "
                        "a run or a stop rule sees (the trainer's gold_eval_prompts); default: "
                        "gold scores the samples of the 200-prompt evaluation the rules read")
    parser.add_argument("--lr", type=float, default=5e-5, help="policy learning rate")
    parser.add_argument("--kl-coef", type=float, default=0.02, help="KL coefficient")
    parser.add_argument("--kl-strong", type=float, default=10.0,
                        help="arm kl_strong multiplies the KL coefficient by this")
    parser.add_argument("--kl-target", type=float, default=0.1,
                        help="arm adaptive_kl: the KL (k3, training batch) the controller holds")
    parser.add_argument("--kl-adapt-rate", type=float, default=1.0,
                        help="arm adaptive_kl: K_β, β changes by at most 0.2·K_β per step")
    parser.add_argument("--patience", type=int, default=2,
                        help="arm early_stop: evaluations of falling gold and rising proxy "
                             "before the monitor stops the run")
    parser.add_argument("--refresh-every", type=int, default=25,
                        help="arm refresh: GRPO steps between reward-model refreshes")
    parser.add_argument("--refresh-steps", type=int, default=50,
                        help="arm refresh: fine-tuning steps of each refresh")
    parser.add_argument("--refresh-weight", type=int, default=1,
                        help="arm refresh: times each new gold-labelled pair is repeated in "
                             "the fine-tuning set (the 2,000 original pairs once)")
    parser.add_argument("--disagreement-patience", type=int, default=1,
                        help="arm disagreement_stop: evaluations in a row of rising proxy and "
                             "rising ensemble disagreement before the stop (0: log only)")
    parser.add_argument("--disagreement-margin", type=float, default=0.1,
                        help="arm disagreement_stop: count an evaluation only when the "
                             "disagreement is this much (relative) above its first value")
    parser.add_argument("--disagreement-lam", type=float, default=1.0,
                        help="arm disagreement_penalty: weight of the members' disagreement "
                             "(their std, standardised) subtracted from the standardised proxy")
    parser.add_argument("--keep-before-stop", action=argparse.BooleanOptionalAction,
                        default=False,
                        help="arm disagreement_stop: the policy kept is the one of the "
                             "evaluation before the stop (the trainer's keep_before_stop)")
    parser.add_argument("--stops", choices=("replay", "run"), default="replay",
                        help="arms early_stop and disagreement_stop: replay the stop rule on "
                             "the single proxy's run of the same seed, or train them again")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the policy runs under --out that finished (their final/ "
                             "folder exists) instead of training them again")
    parser.add_argument("--only-finished", action="store_true",
                        help="train nothing: tabulate and plot the policy runs under --out that "
                             "finished (an arm with fewer seeds shows those it has)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="policy runs at once, one process each; 1 runs them in this "
                             "process")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of every process (reward models and policy runs): "
                             "the reward models' sums change order with it, so they train "
                             "differently (the policy runs of this tiny model do not)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the data and the reward models")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="policy seeds of every arm")
    parser.add_argument("--runs", default=",".join(DEFAULT_RUNS),
                        help=f"which arms to run (comma-separated, of {', '.join(RUNS)})")
    parser.add_argument("--skip-rm", action="store_true",
                        help="reuse the reward models already under --out")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    args = parser.parse_args()

    import torch

    # A fixed thread count everywhere, as in the policy runs: a sum's order depends on it, so
    # reward models trained with the machine's default would differ from machine to machine
    # (the proxy's held-out accuracy: 0.695 with two threads, 0.720 with one) and so would every
    # arm; the policy runs alone come out bitwise the same with one or two threads.
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    held_out = sum(1 for _ in open(ARITH / "test.jsonl"))
    if args.gold_prompts is not None and not 1 <= args.gold_prompts <= held_out:
        parser.error(f"--gold-prompts must be between 1 and {held_out} (the held-out prompts), "
                     f"got {args.gold_prompts}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    data = (data_paths(out) if args.only_finished
            else build_data(out, args.pairs, args.label_noise, args.seed))
    names = [n.strip() for n in args.runs.split(",") if n.strip()]
    unknown = set(names) - set(RUNS)
    if unknown:
        parser.error(f"--runs: unknown {sorted(unknown)}; choose from {', '.join(RUNS)}")
    if not (args.skip_rm or args.only_finished):
        single, report = train_reward_models(out, data, args)
        print(f"proxy RM held-out accuracy {single['eval/accuracy']:.3f}", flush=True)
        if report is not None:
            print("ensemble members " + ", ".join(f"{m['accuracy']:.3f}" for m in report["members"])
                  + f"; ensemble mean {report['ensemble_accuracy']:.3f}; members' disagreement "
                  f"(mean std, standardised) {report['disagreement_std']:.3f}", flush=True)
    labels = {"single": "(a) single proxy RM", "mean": f"(b) ensemble mean, K={args.members}",
              "penalty": f"(c) ensemble {args.penalty}, λ={args.lam:g}",
              "min": f"(d) ensemble min (WCO), K={args.members}",
              "kl_strong": f"(e) single proxy, KL coef ×{args.kl_strong:g}",
              "par": "(f) single proxy, PAR σ(r − r_ref)",
              "early_stop": f"(g) single proxy, stop once held-out gold falls (reads gold; "
                            f"patience {args.patience})",
              "refresh": f"(h) proxy refreshed on gold-labelled samples every "
                         f"{args.refresh_every} steps"}
    labels["adaptive_kl"] = (f"(j) single proxy, adaptive KL (target {args.kl_target:g}, "
                             f"K_β {args.kl_adapt_rate:g})")
    labels["disagreement_penalty"] = (f"(k) single proxy − {args.disagreement_lam:g} × "
                                      f"ensemble disagreement (no gold)")
    labels["disagreement_stop"] = (f"(i) single proxy, stop on rising ensemble disagreement "
                                   f"(patience {args.disagreement_patience}, no gold)")
    replayed = [n for n in names if n in STOP_ARMS] if args.stops == "replay" else []
    trained = [n for n in names if n not in replayed]
    if replayed and "single" not in trained:
        trained.insert(0, "single")
    args.watch = "disagreement_stop" in replayed   # the single run logs the disagreement
    jobs = [(name, seed) for name in trained for seed in args.seeds]
    for name, seed in jobs if not args.only_finished else ():
        print(f"GRPO against {labels[name]}, seed {seed} ...", flush=True)
    if args.jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")
                                 ) as pool:
            done = list(pool.map(run_policy, *zip(*[(n, out, data, args, s) for n, s in jobs])))
    else:
        done = [run_policy(n, out, data, args, s) for n, s in jobs]
    curves: dict[str, list[list[dict[str, float]]]] = {}
    seeds_of: dict[str, list[int]] = {}
    for (name, seed), points in zip(jobs, done):
        if points is not None:
            curves.setdefault(name, []).append(points)
            seeds_of.setdefault(name, []).append(seed)
    for name in replayed:
        curves[name] = [replay_stop(name, points, args) for points in curves.get("single", [])]
        seeds_of[name] = list(seeds_of.get("single", []))
    curves = {n: curves[n] for n in dict.fromkeys(trained + names) if curves.get(n)}
    per_seed = {n: [summarise(c) for c in runs] for n, runs in curves.items()}
    single = dict(zip(seeds_of.get("single", []), per_seed.get("single", [])))
    summaries = {n: over_seeds(s, [single.get(seed) for seed in seeds_of[n]] if single else None)
                 for n, s in per_seed.items()}
    plot(curves, labels, out / "overoptimisation.png")
    if args.figure:
        args.figure.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(out / "overoptimisation.png", args.figure)
    md = table(summaries, labels)
    minutes = (time.perf_counter() - started) / 60
    timed = ("summary of finished runs only; each run was timed by the invocation that trained "
             "it" if args.only_finished else f"wall time {minutes:.1f} min")
    (out / "results.md").write_text(md + f"\n{timed}\n")
    (out / "results.json").write_text(json.dumps(
        {"options": {k: str(v) for k, v in vars(args).items()}, "summaries": summaries,
         "per_seed": per_seed, "seeds": seeds_of, "curves": curves, "minutes": minutes},
        indent=1))
    print(md)
    print(f"wall time {minutes:.1f} min; figure: {out / 'overoptimisation.png'}; all figures: "
          f"{out / 'results.json'}")


if __name__ == "__main__":
    main()
