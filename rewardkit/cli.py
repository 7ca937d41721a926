"""The ``rewardkit`` command line: score, list, doctor, train, eval, serve, audit."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import warnings
from importlib import metadata as importlib_metadata
from typing import Any, Sequence

from .arguments import (EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_ROWS_FAILED, EXIT_USAGE,
                        HelpFormatter, Parser, exit_status, parse_key_value)
from .compose import ConfigError
from .dataio import DataError
from .offline import Fields, RewardSpec, ScoreJob, run
from .registry import UnknownRewardError, list_rewards
from .report import write_report
from .scale.data import RayOptions, run_on_ray

__all__ = ["main", "build_parser", "Parser", "parse_key_value", "EXIT_USAGE",
           "EXIT_ROWS_FAILED"]


def _add_score(sub: Any) -> None:
    p = sub.add_parser(
        "score", help="score a dataset offline",
        description="Score every row of INPUT with a reward and write OUTPUT with two added "
                    "fields: `reward` (float) and `reward_info` (components, extracted answer, "
                    "errors). Re-running the same command continues an interrupted run.",
        formatter_class=HelpFormatter)
    p.add_argument("input", help="JSONL, JSON, CSV, Parquet, a datasets folder (save_to_disk), "
                                 "or hf:NAME for a hub dataset")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--reward", "-r", help="registered reward name (see `rewardkit list`)")
    what.add_argument("--config", "-c", help="reward config file (YAML/TOML/JSON): a composition")
    p.add_argument("--option", "-O", action="append", default=[], type=parse_key_value,
                   metavar="KEY=VALUE", help="reward option (repeatable); values parse as YAML")
    p.add_argument("-o", "--output", required=True, help="output file or folder; format from "
                                                         "its suffix (or --output-format)")
    p.add_argument("--prompt-field", default="prompt", help="field holding the prompt "
                                                            "(dotted paths work: a.b.c)")
    p.add_argument("--completion-field", default="completion", help="field holding the completion")
    p.add_argument("--reference-field", default=None,
                   help="field holding the reference (default: `reference` if present; naming it "
                        "makes a missing value an error), e.g. reward_model.ground_truth for verl")
    p.add_argument("--output-field", default="reward", help="name of the added reward field "
                                                             "(its info goes in <name>_info)")
    p.add_argument("--input-format", choices=["jsonl", "json", "csv", "parquet", "datasets", "hf"])
    p.add_argument("--output-format", choices=["jsonl", "json", "csv", "parquet", "datasets"])
    p.add_argument("--split", help="split of a datasets folder holding several, or of hf:NAME "
                                   "(default train)")
    p.add_argument("--subset", help="configuration name of an hf:NAME dataset")
    p.add_argument("--workers", "-j", type=int, default=1, help="scoring processes")
    p.add_argument("--chunk-size", type=int, default=256,
                   help="rows per batch given to the reward (cut only between prompts)")
    p.add_argument("--overwrite", action="store_true", help="start over instead of resuming")
    p.add_argument("--summary-json", help="also write the summary to this JSON file")
    p.add_argument("--report", metavar="FILE.html",
                   help="also write a self-contained HTML page: score histograms per reward "
                        "component, reasons and errors, the slowest samples")
    p.add_argument("--max-error-fraction", type=_fraction, default=None, metavar="F",
                   help="exit with status 3 (after writing the output) when more than this "
                        "fraction of rows could not be scored; by default only when every row "
                        "failed (e.g. a wrong --completion-field)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    ray = p.add_argument_group("Ray (pip install 'rewardkit[ray]'; see docs/scale.md)")
    ray.add_argument("--ray", action="store_true",
                     help="score on Ray Data; OUTPUT is then a folder of shards")
    ray.add_argument("--ray-address", default=None,
                     help="Ray cluster to join (`auto`: the running one); default a local Ray")
    ray.add_argument("--ray-actors", type=int, default=2, help="scoring actors (one Scorer each)")
    ray.add_argument("--ray-cpus-per-actor", type=float, default=1.0, help="CPUs each actor holds")
    ray.add_argument("--ray-gpus-per-actor", type=float, default=0.0,
                     help="GPUs each actor holds (learned rewards; fractions pack several)")
    ray.add_argument("--shard-rows", type=int, default=10_000,
                     help="rows per output shard: the unit of retry and of resumption")
    p.set_defaults(func=_cmd_score)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {text!r}")
    return value


def _too_many_failed(summary: Any, max_fraction: float | None) -> bool:
    if not summary.count:
        return False
    if max_fraction is None:
        return summary.error_count == summary.count
    return summary.error_fraction > max_fraction


def _cmd_score(args: argparse.Namespace) -> int:
    if args.workers < 1 or args.chunk_size < 1:
        print("error: --workers and --chunk-size must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.report and (args.ray or not args.report.lower().endswith((".html", ".htm"))):
        print("error: --report writes an HTML page (a path ending in .html), for a local run "
              "(not --ray)", file=sys.stderr)
        return EXIT_USAGE
    fields = Fields(args.prompt_field, args.completion_field,
                    args.reference_field or "reference", args.reference_field is not None)
    spec = RewardSpec(args.reward or args.config, dict(args.option))
    job = ScoreJob(args.input, args.output, spec, fields, args.input_format, args.output_format,
                   args.split, args.subset, args.output_field, args.workers, args.chunk_size,
                   args.overwrite, not args.quiet)
    try:
        if args.ray:
            summary = run_on_ray(job, RayOptions(args.ray_address, args.ray_actors,
                                                 args.ray_cpus_per_actor, args.ray_gpus_per_actor,
                                                 args.shard_rows))
        else:
            summary = run(job)
    except UnknownRewardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ConfigError, DataError, TypeError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_status(exc) if isinstance(exc, DataError) else EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted: rows written so far are kept; run the same command again to "
              "continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(summary.format())
    print(f"output: {os.path.abspath(args.output)} ({summary.count} rows)")
    if args.summary_json:
        with open(args.summary_json, "w") as f:
            json.dump(summary.to_dict(), f, indent=1)
    if args.report:
        page = write_report(args.report, args.output, args.output_format, summary, spec, fields,
                            args.output_field)
        print(f"report: {os.path.abspath(page)}")
    if _too_many_failed(summary, args.max_error_fraction):
        limit = ("every row" if args.max_error_fraction is None
                 else f"more than {args.max_error_fraction:g} of the rows")
        print(f"error: {summary.error_count} of {summary.count} rows could not be scored "
              f"({limit}); the output is written. Check the field flags and the first errors "
              "above", file=sys.stderr)
        return EXIT_ROWS_FAILED
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    rewards = list_rewards()
    if args.json:
        print(json.dumps(rewards, indent=1))
        return 0
    width = max(map(len, rewards))
    for name, description in rewards.items():
        print(f"{name:<{width}}  {description}")
    return 0


def _own_version() -> str:
    """The installed distribution's version; a source checkout run without installing (its
    folder on ``PYTHONPATH``) has none, and says so instead of failing to start."""
    try:
        return importlib_metadata.version("rewardkit")
    except importlib_metadata.PackageNotFoundError:
        return "(not installed: run from a source checkout)"


def _cmd_doctor(args: argparse.Namespace) -> int:
    print(f"rewardkit {_own_version()} on Python "
          f"{platform.python_version()} ({platform.platform()})")
    for dist in ("sympy", "latex2sympy2_extended", "torch", "transformers", "peft", "accelerate",
                 "datasets", "pyarrow", "trl", "fastapi"):
        try:
            version = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            version = "not installed"
        print(f"  {dist:<22} {version}")
    try:
        import torch

        cuda = torch.cuda.is_available()
        print(f"  {'cuda':<22} {torch.cuda.get_device_name(0) if cuda else 'not available'}")
    except ImportError:
        pass
    try:
        # deferred: the sandbox may not import on this host (the doctor says why)
        from .sandboxes import doctor
    except ImportError as exc:
        print(f"sandbox: unavailable ({exc})")
        return EXIT_FAILURE
    print("\nSandbox (code execution): limits and isolations this host enforces")
    return doctor.main(["--json"] if args.json else [])


def _room_cli(module: str) -> Any:
    """A room's command-line module, or None when it cannot be imported (a missing extra)."""
    try:
        return importlib.import_module(module, __package__)
    except ImportError:
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="rewardkit", description="Rewards for RL post-training of LLMs.")
    parser.add_argument("--version", action="version",
                        version=f"rewardkit {_own_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_score(sub)
    p = sub.add_parser("list", help="list the rewards that can be loaded by name")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=_cmd_list)
    p = sub.add_parser("doctor", help="versions, devices and which sandbox limits and "
                       "isolations this host enforces (exit 1 where one cannot be)")
    p.add_argument("--json", action="store_true", help="the sandbox report as JSON")
    p.set_defaults(func=_cmd_doctor)
    # Each room registers its own sub-commands; a room whose optional extra is missing has none.
    trainer_cli, models_cli, server_cli = (_room_cli(m) for m in (
        ".trainer.cli", ".models.cli", ".server.cli"))
    if trainer_cli is not None:  # `train grpo|ppo`, and `train rm|prm` from the models room
        more = [models_cli.add_model_train_parsers] if models_cli is not None else []
        trainer_cli.add_train_parser(sub, more)
    if models_cli is not None:
        models_cli.add_eval_parser(sub)
    if server_cli is not None:  # `serve`, with `--ray` from the scale room
        server_cli.add_serve_parser(sub, _room_cli(".scale.serve"))
    audit_cli = _room_cli(".audit.cli")
    if audit_cli is not None:
        audit_cli.add_audit_parser(sub)
    return parser


def _show_warning(message: Any, category: type, filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """Warnings as one line a user can act on, not a source location."""
    print(f"warning: {message}", file=file or sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
