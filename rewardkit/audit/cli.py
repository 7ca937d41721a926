"""``rewardkit audit``: the command line of the audit room (registered by ``rewardkit.cli``)."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

from tqdm.auto import tqdm

from ..arguments import EXIT_INTERRUPTED, EXIT_USAGE, HelpFormatter, exit_status, parse_key_value
from ..compose import ConfigError
from ..console import progress_output, say
from ..dataio import DataError
from ..registry import UnknownRewardError, load
from ..scorer import Scorer
from .families import KINDS
from .report import format_table, write_html, write_json
from .rows import AuditInputError, RowFields, read_audit_rows, sample_rows
from .runner import AuditOptions, choose_families, run_audit

EXIT_AUDIT_FAILED = 3
"""The audit ran and the reward failed it: an attack family paid above ``--max-pay`` or an
honest family below ``--min-honest`` (the "result not usable" code of every command)."""


def add_audit_parser(sub: Any) -> None:
    """Add ``audit`` to the root command's sub-commands."""
    p = sub.add_parser(
        "audit", help="find a reward's exploitable gaps and false zeros on your own data",
        description="Generate honest variants (the right answer in the styles models write) "
                    "and attack variants (what an optimiser finds) from each row of INPUT, "
                    "score them with the reward as `score` does, and report per family the "
                    "share paid with a bootstrap interval, the worst examples and a verdict. "
                    "Exit status 0 when no attack family is paid above --max-pay and no honest "
                    "family falls below --min-honest, 3 otherwise.",
        formatter_class=HelpFormatter)
    p.add_argument("input", nargs="?", help="rows with prompts and references: JSONL, JSON, CSV, Parquet, "
                                 "a datasets folder, or hf:NAME (repeated prompts count once)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--reward", "-r", help="registered reward name (with --remote: the served "
                                             "reward's name)")
    what.add_argument("--config", "-c", help="reward config file (YAML/TOML/JSON): a composition")
    p.add_argument("--option", "-O", action="append", default=[], type=parse_key_value,
                   metavar="KEY=VALUE", help="reward option (repeatable; with --remote, an "
                                             "option of the client); values parse as YAML")
    p.add_argument("--remote", metavar="URL",
                   help="audit the reward served by `rewardkit serve` at URL instead of building "
                        "it here (token from REWARDKIT_TOKEN)")
    p.add_argument("--prompt-field", default="prompt", help="field holding the prompt")
    p.add_argument("--reference-field", default="reference",
                   help="field holding what the reward reads as reference (dotted paths work, "
                        "e.g. reward_model.ground_truth)")
    p.add_argument("--answer-field", default=None,
                   help="field holding the right answer the variants are built from: the "
                        "reference solution for code (HumanEval: canonical_solution), a "
                        "reference completion for a learned reward; default, read from the "
                        "reference")
    p.add_argument("--kind", choices=["auto", *KINDS], default="auto",
                   help="which families to run; auto: from the reward's name, else the "
                        "references' shape")
    p.add_argument("--families", type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                   default=None, metavar="A,B,...", help="run only these families (and the "
                                                          "anchor)")
    p.add_argument("--list-families", action="store_true",
                   help="print the families of --kind (default: all kinds) with their one-line "
                        "description and exit")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="audit N rows picked at random (seeded) instead of all")
    p.add_argument("--seed", type=int, default=0, help="seeds --sample, the families and the "
                                                       "bootstrap")
    p.add_argument("--batch-size", type=int, default=256, help="variants per call of the reward")
    p.add_argument("--pay-level", type=float, default=0.5,
                   help="a rule-based reward pays a variant at this fraction of --top")
    p.add_argument("--top", type=float, default=None,
                   help="the reward's full value (default: the highest it gave a plain right "
                        "answer)")
    p.add_argument("--max-pay", type=float, default=0.05,
                   help="fail when an attack family is paid on more than this share")
    p.add_argument("--min-honest", type=float, default=0.95,
                   help="fail when an honest family is paid on less than this share")
    p.add_argument("--examples", type=int, default=3, help="worst examples kept per family")
    p.add_argument("-o", "--output", metavar="FILE.json", help="write the full result as JSON")
    p.add_argument("--report", metavar="FILE.html", help="write a self-contained HTML page")
    p.add_argument("--input-format", choices=["jsonl", "json", "csv", "parquet", "datasets", "hf"])
    p.add_argument("--split", help="split of a datasets folder or hf:NAME")
    p.add_argument("--subset", help="configuration name of an hf:NAME dataset")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_audit)


def _list_families(kind: str) -> int:
    kinds = KINDS if kind == "auto" else (kind,)
    for k in kinds:
        chosen = choose_families(k, None)
        print(f"{k}: {sum(f.role == 'honest' for f in chosen)} honest, "
              f"{sum(f.role == 'attack' for f in chosen)} attack families")
        for f in chosen:
            print(f"  {f.name:<24} {f.role:<7} {f.doc}")
    return 0


def _check(args: argparse.Namespace) -> str | None:
    if not args.input:
        return "give the rows to audit (INPUT), or --list-families"
    if not (args.reward or args.config or args.remote):
        return "give the reward: --reward NAME, --config FILE, or --remote URL"
    if args.remote and args.config:
        return "--remote audits the reward a server holds: name it with --reward, not --config"
    if args.batch_size < 1 or (args.sample is not None and args.sample < 1):
        return "--batch-size and --sample must be at least 1"
    if not 0 < args.pay_level <= 1:
        return "--pay-level must be in (0, 1]"
    if args.top is not None and args.top <= 0:
        return "--top is the reward's full value, a number above 0"
    if not (0 <= args.max_pay <= 1 and 0 <= args.min_honest <= 1):
        return "--max-pay and --min-honest are shares between 0 and 1"
    if args.report and not args.report.lower().endswith((".html", ".htm")):
        return "--report writes an HTML page (a path ending in .html)"
    return None


def build_scorer(args: argparse.Namespace) -> Scorer:
    """The reward to audit: served (``--remote``), or built here as ``score`` builds it."""
    options = dict(args.option)
    if args.remote:
        return load("remote", url=args.remote, reward=args.reward, **options)
    return load(args.reward or args.config, **options)


def cmd_audit(args: argparse.Namespace) -> int:
    if args.list_families:
        return _list_families(args.kind)
    problem = _check(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    fields = RowFields(args.prompt_field, args.reference_field, args.answer_field)
    options = AuditOptions(args.pay_level, args.top, args.max_pay, args.min_honest,
                           args.batch_size, args.examples, args.seed)
    try:
        rows = sample_rows(read_audit_rows(args.input, fields, args.input_format, args.split,
                                           args.subset), args.sample, args.seed)
        if not rows:
            raise DataError(f"{args.input!r} has no rows to audit")
        scorer = build_scorer(args)
    except UnknownRewardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ConfigError, DataError, TypeError, ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_status(exc) if isinstance(exc, DataError) else EXIT_USAGE
    name = args.config or args.reward or "reward"
    if args.remote:
        name = f"{args.reward or 'the default reward'} at {args.remote}"
    with scorer, progress_output(), contextlib.ExitStack() as bars:
        bar: list[tqdm] = []

        def announce(line: str, total: int) -> None:
            say(line)
            bar.append(bars.enter_context(tqdm(total=total, unit="variant", desc="audit",
                                               disable=args.quiet, file=sys.stderr)))

        def progress(count: int) -> None:
            bar[0].update(count)

        try:
            result = run_audit(scorer, rows, fields, None if args.kind == "auto" else args.kind,
                               args.families, options, name, announce, progress)
        except (AuditInputError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print("\ninterrupted: nothing was written", file=sys.stderr)
            return EXIT_INTERRUPTED
    print(format_table(result))
    if args.output:
        print(f"output: {os.path.abspath(write_json(result, args.output))}")
    if args.report:
        print(f"report: {os.path.abspath(write_html(result, args.report))}")
    return 0 if result.ok else EXIT_AUDIT_FAILED
