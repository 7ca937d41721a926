"""Reading and writing rows for offline scoring: JSONL, JSON, CSV, Parquet, `datasets` folders
saved with ``save_to_disk``, and hub datasets (``hf:NAME``) for users with hub access.

Rows are plain dicts. Readers stream where the format allows (JSONL, CSV, Parquet) so a large
file is never held in memory twice.
"""
from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

FORMATS = ("jsonl", "json", "csv", "parquet", "datasets", "hf")
_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv",
           ".parquet": "parquet", ".pq": "parquet"}
BAD_ROW_KEY = "_rewardkit_bad_row"
DEFAULT_SPLIT = "train"
"""The split read from a ``datasets`` folder with several splits (or ``hf:NAME``) when none is
named, as ``--split`` documents."""


class DataError(ValueError):
    """Input or output cannot be read or written; the message names the file and the problem."""


class PathError(DataError):
    """A path as given cannot be used: the input does not exist, or a file's format cannot be
    told from its name. A usage error (the command line must change), where a plain
    :class:`DataError` is a failure while reading or writing."""


@dataclass(frozen=True)
class Source:
    """Where rows come from: a path (or ``hf:NAME``) and its format."""

    location: str
    format: str
    split: str | None = None
    subset: str | None = None


def detect_format(location: str | os.PathLike, fmt: str | None = None,
                  output: bool = False) -> str:
    """The format of a path, from ``fmt`` if given, else its suffix or folder layout. An output
    path without a suffix is a ``datasets`` folder."""
    loc = str(location)
    if fmt:
        if fmt not in FORMATS:
            raise PathError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt
    if loc.startswith("hf:"):
        return "hf"
    path = Path(loc)
    if path.is_dir() or loc.endswith(os.sep):
        return "datasets"
    suffix = path.suffix.lower()
    if suffix in _SUFFIX:
        return _SUFFIX[suffix]
    if output and not suffix:
        return "datasets"
    raise PathError(
        f"cannot tell the format of {loc!r} from its name; use a .jsonl, .json, .csv or .parquet "
        "suffix, a folder saved with datasets' save_to_disk, hf:NAME, or pass --input-format"
    )


def get_field(row: Mapping[str, Any], path: str) -> Any:
    """``row["a"]["b"]`` for the dotted path ``a.b``; a key containing dots wins if present.

    Raises KeyError naming the missing part.
    """
    if path in row:
        return row[path]
    cur: Any = row
    for part in path.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, (list, tuple)) and part.lstrip("-").isdigit():
            try:
                cur = cur[int(part)]
            except IndexError:
                raise KeyError(f"field {path!r}: index {part} out of range") from None
        else:
            have = sorted(cur)[:12] if isinstance(cur, Mapping) else type(cur).__name__
            raise KeyError(f"field {path!r} not found (no {part!r}; available: {have})")
    return cur


# -- reading ---------------------------------------------------------------------------------
def count_rows(source: Source) -> int | None:
    """Number of rows, when cheap to know (used for the progress bar)."""
    try:
        if source.format == "jsonl":
            with open(source.location, "rb") as f:
                return sum(1 for line in f if line.strip())
        if source.format == "parquet":
            import pyarrow.parquet as pq

            return pq.ParquetFile(source.location).metadata.num_rows
        if source.format == "datasets":
            return len(_load_saved_dataset(source))
    except Exception:  # noqa: BLE001 - a count is only for the progress bar
        return None
    return None


def read_rows(source: Source) -> Iterator[dict[str, Any]]:
    """Rows of a source, in order. A line of JSONL that is not a JSON object becomes a row
    ``{BAD_ROW_KEY: reason}`` so it is scored as an error instead of stopping the run."""
    fmt = source.format
    if fmt != "hf" and not os.path.exists(source.location):
        raise PathError(f"input {source.location!r} does not exist")
    try:
        if fmt == "jsonl":
            yield from read_jsonl(source.location)
        elif fmt == "json":
            yield from _read_json(source.location)
        elif fmt == "csv":
            with open(source.location, newline="", encoding="utf-8") as f:
                for row in csv.DictReader(f):
                    yield {k: _maybe_json(v) for k, v in row.items()}
        elif fmt == "parquet":
            yield from _read_parquet(source.location)
        elif fmt in ("datasets", "hf"):
            yield from _load_saved_dataset(source)
        else:
            raise DataError(f"cannot read format {fmt!r}")
    except DataError:
        raise
    except UnicodeDecodeError as exc:
        raise DataError(f"input {source.location!r} is not UTF-8 text ({exc})") from exc
    except (OSError, ValueError) as exc:
        raise DataError(f"input {source.location!r} could not be read as {fmt}: {exc}") from exc


def read_jsonl(path: str, offset: int = 0, first_lineno: int = 1) -> Iterator[dict[str, Any]]:
    """Rows of a JSONL file; ``offset`` (a byte position at a line start, with its line number
    ``first_lineno``) lets a shard of the file be read without parsing what comes before."""
    with open(path, encoding="utf-8") as f:
        f.seek(offset)
        for lineno, line in enumerate(f, first_lineno):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                yield {BAD_ROW_KEY: f"line {lineno} is not valid JSON ({exc.msg}: line {lineno} "
                                    f"column {exc.colno}, char {exc.pos})"}
                continue
            yield row if isinstance(row, dict) else {
                BAD_ROW_KEY: f"line {lineno} is a JSON {type(row).__name__}, not an object"}


def _read_json(path: str) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as exc:
            raise DataError(f"input {path!r} is not valid JSON: {exc}") from exc
    if isinstance(data, dict):  # {"data": [...]} / {"rows": [...]}
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise DataError(f"input {path!r}: expected a JSON list of objects (or an object "
                            "holding exactly one such list)")
        data = lists[0]
    if not isinstance(data, list):
        raise DataError(f"input {path!r}: expected a JSON list of objects")
    for i, row in enumerate(data):
        yield row if isinstance(row, dict) else {
            BAD_ROW_KEY: f"item {i} is a JSON {type(row).__name__}, not an object"}


def _read_parquet(path: str) -> Iterator[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise DataError("reading Parquet needs pyarrow: pip install 'rewardkit[io]'") from exc
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
        yield from batch.to_pylist()


def _load_saved_dataset(source: Source) -> Any:
    try:
        import datasets
    except ImportError as exc:
        raise DataError("datasets input needs the datasets package: "
                        "pip install 'rewardkit[io]'") from exc
    if source.format == "hf":
        name = source.location[3:]
        return datasets.load_dataset(name, source.subset, split=source.split or DEFAULT_SPLIT)
    ds = datasets.load_from_disk(source.location)
    if isinstance(ds, datasets.DatasetDict):
        split = source.split or DEFAULT_SPLIT
        if split not in ds:
            if source.split is None:
                raise DataError(f"{source.location!r} holds splits {list(ds)} and no "
                                f"{DEFAULT_SPLIT!r}; choose one with --split")
            raise DataError(f"{source.location!r} has no split {source.split!r}; it has {list(ds)}")
        return ds[split]
    return ds


def _maybe_json(value: str | None) -> Any:
    """CSV cells that hold JSON objects/lists (as we write them) are decoded back."""
    if value and value[0] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


# -- fingerprints -----------------------------------------------------------------------------
FULL_HASH_BYTES = 64 << 20
"""Files up to this size are hashed whole; larger ones by sampled blocks (plus size and mtime)."""
_SAMPLE_BLOCKS, _BLOCK = 32, 1 << 16


def fingerprint(source: Source) -> dict[str, Any] | None:
    """What identifies the *content* of an input, so a resumed run can tell that the file
    behind the same path was rewritten: per file its size, and a SHA-256 of the whole file when
    it is at most :data:`FULL_HASH_BYTES`, else of 32 evenly spaced 64 KiB blocks plus the first
    and last block together with the modification time (a sampled hash alone could miss an
    in-place edit of the same size). A ``datasets`` folder is fingerprinted file by file; hub
    datasets (``hf:``) have none."""
    if source.format == "hf":
        return None
    root = Path(source.location)
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    return {str(p.relative_to(root)) if root.is_dir() else p.name: _file_fingerprint(p)
            for p in files}


def _file_fingerprint(path: Path) -> dict[str, Any]:
    import hashlib

    st = path.stat()
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        if st.st_size <= FULL_HASH_BYTES:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
            return {"size": st.st_size, "sha256": digest.hexdigest()}
        step = st.st_size // _SAMPLE_BLOCKS
        for offset in [*range(0, st.st_size, step)][:_SAMPLE_BLOCKS] + [st.st_size - _BLOCK]:
            f.seek(offset)
            digest.update(f.read(_BLOCK))
    return {"size": st.st_size, "sampled_sha256": digest.hexdigest(), "mtime_ns": st.st_mtime_ns}


def fingerprint_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two :func:`fingerprint` results (empty: unchanged)."""
    changes = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        if a is None or b is None:
            changes.append(f"{name} was {'added' if a is None else 'removed'}")
        elif a.get("size") != b.get("size"):
            changes.append(f"{name}: size {a.get('size')} -> {b.get('size')} bytes")
        elif a.get("sha256", a.get("sampled_sha256")) != b.get("sha256", b.get("sampled_sha256")):
            changes.append(f"{name}: same size, different content (SHA-256)")
        elif a.get("mtime_ns") != b.get("mtime_ns"):
            changes.append(f"{name}: modified since (mtime changed; too large to hash whole)")
        else:
            changes.append(f"{name}: fingerprint differs")
    return changes


# -- writing ---------------------------------------------------------------------------------
def json_shape(value: Any) -> Any:
    """``value`` with every tuple a list, recursively: the shape it has once written as JSON and
    read back (a config from a checkpoint, an expected value from a data set), so two values
    compare equal whichever way they came."""
    if isinstance(value, (list, tuple)):
        return [json_shape(v) for v in value]
    if isinstance(value, dict):
        return {k: json_shape(v) for k, v in value.items()}
    return value


def json_default(obj: Any) -> Any:
    """Values JSON does not know (numpy numbers and arrays, sets, tuples, objects) as plain
    values, for ``json.dumps(default=...)``."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)


def finite_only(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) ``None``, recursively; numpy numbers
    and arrays are read as plain values first (their ``tolist``)."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_only(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [finite_only(v) for v in value]
    return value


def dumps(value: Any, indent: int | None = None, ensure_ascii: bool = False) -> str:
    """Strict JSON: a non-finite number (a reward's ``info``, a missing cell read as NaN) is
    written ``null`` — ``NaN`` and ``Infinity`` are not JSON, and most readers outside Python
    refuse them; values JSON does not know as :func:`json_default` writes them."""
    try:
        return json.dumps(value, ensure_ascii=ensure_ascii, default=json_default, indent=indent,
                          allow_nan=False)
    except ValueError:
        return json.dumps(finite_only(value), ensure_ascii=ensure_ascii, default=json_default,
                          indent=indent, allow_nan=False)


def write_rows(rows: Iterator[dict[str, Any]], location: str, fmt: str) -> None:
    """Write all rows to ``location`` in ``fmt`` (atomically: to a temp name, then renamed)."""
    tmp = f"{location}.tmp-{os.getpid()}"
    try:
        if fmt == "jsonl":
            with open(tmp, "w", encoding="utf-8") as f:
                for row in rows:
                    f.write(dumps(row) + "\n")
        elif fmt == "json":
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(dumps(list(rows), indent=1))
        elif fmt == "csv":
            _write_csv(list(rows), tmp)
        elif fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(_flat_for_arrow(list(rows))), tmp)
        elif fmt == "datasets":
            import datasets

            datasets.Dataset.from_list(_flat_for_arrow(list(rows))).save_to_disk(tmp)
        else:
            raise DataError(f"cannot write format {fmt!r}; use jsonl, json, csv, parquet, datasets")
        if fmt == "datasets" and os.path.isdir(location):
            import shutil

            shutil.rmtree(location)
        os.replace(tmp, location)
    except ImportError as exc:
        raise DataError(f"writing {fmt} needs an extra: pip install 'rewardkit[io]' ({exc})") from exc
    finally:
        if os.path.isdir(tmp):
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.exists(tmp):
            os.remove(tmp)


def _write_csv(rows: list[dict[str, Any]], path: str) -> None:
    fields: dict[str, None] = {}
    for row in rows:
        fields.update(dict.fromkeys(row))
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: dumps(v) if isinstance(v, (dict, list)) else v
                             for k, v in row.items()})


def _flat_for_arrow(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Arrow needs one type per column; ``*_info`` objects vary per row, so they are stored as
    JSON strings (decode with ``json.loads``)."""
    return [{k: dumps(v) if k.endswith("_info") else v for k, v in row.items()} for row in rows]
