"""``rewardkit train rm|prm`` and ``rewardkit eval rm|prm``. Importing this module is cheap:
torch and transformers (the train extra) load when a command runs."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..arguments import EXIT_INTERRUPTED, EXIT_USAGE, exit_status, parse_key_value
from .. import registry
from ..compose import ConfigError
from ..dataio import DataError
from ..registry import UnknownRewardError
from .data import read_pairs, read_solutions
from .evaluation import TIE_TOLERANCE, evaluate_process_reward, evaluate_reward_model
from .heuristics import format_pair_heuristics, format_solution_heuristics
from .loading import classifier_kind, load_config
from .train_config import RewardTrainConfig

# flag dest -> RewardTrainConfig field
_OVERRIDES = {
    "model": "model", "data": "data", "eval_data": "eval_data", "output": "output_dir",
    "steps": "steps", "batch_size": "batch_size", "micro_batch_size": "micro_batch_size",
    "learning_rate": "learning_rate", "max_length": "max_length", "eval_every": "eval_every",
    "save_every": "save_every", "seed": "seed", "device": "device", "ensemble": "ensemble",
    "ensemble_form": "ensemble_form",
}


def _add_train(sub: Any, task: str, summary: str) -> None:
    p = sub.add_parser(task, help=summary, description=summary + " Every option can be set in "
                       "--config (its train: section) or with --set KEY=VALUE; see "
                       "docs/learned.md.")
    p.add_argument("--config", "-c", help="YAML/TOML/JSON file with a train: section")
    p.add_argument("--model", "-m", help="base model or classifier: local folder or hub id")
    p.add_argument("--data", "-d", help="training rows: " + (
        "TRL preference format (prompt, chosen, rejected)" if task == "rm" else
        "TRL stepwise format (prompt, completions, labels)"))
    p.add_argument("--eval-data", help="held-out rows (default: hold out eval_fraction of --data)")
    p.add_argument("--output", "-o", help="output folder (checkpoints, metrics, plots, final/)")
    p.add_argument("--resume", help="continue from a checkpoint folder or a run's output folder")
    p.add_argument("--steps", type=int, help="optimizer steps")
    p.add_argument("--batch-size", type=int, help="pairs/solutions per optimizer step")
    p.add_argument("--micro-batch-size", type=int, help="per forward pass (accumulation)")
    p.add_argument("--learning-rate", "--lr", type=float)
    p.add_argument("--max-length", type=int, help="tokens per sequence")
    p.add_argument("--lora", action="store_true", default=None, help="train a LoRA adapter")
    p.add_argument("--eval-every", type=int)
    p.add_argument("--save-every", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--ensemble", type=int, metavar="K",
                   help="train K members for the `ensemble` reward (rm; default 1)")
    p.add_argument("--ensemble-form", choices=("models", "heads"),
                   help="models: K separate runs (LoRA adapters with --lora); heads: one "
                        "trunk with K heads")
    p.add_argument("--device", help="auto, cpu, cuda, cuda:1")
    p.add_argument("--set", action="append", default=[], type=parse_key_value,
                   metavar="KEY=VALUE", help="any train option (repeatable)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=run_train, task=task)


def add_model_train_parsers(algos: Any) -> None:
    """Add ``rm`` and ``prm`` to ``rewardkit train``."""
    _add_train(algos, "rm", "Train an outcome reward model (Bradley–Terry) on preference pairs.")
    _add_train(algos, "prm", "Train a process reward model on stepwise labels.")


def config_from_args(args: argparse.Namespace) -> Any:
    values: dict[str, Any] = {f: getattr(args, d, None) for d, f in _OVERRIDES.items()}
    values["task"] = args.task
    values["lora"] = args.lora
    if args.quiet:
        values["progress"] = False
    values.update(dict(args.set))
    if args.config:
        return RewardTrainConfig.from_file(args.config, **values)
    if args.resume and not args.model:  # the checkpoint's own options
        from ..runtime.checkpoint import find_checkpoint, load_state  # deferred: torch
        from .train_ensemble import ENSEMBLE_CONFIG  # deferred: torch

        ensemble = Path(args.resume) / ENSEMBLE_CONFIG
        saved = json.loads(ensemble.read_text()) if ensemble.is_file() else \
            load_state(find_checkpoint(args.resume)).get("config") or {}
        return RewardTrainConfig.from_dict({**saved, **{k: v for k, v in values.items()
                                                        if v is not None}})
    return RewardTrainConfig.from_dict({k: v for k, v in values.items() if v is not None})


def run_train(args: argparse.Namespace) -> int:
    try:
        cfg = config_from_args(args).validate()
        from .train import RewardTrainer  # deferred: torch and transformers
        from .train_ensemble import ensemble_trainer, format_report  # deferred: torch

        trainer = ensemble_trainer(cfg, resume=args.resume) if cfg.ensemble > 1 else \
            RewardTrainer(cfg, resume=args.resume)
    except (ConfigError, DataError) as exc:
        print(f"rewardkit train {args.task}: {exc}", file=sys.stderr)
        return exit_status(exc)
    try:
        final = trainer.train()
    except KeyboardInterrupt:
        where = trainer.interrupt_checkpoint
        member = getattr(trainer, "interrupted_member", None)
        print(f"\ninterrupted after step {trainer.step_count}" +
              (f" of {member}" if member else "") + "; " + (
            f"checkpoint saved in {where}. Continue with --resume {cfg.output_dir}" if where else
            "no checkpoint of that step (interrupted mid-update)"), file=sys.stderr)
        return EXIT_INTERRUPTED
    if cfg.ensemble > 1:
        print(format_report(final))
        print(f"report: {cfg.output_dir}/ensemble_report.json")
        print(f"final ensemble: {cfg.output_dir}/final — rewardkit.load(\"ensemble\", "
              f"model=\"{cfg.output_dir}/final\")")
        return 0
    print(" ".join(f"{k}={v:.4g}" for k, v in sorted(final.items())
                   if isinstance(v, (int, float))))
    print(f"final model: {cfg.output_dir}/final")
    return 0


def add_eval_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``rewardkit eval rm|prm``."""
    p = sub.add_parser("eval", help="evaluate a reward model (RewardBench / ProcessBench style)",
                       description="Evaluate a learned reward and write a JSON report.")
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    for kind, summary, data_help in (
            ("rm", "pairwise accuracy per subset and overall, bootstrap 95% CI, AUROC, ECE",
             "preference rows (prompt, chosen, rejected, optional subset)"),
            ("prm", "ProcessBench: first-wrong-step accuracy on erroneous and correct "
                    "solutions, and F1", "stepwise rows (TRL prompt/completions/labels, or "
                                         "ProcessBench problem/steps/label)")):
        q = kinds.add_parser(kind, help=summary, description=summary)
        q.add_argument("--model", "-m", required=True, help="model folder or hub id")
        q.add_argument("--data", "-d", required=True, help=data_help)
        q.add_argument("--output", "-o", help="JSON report path (default: print only)")
        q.add_argument("--option", "-O", action="append", default=[], type=parse_key_value,
                       metavar="KEY=VALUE", help="scorer option, e.g. -O batch_tokens=8192")
        q.add_argument("--reward", choices=("auto", "reward_model", "process_reward",
                                            "implicit_reward"), default="auto",
                       help="how the model is read (auto: a classifier as "
                            f"{'reward_model' if kind == 'rm' else 'process_reward'}, a causal "
                            "LM as implicit_reward, its own log-likelihood)")
        q.add_argument("--seed", type=int, default=0, help="bootstrap seed")
        q.add_argument("--no-heuristics", action="store_true",
                       help="leave out the trivial baselines (shorter, longer, smaller, larger, "
                            "overlap; for prm: all_correct, first_step, last_step)")
        if kind == "rm":
            q.add_argument("--tie-tolerance", type=float, default=None,
                           help="rewards this close (relative to max(1, |r|)) are a tie, "
                                "counted 0.5 (default 1e-5)")
        if kind == "prm":
            q.add_argument("--threshold", type=float, default=0.5,
                           help="a step scoring below it is predicted wrong")
            q.add_argument("--layout", choices=("processbench", "training"),
                           default="processbench",
                           help="processbench (default): the separator also follows the "
                                "problem, as ProcessBench's evaluation script lays it out; "
                                "training: as train prm encodes it")
        q.set_defaults(func=run_eval)
    return p


def _reward_for(args: argparse.Namespace) -> str:
    """The reward ``eval`` reads the model with: ``--reward``, or for ``auto`` a classifier as
    ``reward_model``/``process_reward`` and a causal language model as ``implicit_reward``."""
    if args.reward != "auto":
        return args.reward
    default = "reward_model" if args.kind == "rm" else "process_reward"
    config = load_config(args.model)
    names = getattr(config, "architectures", None) or []
    causal = classifier_kind(config) == "other" and any(n.endswith("ForCausalLM") for n in names)
    return "implicit_reward" if causal else default


FORMS = ("bare", "worked")
"""Subsets named ``SLICE/bare`` and ``SLICE/worked`` hold the two forms of one slice's pairs
(a final answer alone, a worked solution); ``eval rm`` prints them side by side."""


def forms_side_by_side(subsets: dict[str, Any]) -> str | None:
    """A table with a row per slice and a column per form, when every subset is named
    ``SLICE/FORM`` with a form of :data:`FORMS`; else None."""
    split = [name.rpartition("/") for name in subsets]
    if not split or any(not head or form not in FORMS for head, _, form in split):
        return None

    def cell(block: dict[str, Any] | None) -> str:
        if block is None:
            return f"{'-':>22}"
        low, high = block["ci95"]
        return f"{block['accuracy']:.3f} ({low:.3f}-{high:.3f})".rjust(22)

    slices = list(dict.fromkeys(head for head, _, _ in split))
    lines = [f"  {'slice':<20}" + "".join(f"{form:>22}" for form in FORMS)]
    for name in slices:
        lines.append(f"  {name:<20}" + "".join(cell(subsets.get(f"{name}/{form}"))
                                                for form in FORMS))
    return "\n".join(lines)


def run_eval(args: argparse.Namespace) -> int:
    try:
        if args.kind == "rm":
            rows = read_pairs(args.data)
            scorer = registry.load(_reward_for(args), model=args.model, **dict(args.option))
            tol = TIE_TOLERANCE if args.tie_tolerance is None else args.tie_tolerance
            report = evaluate_reward_model(scorer, rows, args.seed, tol,
                                           heuristics=not args.no_heuristics)
        else:
            rows = read_solutions(args.data)
            scorer = registry.load(_reward_for(args), model=args.model, **dict(args.option))
            report = evaluate_process_reward(scorer, rows, args.threshold, args.layout,
                                             heuristics=not args.no_heuristics)
    except (ConfigError, DataError, TypeError, UnknownRewardError) as exc:
        print(f"rewardkit eval {args.kind}: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, TypeError) else exit_status(exc)
    report = {"model": args.model, "reward": scorer.name, "data": args.data, "n": len(rows),
              **report}
    text = json.dumps(report, indent=1)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
    overall = report["overall"]
    if args.kind == "rm":
        low, high = overall["ci95"]
        print(f"pairwise accuracy {overall['accuracy']:.3f} (95% CI {low:.3f}-{high:.3f}), "
              f"n={overall['n']}")
        forms = forms_side_by_side(report["subsets"])
        if forms is not None:
            print(forms)
        for name, block in report["subsets"].items() if forms is None else ():
            low, high = block["ci95"]
            print(f"  {name}: {block['accuracy']:.3f} ({low:.3f}-{high:.3f}, n={block['n']})")
        if "heuristics" in report:
            print("trivial baselines on the same pairs (accuracy; a slice 'defeats' a rule "
                  "that does not beat a coin: below 0.55, or its 95% CI reaches 0.5):")
            print(format_pair_heuristics(report["heuristics"], report))
    else:
        print(f"ProcessBench F1 {overall['f1']:.3f} (erroneous {overall['error_accuracy']:.3f}, "
              f"correct {overall['correct_accuracy']:.3f}; layout {report['layout']})")
        for name, block in report["subsets"].items():
            print(f"  {name}: F1 {block['f1']:.3f} (erroneous {block['error_accuracy']:.3f}, "
                  f"correct {block['correct_accuracy']:.3f})")
        if "heuristics" in report:
            print("trivial baselines (ProcessBench F1):")
            print(format_solution_heuristics(report["heuristics"], report))
    return 0
