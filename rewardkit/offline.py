"""Offline scoring of a dataset: the engine behind ``rewardkit score``.

Loss-free and resumable: scored rows are appended to a JSONL journal and flushed chunk by chunk,
so a run killed at any moment keeps every row already written. Re-running the same command
reads the journal, drops a half-written last line, and continues after the last complete row;
a state file beside the output records which input/reward/fields produced it and a fingerprint
of the input's content, so a different command, or the same command on a rewritten input,
cannot silently append to it. The data decides, never the state's ``complete`` flag: a rerun
counts the rows really in the output, checks the first and last against the input, and
resumes or refuses with the reason. For non-JSONL outputs the journal is converted at the end.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Iterable, Iterator

from .compose import ConfigError, read_config_file
from .dataio import BAD_ROW_KEY, DataError, PathError, Source, count_rows, detect_format, dumps, \
    fingerprint, fingerprint_changes, get_field, read_rows, write_rows
from .registry import load
from .scorer import Scorer, is_missing
from .summary import Summary
from .console import progress_output
from .diagnostics import config_changes, describe_changes
from .types import Sample, SampleError, Score


@dataclass(frozen=True)
class Fields:
    """Which input fields hold the prompt, completion and reference (dotted paths work, e.g.
    ``reward_model.ground_truth`` as verl stores the gold). A missing reference field gives the
    sample no reference unless ``require_reference`` (set when the user names the field)."""

    prompt: str = "prompt"
    completion: str = "completion"
    reference: str | None = "reference"
    require_reference: bool = False


@dataclass(frozen=True)
class RewardSpec:
    """A picklable recipe for the scorer, so worker processes can build their own."""

    name_or_config: str
    options: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Scorer:
        return load(self.name_or_config, **self.options)

    def describe(self) -> dict[str, Any]:
        target = self.name_or_config
        if os.path.exists(target):
            target = os.path.abspath(target)
        out = {"reward": target, "options": self.options}
        if os.path.isfile(target):  # an edited config file is a different reward
            try:
                out["config"] = dict(read_config_file(Path(target)))
            except Exception:  # noqa: BLE001 - an unreadable file fails when the reward loads
                pass
        return out


def row_to_sample(row: dict[str, Any], fields: Fields) -> Sample:
    """A Sample from an input row; the whole row goes into ``metadata``."""
    if BAD_ROW_KEY in row:
        raise SampleError(row[BAD_ROW_KEY])
    try:
        completion = get_field(row, fields.completion)
    except KeyError as exc:
        raise SampleError(f"{exc.args[0]} (choose the completion field with --completion-field)") from None
    if completion is None:
        raise SampleError(f"field {fields.completion!r} is null in this row (no completion to "
                          "score; choose the completion field with --completion-field)")
    try:
        prompt = get_field(row, fields.prompt)
    except KeyError:
        prompt = ""
    if prompt is None:  # a null prompt is no prompt, as a missing one is
        prompt = ""
    reference = None
    if fields.reference:
        try:
            reference = get_field(row, fields.reference)
        except KeyError as exc:
            if fields.require_reference:
                raise SampleError(f"{exc.args[0]} (choose it with --reference-field)") from None
        if is_missing(reference) and fields.require_reference:
            raise SampleError(f"field {fields.reference!r} is null in this row (no reference)")
    sample = Sample(prompt, completion, reference, row)
    problem = sample.problem
    if problem is not None:  # the same message as in Python, plus where the field came from
        raise SampleError(f"{problem} (read from the row's fields {fields.prompt!r} and "
                          f"{fields.completion!r}; choose them with --prompt-field and "
                          "--completion-field)")
    return sample


def reward_info(score: Score) -> dict[str, Any]:
    """What goes into the ``<field>_info`` column: components, steps, uncertainty, info."""
    out: dict[str, Any] = dict(score.info)
    if score.components:
        out["components"] = score.components
    if score.steps is not None:
        out["steps"] = score.steps
    if score.uncertainty is not None:
        out["uncertainty"] = score.uncertainty
    return out


def score_rows(scorer: Scorer, rows: list[dict[str, Any]], fields: Fields) -> list[tuple[float, dict]]:
    """(reward, reward_info) for each row; a bad row gets an error, never an exception."""
    results: list[tuple[float, dict] | None] = [None] * len(rows)
    samples: list[Sample] = []
    index: list[int] = []
    for i, row in enumerate(rows):
        try:
            samples.append(row_to_sample(row, fields))
            index.append(i)
        except SampleError as exc:
            bad = Score.from_error(exc, scorer.error_value)
            results[i] = (bad.value, reward_info(bad))
    for i, score in zip(index, scorer.score(samples)):
        results[i] = (score.value, reward_info(score))
    return results  # type: ignore[return-value]


# -- worker processes ------------------------------------------------------------------------
_worker: tuple[Scorer, Fields] | None = None


def _init_worker(spec: RewardSpec, fields: Fields, parent_pid: int) -> None:
    global _worker
    die_with_parent(parent_pid)
    _worker = (spec.build(), fields)


def die_with_parent(parent_pid: int) -> None:
    """End this worker process when the process that started it dies, even by SIGKILL.

    A killed ``rewardkit score`` cannot shut its pool down; without this its workers (and, through
    the pipe they inherit, multiprocessing's resource tracker) would wait for work forever. On
    Linux the kernel delivers SIGKILL on the parent's death (``prctl(PR_SET_PDEATHSIG)``);
    elsewhere a daemon thread polls the parent's pid. The check after arming closes the race of
    a parent that died before the call.
    """
    armed = False
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent_pid:
        os._exit(1)
    if not armed:
        import threading

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, name="rewardkit-parent-watch", daemon=True).start()


def _score_in_worker(rows: list[dict[str, Any]]) -> list[tuple[float, dict]]:
    assert _worker is not None
    return score_rows(_worker[0], rows, _worker[1])


# -- the run ---------------------------------------------------------------------------------
@dataclass
class ScoreJob:
    """One ``rewardkit score`` run. See :func:`run`."""

    input: str
    output: str
    reward: RewardSpec
    fields: Fields = Fields()
    input_format: str | None = None
    output_format: str | None = None
    split: str | None = None
    subset: str | None = None
    output_field: str = "reward"
    workers: int = 1
    chunk_size: int = 256
    overwrite: bool = False
    progress: bool = True

    def identity(self) -> dict[str, Any]:
        loc = self.input if self.input.startswith("hf:") else os.path.abspath(self.input)
        return {"input": loc, "split": self.split, "subset": self.subset,
                "reward": self.reward.describe(), "fields": asdict(self.fields),
                "output_field": self.output_field}


def _sidecar(output: str, suffix: str) -> Path:
    p = Path(output)
    return p.with_name(f".{p.name}.{suffix}")


def prompt_key(row: dict[str, Any], fields: Fields) -> str:
    """The row's prompt (read at a dotted ``fields.prompt`` as :func:`row_to_sample` reads it)
    as a string that tells groups apart; a row without a prompt gives ``"None"``."""
    try:
        p = get_field(row, fields.prompt)
    except KeyError:
        p = None
    return p if isinstance(p, str) else repr(p)


def chunks(rows: Iterator[dict[str, Any]], size: int, fields: Fields) -> Iterator[list[dict]]:
    """Chunks of about ``size`` rows, cut only where the prompt changes so that the completions
    of one prompt (a GRPO group) stay together for group normalisation. ``rewardkit score
    --ray`` cuts its shards here too, so both runs hand a reward the same chunks."""
    def key(row: dict) -> str:
        return prompt_key(row, fields)

    chunk: list[dict] = []
    for row in rows:
        if len(chunk) >= size and (key(row) != key(chunk[-1]) or len(chunk) >= 8 * size):
            yield chunk
            chunk = []
        chunk.append(row)
    if chunk:
        yield chunk


def run(job: ScoreJob, log: Any = sys.stderr) -> Summary:
    """Score every input row into the output; returns the summary of the whole output."""
    out_fmt = detect_format(job.output, job.output_format, output=True)
    if out_fmt == "hf":
        raise DataError("cannot write to the hub; choose an output file or folder")
    source = Source(job.input, detect_format(job.input, job.input_format), job.split, job.subset)
    if source.format != "hf" and not os.path.exists(source.location):
        raise PathError(f"input {job.input!r} does not exist")
    journal = Path(job.output) if out_fmt == "jsonl" else _sidecar(job.output, "partial.jsonl")
    state_path = _sidecar(job.output, "rewardkit-state.json")

    # Build the reward before touching any output, so a bad reward or option leaves no trace.
    try:
        scorer: Scorer | None = job.reward.build()
    except (TypeError, ValueError) as exc:  # a bad option value: a usage error, not a crash
        if isinstance(exc, ConfigError):
            raise
        prefix = f"reward {job.reward.name_or_config!r}"
        message = str(exc) if str(exc).startswith(prefix) else f"{prefix}: {exc}"
        raise ConfigError(message) from exc
    if job.workers > 1:  # each worker builds its own; this one only checked the spec
        scorer.close()
        scorer = None
    try:
        return _resume_or_start(job, scorer, source, out_fmt, journal, state_path, log)
    finally:
        if scorer is not None:
            scorer.close()


def _read_journal(journal: Path, summary: Summary, field_name: str) -> tuple[int, dict, dict]:
    """Count complete rows in the journal (feeding the summary) and cut a half-written tail.

    Returns (rows, first row, last row); the two rows let the caller check that the journal
    was written from the input it is about to continue."""
    if not journal.exists():
        return 0, {}, {}
    done = 0
    good_bytes = 0
    first: dict = {}
    last: dict = {}
    with open(journal, "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                break
            if not isinstance(row, dict):
                break
            summary.add(row.get(field_name), (row.get(f"{field_name}_info") or {}))
            if not done:
                first = row
            last = row
            done += 1
            good_bytes += len(line)
    if good_bytes != journal.stat().st_size:
        with open(journal, "r+b") as f:
            f.truncate(good_bytes)
    return done, first, last


def _input_part(row: dict[str, Any], field_name: str) -> Any:
    """The input fields of a row as the journal stores them (JSON round trip, no reward)."""
    kept = {k: v for k, v in row.items()
            if k not in (BAD_ROW_KEY, field_name, f"{field_name}_info")}
    return json.loads(dumps(kept))


def read_state(state_path: Path, job: ScoreJob, identity: dict[str, Any],
               fp: dict[str, Any] | None) -> dict[str, Any] | None:
    """The state file of an earlier run of ``job`` (None when there is none), refused when it
    is unreadable or was written by another command or from another input. Local and Ray runs
    resume through it alike."""
    if not state_path.exists():
        return None
    try:
        state = json.loads(state_path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"state file {str(state_path)!r} is unreadable ({exc}); pass "
                        "--overwrite to start again") from exc
    check_state(job, state, identity, fp)
    return state


def check_state(job: ScoreJob, state: dict[str, Any], identity: dict[str, Any],
                fp: dict[str, Any] | None) -> None:
    """Refuse to continue an output written by another command or from another input."""
    if state.get("identity") != identity:
        old = state.get("identity") or {}
        # compared on what the older state recorded: a key it lacks is not a change
        now = {k: identity[k] for k in old if k in identity}
        if isinstance(old.get("reward"), dict) and isinstance(now.get("reward"), dict):
            now["reward"] = {k: v for k, v in now["reward"].items() if k in old["reward"]}
        changes = config_changes(old, now)
        if changes:
            raise DataError(
                f"{job.output!r} was written by a different run "
                f"({describe_changes(changes, 'then', 'now')}); pass --overwrite to start "
                "again or choose another output"
            )
    old = state.get("input_fingerprint")
    if old is not None and fp is not None:
        changes = fingerprint_changes(old, fp)
        if changes:
            raise DataError(
                f"input {job.input!r} changed since {job.output!r} was started "
                f"({'; '.join(changes)}); its rows would not match the rows already scored. "
                "Pass --overwrite to score the new input from the start, or choose another output"
            )


def _summary_of_finished_output(job: ScoreJob, out_fmt: str, source: Source) -> Summary:
    """A non-JSONL output marked complete: believe it only if it still holds every input row."""
    summary = Summary(job.reward.name_or_config)
    for row in read_rows(Source(job.output, out_fmt)):
        info = row.get(f"{job.output_field}_info") or {}
        if isinstance(info, str):
            try:
                info = json.loads(info)
            except json.JSONDecodeError:
                info = {"error": "unreadable reward_info", "error_kind": "bad_output"}
        summary.add(row.get(job.output_field), info)
    expected = count_rows(source)
    if expected is None:
        expected = sum(1 for _ in read_rows(source))
    if summary.count != expected:
        raise DataError(
            f"{job.output!r} is marked complete but holds {summary.count} rows for "
            f"{expected} input rows: it was changed after the run finished. Pass --overwrite "
            "to score it again"
        )
    summary.already_complete = True
    summary.resumed = summary.count
    return summary


def _resume_or_start(job: ScoreJob, scorer: Scorer | None, source: Source, out_fmt: str,
                     journal: Path, state_path: Path, log: Any) -> Summary:
    identity = job.identity()
    if job.overwrite:
        for p in (journal, state_path):
            p.unlink(missing_ok=True)
        if os.path.isfile(job.output):
            os.remove(job.output)
    fp = fingerprint(source)
    state = read_state(state_path, job, identity, fp)
    if state is not None:
        if state.get("complete") and out_fmt != "jsonl" and not journal.exists():
            return _summary_of_finished_output(job, out_fmt, source)
    elif os.path.exists(job.output):
        raise DataError(
            f"output {job.output!r} already exists and was not written by rewardkit score; "
            "pass --overwrite to replace it"
        )
    Path(job.output).parent.mkdir(parents=True, exist_ok=True)
    state_path.write_text(json.dumps({"identity": identity, "input_fingerprint": fp,
                                      "complete": False}))

    # The journal, not the state's flag, says how far the output got.
    summary = Summary(job.reward.name_or_config)
    done, first, last = _read_journal(journal, summary, job.output_field)
    summary.resumed = done
    total = count_rows(source) if job.progress else None
    rows = read_rows(source)
    for i in range(done):
        row = next(rows, None)
        if row is None:
            raise DataError(
                f"{job.output!r} holds {done} rows but input {job.input!r} has only {i}; pass "
                "--overwrite to score the input again"
            )
        if i in (0, done - 1) and _input_part(row, job.output_field) != _input_part(
                first if i == 0 else last, job.output_field):
            raise DataError(
                f"row {i + 1} of {job.output!r} does not hold row {i + 1} of input "
                f"{job.input!r}: the output was written from other data. Pass --overwrite to "
                "score the input again"
            )

    bar = None
    if job.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=done, unit="rows", desc="scoring", file=log,
                   dynamic_ncols=True, smoothing=0.1)
    start = time.perf_counter()
    pool = None
    try:
        with progress_output(), open(journal, "a", encoding="utf-8") as out:
            def emit(chunk: list[dict], results: list[tuple[float, dict]]) -> None:
                lines = []
                for row, (value, info) in zip(chunk, results):
                    summary.add(value, info)
                    row = {k: v for k, v in row.items() if k != BAD_ROW_KEY}
                    row[job.output_field] = value
                    row[f"{job.output_field}_info"] = info
                    lines.append(dumps(row))
                out.write("\n".join(lines) + "\n")
                out.flush()
                if bar is not None:
                    bar.update(len(chunk))

            batches = chunks(rows, job.chunk_size, job.fields)
            if scorer is not None:
                for chunk in batches:
                    emit(chunk, score_rows(scorer, chunk, job.fields))
            else:
                pool = ProcessPoolExecutor(job.workers, mp_context=get_context("spawn"),
                                           initializer=_init_worker,
                                           initargs=(job.reward, job.fields, os.getpid()))
                _run_pool(pool, batches, job.workers * 2, emit)
    finally:
        if bar is not None:
            bar.close()
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    summary.elapsed_s = time.perf_counter() - start
    summary.already_complete = done > 0 and summary.count == done
    if out_fmt != "jsonl":
        write_rows(_journal_rows(journal), job.output, out_fmt)
        journal.unlink()
    state_path.write_text(json.dumps({"identity": identity, "input_fingerprint": fp,
                                      "complete": True, "rows": summary.count}))
    return summary


def _run_pool(pool: ProcessPoolExecutor, chunks: Iterable[list[dict]], window: int,
              emit: Any) -> None:
    """Keep ``window`` chunks in flight and emit results in input order."""
    pending: deque[tuple[list[dict], Future]] = deque()
    for chunk in chunks:
        pending.append((chunk, pool.submit(_score_in_worker, chunk)))
        if len(pending) >= window:
            c, fut = pending.popleft()
            emit(c, fut.result())
    while pending:
        c, fut = pending.popleft()
        emit(c, fut.result())


def _journal_rows(journal: Path) -> Iterator[dict[str, Any]]:
    with open(journal, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)
