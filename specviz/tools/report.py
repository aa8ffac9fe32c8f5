"""`specviz report`: why a draft's acceptance is low, over a set of prompts, as one self-contained HTML file.

    specviz report traces.jsonl --out report.html
    specviz report a.jsonl --compare b.jsonl --out ab.html          # an A/B of two runs over the same prompts
    specviz report bench.json#bf16-T0-dyspec:4+eagle --out r.html   # one setting of `bench --traces DIR`

The file opens offline (plotly is inlined once); each named prompt carries its trace, which the dashboard's
Trace files > Import opens round by round.
"""

from __future__ import annotations

import argparse
import base64
import html
import sys
from pathlib import Path

import plotly.graph_objects as go

from specviz.analysis.compare import Comparison, Pairing, compare
from specviz.analysis.promptset import pooled, position_acceptance, prompt_rows, worst_prompts
from specviz.analysis.runset import PromptRun, RunSet, pool, read_runset
from specviz.core.args import output_file, positive
from specviz.core.output import replacing
from specviz.viz.promptset import ab_figure, disagreement_html, set_figures, token_chip

CSS = """
body{font-family:Inter,system-ui,-apple-system,Segoe UI,sans-serif;color:#1f2937;max-width:1100px;margin:24px auto;
padding:0 16px;line-height:1.45}
h1{font-size:24px;margin-bottom:4px} h2{font-size:19px;margin-top:36px;border-bottom:1px solid #e5e7eb}
.sub{color:#64748b;font-size:14px} .cards{display:flex;gap:12px;flex-wrap:wrap;margin:12px 0}
.card{border:1px solid #e5e7eb;border-radius:8px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:20px} .card span{color:#64748b;font-size:12px}
table{border-collapse:collapse;font-size:13px;margin:8px 0} td,th{border-bottom:1px solid #eef2f7;padding:4px 8px;
text-align:left;vertical-align:top} th{color:#475569} td.n{text-align:right;font-variant-numeric:tabular-nums}
code,.sv-tok{font-family:ui-monospace,Menlo,monospace;background:#f1f5f9;border-radius:4px;padding:0 3px}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:8px} .sv-ctx{color:#64748b}
.bad{color:#dc2626} .good{color:#16a34a} details{margin:6px 0}
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{value}</b><span>{_e(label)}</span></div>'


def _download(run: PromptRun, name: str) -> str:
    data = base64.b64encode(run.trace.to_json().encode()).decode()
    return f'<a download="{_e(name)}.json" href="data:application/json;base64,{data}">trace</a>'


class Page:
    """An HTML page with plotly inlined once (the first figure carries the library)."""

    def __init__(self, title: str):
        self.parts: list[str] = [f"<h1>{_e(title)}</h1>"]
        self._js = True

    def add(self, text: str) -> None:
        self.parts.append(text)

    def figure(self, fig: go.Figure) -> None:
        self.parts.append(fig.to_html(full_html=False, include_plotlyjs=self._js, config={"displaylogo": False}))
        self._js = False

    def figures(self, figs: list[go.Figure]) -> None:
        self.add('<div class="grid">')
        for f in figs:
            self.add("<div>")
            self.figure(f)
            self.add("</div>")
        self.add("</div>")

    def html(self) -> str:
        body = "\n".join(self.parts)
        return (
            f'<!doctype html><html><head><meta charset="utf-8"><title>specviz report</title>'
            f"<style>{CSS}</style></head><body>{body}</body></html>"
        )


def _models(rs: RunSet) -> str:
    m = rs.runs[0].trace.models or {}
    bits = [f"target {m['target']}" if m.get("target") else "", f"drafter {m['drafter']}" if m.get("drafter") else ""]
    bits += [str(m.get("dtype") or ""), str(m.get("device") or "")]
    t = rs.temperature
    bits.append(f"T = {t:g}" if t is not None else "")
    return " · ".join(b for b in bits if b)


def set_section(page: Page, rs: RunSet, worst: int) -> None:
    head = pooled(rs)
    first = position_acceptance(rs)["all"][:1]  # [(1, reached, accepted)] where anything was drafted
    page.add(f'<p class="sub">{_e(rs.label)}: method <code>{_e(rs.method)}</code> · {_e(_models(rs))}</p>')
    page.add(
        '<div class="cards">'
        + _card(str(head["prompts"]), "prompts")
        + _card(str(head["tokens"]), "tokens")
        + _card(f"{head['tau']:.2f}", "τ, tokens per target call")
        + _card(f"{head['tokens_per_s']:.1f}", "tokens/s (prefill included)")
        + "".join(_card(f"{a / max(1, n):.0%}", "accepted at position 1") for _, n, a in first)
        + "</div>"
    )
    figs = set_figures(rs)
    page.figure(figs.pop("positions"))
    page.figures([figs.pop("tau"), figs.pop("time")])
    page.add("<h2>Where the draft and the target part</h2>")
    page.add(
        '<p class="sub">Per round whose accepted path ended at a node with drafted children, all rejected: the '
        "draft's most probable child there against the token the target put in its place.</p>"
    )
    page.add(disagreement_html(rs))
    page.add("<h2>What predicts acceptance</h2>")
    page.figures([figs.pop("q"), figs.pop("target")])
    page.figures([figs.pop(k) for k in list(figs)])
    page.add(f"<h2>The {worst} prompts with the lowest τ</h2>")
    page.add('<p class="sub">Each trace opens in the dashboard (Trace files → Import trace), round by round.</p>')
    table = prompt_rows(rs)
    lines = []
    for i in worst_prompts(table, worst):
        r, row = rs.runs[i], table[i]
        lines.append(
            f"<tr><td>{_e(r.qid)}</td><td>{_e(r.category)}</td><td class='n'>{row.tau:.2f}</td>"
            f"<td class='n'>{row.tokens_per_s:.1f}</td><td>{_e(row.prompt[:120])}</td>"
            f"<td>{_download(r, f'{rs.method}-{r.qid}')}</td></tr>"
        )
    page.add(
        "<table><tr><th>prompt</th><th>category</th><th>τ</th><th>tokens/s</th><th>text</th><th></th></tr>"
        + "".join(lines)
        + "</table>"
    )
    per_cat = {}
    for row in table:
        per_cat.setdefault(row.category, []).append(row)
    if len(per_cat) > 1:
        page.add("<h2>Per category</h2><table><tr><th>category</th><th>prompts</th><th>τ</th><th>tokens/s</th></tr>")
        for c, rows_c in sorted(per_cat.items()):
            tau = sum(x.tau for x in rows_c) / len(rows_c)
            tps = sum(x.tokens_per_s for x in rows_c) / len(rows_c)
            page.add(
                f"<tr><td>{_e(c)}</td><td class='n'>{len(rows_c)}</td><td class='n'>{tau:.2f}</td>"
                f"<td class='n'>{tps:.1f}</td></tr>"
            )
        page.add("</table>")


def _signed(x: float, fmt: str) -> str:
    cls = "good" if x > 0 else "bad" if x < 0 else ""
    return f'<span class="{cls}">{x:{fmt}}</span>'


def ab_section(page: Page, cmp: Comparison, a: RunSet, b: RunSet, most: int) -> None:
    page.add(f"<h2>A/B: B = {_e(cmp.b)} against A = {_e(cmp.a)}</h2>")
    page.add(f'<p class="sub">A: {_e(a.method)} · {_e(_models(a))}<br>B: {_e(b.method)} · {_e(_models(b))}</p>')
    t, s = cmp.tau, cmp.tokens_per_s
    page.add(
        "<table><tr><th></th><th>mean B − A over prompts</th><th>95 % interval (paired bootstrap)</th></tr>"
        f"<tr><td>τ</td><td class='n'>{_signed(t.mean, '+.3f')}</td><td>{t.lo:+.3f} to {t.hi:+.3f}"
        f"{' (excludes 0)' if t.excludes_zero else ''}</td></tr>"
        f"<tr><td>tokens/s</td><td class='n'>{_signed(s.mean, '+.2f')}</td><td>{s.lo:+.2f} to {s.hi:+.2f}"
        f"{' (excludes 0)' if s.excludes_zero else ''}</td></tr></table>"
    )
    page.add(f'<p class="sub">{t.n} prompts paired; {cmp.unpaired} of A\'s have no partner in B.</p>')
    page.figure(ab_figure(cmp))
    page.add(f"<h3>The {most} prompts where τ differs most</h3>")
    rows = [_ab_row(p) for p in cmp.most_different(most)]
    page.add(
        "<table><tr><th>prompt</th><th>category</th><th>τ A → B</th><th>tokens/s A → B</th><th>outputs</th>"
        "<th>traces</th></tr>" + "".join(rows) + "</table>"
    )
    diffs = cmp.output_differences
    page.add(f"<h3>Outputs: {len(cmp.pairs) - len(diffs)} of {len(cmp.pairs)} prompts identical</h3>")
    if diffs:
        page.add("<table><tr><th>prompt</th><th>first differing position</th><th>A there</th><th>B there</th></tr>")
        for p, pos in diffs[:50]:
            ta, tb = p.a.trace, p.b.trace
            xa = token_chip(a, ta.output_ids[pos]) if pos < len(ta.output_ids) else "(ended)"
            xb = token_chip(b, tb.output_ids[pos]) if pos < len(tb.output_ids) else "(ended)"
            page.add(f"<tr><td>{_e(p.qid)}</td><td class='n'>{pos}</td><td>{xa}</td><td>{xb}</td></tr>")
        page.add("</table>")


def _ab_row(p: Pairing) -> str:
    (ta, tb), (sa, sb) = p.tau, p.tokens_per_s
    first = p.first_difference
    same = "identical" if first is None else f"differ from position {first}"
    links = f"A {_download(p.a, f'A-{p.qid}')} · B {_download(p.b, f'B-{p.qid}')}"
    return (
        f"<tr><td>{_e(p.qid)}</td><td>{_e(p.category)}</td><td class='n'>{ta:.2f} → {tb:.2f}</td>"
        f"<td class='n'>{sa:.1f} → {sb:.1f}</td><td>{same}</td><td>{links}</td></tr>"
    )


def build(a: RunSet, b: RunSet | None = None, worst: int = 5, seed: int = 0) -> str:
    """The report's HTML for one set, or for an A/B of two."""
    page = Page("specviz report: acceptance over a prompt set" if b is None else "specviz report: A/B")
    if b is not None:
        cmp = compare(a, b, seed)
        ab_section(page, cmp, a, b, worst)
        page.add(f"<h2>A: {_e(a.label)}</h2>")
    set_section(page, a, worst)
    if b is not None:
        page.add(f"<h2>B: {_e(b.label)}</h2>")
        set_section(page, b, worst)
    return page.html()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specviz report", description=__doc__.split("\n\n")[0])
    p.add_argument("traces", help="JSON-lines traces (generate --prompts ... --out), or BENCH.json#LABEL")
    p.add_argument("more", nargs="*", help="more JSON-lines files of the same method, pooled with the first")
    p.add_argument("--compare", default=None, help="B of an A/B: a second run over the same prompts")
    p.add_argument("--out", type=output_file, required=True, help="the HTML file to write")
    p.add_argument("--worst", type=positive(int), default=5, help="prompts named as the worst, and as most different")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        runs = pool([read_runset(x) for x in [a.traces, *a.more]])
        other = read_runset(a.compare) if a.compare else None
        page = build(runs, other, a.worst, a.seed)
    except (ValueError, OSError) as e:
        print(f"specviz report: error: {e}", file=sys.stderr)
        return 2
    with replacing(a.out) as f:
        f.write(page)
    print(f"specviz report: wrote {a.out} ({Path(a.out).stat().st_size / 1e6:.1f} MB)", file=sys.stderr)
    return 0
