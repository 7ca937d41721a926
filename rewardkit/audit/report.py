"""The audit's three outputs: the family table printed at the end, the JSON file, and the
self-contained HTML page (the same page style as ``rewardkit score --report``)."""
from __future__ import annotations

import html
from pathlib import Path

from ..dataio import dumps
from ..report import PAGE
from .runner import HONEST, AuditResult, FamilyResult


def _rate(f: FamilyResult) -> str:
    if f.rate is None or f.rate_ci is None:
        return "—"
    return f"{f.rate:6.1%} [{f.rate_ci[0]:.0%}, {f.rate_ci[1]:.0%}]"


def _mean(f: FamilyResult) -> str:
    return "—" if f.mean is None else f"{f.mean:.3g}"


def _mark(f: FamilyResult) -> str:
    if f.rate is None:
        return "n/a"
    if f.ok:
        return "ok"
    return "FALSE ZEROS" if f.role == HONEST else "PAID"


def header(result: AuditResult) -> str:
    """What was audited and how a variant counts as paid."""
    if result.kind == "learned":
        rule = "an attack is paid when it scores above its row's plain reference"
    elif not result.top or result.top <= 0:
        rule = ("the reward paid no plain right answer (top 0), so any value above 0 counts "
                "as paid; check the reference and answer fields, or give --top")
    else:
        rule = (f"paid = value >= {result.threshold:.4g} ({result.options.pay_level:g} x top "
                f"{result.top:.4g})")
    return (f"audit of {result.reward} ({result.kind} reward): {result.rows} rows, "
            f"{result.variants:,} variants, {len(result.families)} families; {rule}")


def format_table(result: AuditResult) -> str:
    """The family table, honest families first, then the verdict line of each failure."""
    mean_title = "mean Δ" if result.kind == "learned" else "mean"
    cols = ("family", "role", "variants", "paid [95% CI]", mean_title, "errors", "verdict")
    rows = [(f.name, f.role, str(f.variants), _rate(f), _mean(f), str(f.errors), _mark(f))
            for f in sorted(result.families, key=lambda f: f.role != HONEST)]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    lines = [header(result), ""]
    lines.append("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    failing = [f for f in result.families if not f.ok]
    lines.append("")
    for f in failing:
        lines.append(f"{f.name}: {f.verdict}")
        if f.examples:
            ex = f.examples[0]
            text = " ".join(ex["completion"].split())
            text = text if len(text) <= 140 else text[:139] + "…"
            why = ex["info"].get("reason") or ex["info"].get("error") or ""
            lines.append(f"    e.g. value {ex['value']:.4g}{f' ({why})' if why else ''}: {text}")
    passed = len(result.families) - len(failing)
    lines.append(f"{passed} of {len(result.families)} families pass; "
                 + ("the reward passes the audit" if result.ok else
                    f"{len(failing)} fail (exit status 3)"))
    return "\n".join(lines)


def write_json(result: AuditResult, path: str | Path) -> Path:
    """The whole result (every family, its figures, verdict and worst examples) as JSON."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(dumps(result.to_dict(), indent=1) + "\n", encoding="utf-8")
    return target


def _cell(text: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{html.escape(text)}</td>"


def build_html(result: AuditResult) -> str:
    """The page: the header, the family table (verdicts coloured), then per family its line
    of documentation, verdict, component means and worst examples with their ``Score.info``."""
    title = f"rewardkit audit: {result.reward}"
    parts = [f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(header(result))}</p>",
             f'<p class="{"pass" if result.ok else "fail"}">'
             f'{"passes the audit" if result.ok else "fails the audit"}</p>',
             '<table class="families"><thead><tr><th>family</th><th>role</th><th>variants</th>'
             "<th>paid [95% CI]</th><th>mean</th><th>errors</th><th>verdict</th></tr></thead>"
             "<tbody>"]
    for f in sorted(result.families, key=lambda f: f.role != HONEST):
        mark = _mark(f)
        parts.append(f'<tr data-family="{html.escape(f.name)}" data-role="{f.role}" '
                     f'data-rate="{"" if f.rate is None else f"{f.rate:.6g}"}">'
                     f'<td><a href="#{html.escape(f.name)}">{html.escape(f.name)}</a></td>'
                     + _cell(f.role) + _cell(str(f.variants)) + _cell(_rate(f))
                     + _cell(_mean(f)) + _cell(str(f.errors))
                     + _cell(mark, "bad" if mark in ("PAID", "FALSE ZEROS") else "") + "</tr>")
    parts.append("</tbody></table>")
    for f in result.families:
        parts.append(f'<h2 id="{html.escape(f.name)}">{html.escape(f.name)} '
                     f"<small>({f.role})</small></h2>")
        parts.append(f"<p>{html.escape(f.doc)}</p><p><b>{html.escape(f.verdict)}</b></p>")
        if f.components:
            comps = ", ".join(f"{k} {v:.3g}" for k, v in f.components.items())
            parts.append(f"<p>component means: {html.escape(comps)}</p>")
        if f.first_error:
            parts.append(f"<p>first error: {html.escape(f.first_error)}</p>")
        for ex in f.examples:
            label = "finding" if ex["finding"] else "closest"
            parts.append(f'<div class="example"><p>{label}, row {ex["row"]}, value '
                         f'{ex["value"]:.4g}</p><pre>{html.escape(ex["completion"][:600])}</pre>'
                         f'<pre class="info">{html.escape(dumps(ex["info"], indent=1))}</pre>'
                         "</div>")
    style = ("<style>td.bad, .fail { color: #b00; font-weight: 600; } .pass { color: #070; "
             "font-weight: 600; } pre { white-space: pre-wrap; background: #f6f6f6; "
             "padding: .4em; } pre.info { font-size: 12px; }</style>")
    return PAGE.format(title=html.escape(title), body=style + "\n".join(parts))


def write_html(result: AuditResult, path: str | Path) -> Path:
    """Write :func:`build_html` to ``path`` (a path ending in .html)."""
    target = Path(path)
    if target.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"--report writes an HTML page: give a path ending in .html, got "
                         f"{str(path)!r}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(build_html(result), encoding="utf-8")
    return target
