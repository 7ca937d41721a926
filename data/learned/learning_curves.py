"""Train the arithmetic reward model and process reward model as docs/learned.md reports, and
draw their held-out curves (pairwise accuracy; ProcessBench F1) in one figure.

    python data/learned/learning_curves.py [--rm-steps 600] [--prm-steps 300] [--out runs/learned]
        [--figure docs/img/learned_curves.png] [--plot-only]

Same settings as the slow tests in tests/test_models_learning.py (batch 32, lr 1e-3 constant
after 5 warmup steps, seed 0, fp32 CPU), with a held-out evaluation every 50 steps.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def train(task: str, steps: int, out: Path) -> None:
    from rewardkit.models.train import RewardTrainer
    from rewardkit.models.train_config import RewardTrainConfig

    cfg = RewardTrainConfig(task=task, model=str(HERE / "base"),
                            data=str(HERE / f"{task}_train.jsonl"),
                            eval_data=str(HERE / f"{task}_test.jsonl"), output_dir=str(out),
                            steps=steps, batch_size=32, learning_rate=1e-3,
                            lr_schedule="constant", warmup_steps=5, eval_every=50,
                            device="cpu", tensorboard=False)
    print(task, RewardTrainer(cfg).train())


def plot(rm_metrics: Path, prm_metrics: Path, figure: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, path, keys, title in (
            (axes[0], rm_metrics, ("eval/accuracy",), "reward model: held-out pairwise accuracy"),
            (axes[1], prm_metrics, ("eval/f1", "eval/error_accuracy", "eval/correct_accuracy"),
             "process reward model: ProcessBench")):
        rows = [json.loads(line) for line in open(path)]
        for key in keys:
            pts = [(r["step"], r[key]) for r in rows if key in r]
            if pts:
                ax.plot(*zip(*pts), marker="o", markersize=3, label=key.split("/")[1])
        ax.axhline(0.9 if ax is axes[0] else 0.8, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("step")
        ax.set_ylim(0, 1)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(figure, dpi=100)
    print(f"wrote {figure}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rm-steps", type=int, default=600)
    parser.add_argument("--prm-steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path("runs/learned"))
    parser.add_argument("--figure", type=Path,
                        default=HERE.parents[1] / "docs" / "img" / "learned_curves.png")
    parser.add_argument("--plot-only", action="store_true", help="draw from an earlier run")
    args = parser.parse_args()
    if not args.plot_only:
        for task, steps in (("rm", args.rm_steps), ("prm", args.prm_steps)):
            train(task, steps, args.out / task)
    plot(args.out / "rm" / "metrics.jsonl", args.out / "prm" / "metrics.jsonl", args.figure)


if __name__ == "__main__":
    main()
