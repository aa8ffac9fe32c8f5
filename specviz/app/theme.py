"""The dashboard's look: the header's HTML and the page's CSS."""

from __future__ import annotations

HEADER = """
<div class="sv-header">
  <h1>specviz <span>see speculative decoding, round by round</span></h1>
  <p>A small <b>draft</b> model guesses the next few tokens; the big <b>target</b> model checks all of them in
  <b>one</b> forward pass and keeps the longest prefix it agrees with, plus one token of its own. Press
  <b>Run</b> and watch each round's draft tree: <span class="sv-chip" style="background:#16a34a">accepted</span>
  <span class="sv-chip" style="background:#dc2626">rejected</span>
  <span class="sv-chip" style="background:#cbd5e1;color:#334155">not reached</span>
  <span class="sv-chip" style="background:#2563eb">bonus</span>
  <span class="sv-chip" style="background:#f59e0b">resampled</span>. Hover a token for its draft probability q,
  target probability p and acceptance ratio min(1, p/q); click it to see why it was kept or rejected.</p>
</div>
"""


CSS = """
.gradio-container {max-width: 1480px !important}
.sv-header h1 {font-size: 1.7rem; margin: 0 0 .2rem 0}
.sv-header h1 span {font-weight: 400; color: #64748b; font-size: 1.05rem; margin-left: .4rem}
.sv-header p {margin: 0; color: #334155; line-height: 1.55}
.sv-chip {color: white; border-radius: 6px; padding: 1px 7px; font-size: .85rem; white-space: nowrap}
.sv-cards {display: flex; flex-wrap: wrap; gap: 10px; align-items: stretch}
.sv-method {flex-basis: 100%; font-weight: 600; color: #334155}
.sv-card {flex: 1 1 120px; background: #f8fafc; border: 1px solid #e2e8f0; border-radius: 10px; padding: 10px 14px}
.sv-value {font-size: 1.6rem; font-weight: 700; color: #1e3a8a; line-height: 1.2}
.sv-label {font-size: .8rem; color: #64748b}
#sv-status {min-height: 1.5rem; color: #475569}
#sv-stepper {align-items: center}
#sv-output {max-height: 340px; overflow-y: auto}
.sv-hidden {display: none !important}
#sv-tree .js-plotly-plot .scatterlayer .points path {cursor: pointer}
#sv-inspect {width: 100%; flex-grow: 1}
.sv-inspect {box-sizing: border-box; width: 100%; border: 1px solid #e2e8f0; border-radius: 10px}
.sv-inspect {padding: 10px 14px; background: #fcfdfe; font-size: .92rem}
.sv-inspect p {margin: .35rem 0}
.sv-inspect-head {font-weight: 600; color: #334155}
.sv-tops {display: flex; flex-wrap: wrap; gap: 12px; margin: .4rem 0}
.sv-top {flex: 1 1 230px}
.sv-top-title {font-weight: 600; color: #475569; font-size: .85rem; margin-bottom: .2rem}
.sv-top table, .sv-kv {border-collapse: collapse; width: 100%; font-size: .85rem}
.sv-top td, .sv-kv td {padding: 1px 6px; white-space: nowrap}
.sv-top td:first-child {font-family: DejaVu Sans Mono, Menlo, monospace}
.sv-top td:last-child {width: 45%}
.sv-mark {background: #fef3c7; font-weight: 600}
.sv-bar {display: inline-block; height: 10px; border-radius: 3px}
.sv-block {margin: .4rem 0; padding: 6px 10px; background: #f8fafc; border-radius: 8px}
.sv-small {font-size: .82rem; color: #64748b}
.sv-lacks {margin-top: .4rem; font-size: .82rem; color: #92400e}
"""


# A click on a point of the tree plot writes its customdata (a node, "correction" or a folded group) into the
# hidden #sv-pick textbox, whose change event calls the inspector; the time keeps two clicks on one node distinct.
# Re-hooked whenever plotly draws the figure anew.
CLICK_JS = """
() => {
  const pick = (ev) => {
    const pt = ev && ev.points && ev.points[0];
    const box = document.querySelector('#sv-pick textarea, #sv-pick input');
    if (!pt || pt.customdata === undefined || pt.customdata === null || !box) return;
    box.value = String(pt.customdata) + '@' + Date.now();
    box.dispatchEvent(new Event('input', {bubbles: true}));
  };
  const hook = () => {
    const plot = document.querySelector('#sv-tree .js-plotly-plot');
    if (!plot || !plot.on || plot.__svLayout === plot._fullLayout) return;
    if (plot.removeListener) plot.removeListener('plotly_click', pick);
    plot.on('plotly_click', pick);
    plot.__svLayout = plot._fullLayout;
  };
  setInterval(hook, 400);
}
"""
