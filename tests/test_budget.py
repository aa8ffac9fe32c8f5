"""Hardware-aware budget: the measured cost curve, its interpolation, the budget it picks, and its figure."""

import json

import pytest
from tiny import tiny_llama

from specviz.analysis.budget import level_draft_ms, pick_tree_budget, picks
from specviz.analysis.hardware import measure_curve, measure_pair
from specviz.core.curves import device_curve, interpolate, load_curves, local_record, pick_label, save_local
from specviz.models.eagle import EagleLM, build_eagle
from specviz.models.lm import LM
from specviz.viz.budget import budget_figure

P = (0.6, 0.2, 0.1, 0.05)


def record(target_ms, draft_ms=(1.0,) * 4):
    n = [1, 4, 16, 64]
    return {
        "dtype": "fp32",
        "context": 8,
        "target": {"n": n, "ms": list(target_ms)},
        "draft": {"n": n, "ms": list(draft_ms)},
    }


def test_measure_curve_times_every_size_and_leaves_the_cache_as_it_was():
    lm = LM(tiny_llama())
    c = measure_curve(lm, list(range(3, 20)), sizes=(1, 3, 8), repeats=2)
    assert c["n"] == [1, 3, 8] and len(c["ms"]) == 3 and all(x > 0 for x in c["ms"])
    assert lm.length == 17


def test_interpolate_is_linear_inside_and_extends_the_last_segment():
    c = {"n": [1, 4, 16], "ms": [10.0, 10.0, 34.0]}
    assert interpolate(c, 1) == 10 and interpolate(c, 2) == 10
    assert interpolate(c, 10) == pytest.approx(22.0) and interpolate(c, 28) == pytest.approx(58.0)


def test_a_flat_curve_buys_a_big_tree_and_a_steep_one_a_small_tree():
    flat = pick_tree_budget(record([50, 50, 52, 60]), P, max_depth=6, budgets=range(1, 33))
    steep = pick_tree_budget(record([50, 120, 400, 1500]), P, max_depth=6, budgets=range(1, 33))
    assert flat.budget > 12 and steep.budget <= 3
    best = max(flat.table, key=lambda r: r[3])
    assert best[0] == flat.budget and best[3] == flat.tokens_per_s


def test_level_draft_cost_is_one_forward_per_level():
    curve = {"n": [1, 2], "ms": [2.0, 3.0]}  # ms = n + 1
    assert level_draft_ms([-1, 0, 0, 1, 1, 3], curve) == 6.0  # levels with 1, 1, 1 parents
    assert level_draft_ms([-1, 0, 0, 1, 2], curve) == 5.0  # 1 parent, then 2 in one forward
    assert level_draft_ms([-1], curve) == 0.0


def test_budget_figure_draws_the_shipped_curve_and_a_placeholder():
    curves = load_curves()
    assert curves, "assets/verify_curve.json ships with the repo"
    fig = budget_figure(curves, "fp32")
    assert len(fig.data) >= 2
    json.loads(fig.to_json())
    assert not budget_figure({}).data


def test_the_eagle_drafter_is_timed_like_a_draft_and_leaves_its_cache_as_it_was():
    """`specviz budget` times the EAGLE drafter's tree forwards on a context it has no target features for."""
    e = EagleLM(build_eagle(tiny_llama()))
    c = measure_curve(e, list(range(3, 20)), sizes=(1, 3, 8), repeats=2)
    assert c["n"] == [1, 3, 8] and all(x > 0 for x in c["ms"])
    assert e.length == 17


SHIPPED = {
    "target": "smollm2-135m-instruct",
    "draft": "specviz default draft",
    "eagle": "specviz default EAGLE drafter",
}


def test_each_drafter_picks_its_budget_from_its_own_curve_and_acceptance():
    """The standalone draft keeps its "T=0" keys; the EAGLE drafter's picks read its acceptance vector and its
    curve: a drafter whose forward costs as much as the target's buys a smaller tree than a free one."""
    flat = [50, 50, 52, 60]
    cheap = {**record(flat), "eagle": {"n": [1, 4, 16, 64], "ms": [0.1] * 4}}
    dear = {**record(flat), "eagle": {"n": [1, 4, 16, 64], "ms": [50, 60, 80, 120]}}
    got = picks(cheap, SHIPPED, max_depth=8)
    assert set(got) == {"T=0", "T=1", "eagle T=0", "eagle T=1"}
    assert got["eagle T=0"]["drafter"] == "specviz default EAGLE drafter"
    assert got["eagle T=0"]["acceptance"] != got["T=0"]["acceptance"]
    assert picks(dear, SHIPPED, max_depth=8)["eagle T=0"]["budget"] < got["eagle T=0"]["budget"]
    assert set(picks(record(flat), SHIPPED, max_depth=8)) == {"T=0", "T=1"}  # no EAGLE curve: no EAGLE pick
    assert pick_label("T=0") == ("standalone draft", "T=0")
    assert pick_label("eagle T=1") == ("EAGLE drafter", "T=1")


def test_budget_figure_names_each_drafter():
    rec = {**record([50, 50, 52, 60]), "eagle": {"n": [1, 4, 16, 64], "ms": [2.0] * 4}}
    rec["picks"] = picks(rec, SHIPPED, max_depth=8)
    names = {t.name for t in budget_figure({"bf16": rec}).data}
    best = rec["picks"]["eagle T=0"]["budget"]
    assert f"EAGLE drafter, T=0: best {best}" in names and any(
        str(n).startswith("standalone draft, T=1") for n in names
    )
    assert {"standalone draft forward", "EAGLE drafter forward"} <= names


def test_a_pairs_own_measurement_on_this_machine_picks_its_budget_and_is_kept(tmp_path, monkeypatch, tiny_pair):
    """`measure_pair` on a loaded pair: its curves, its own acceptance vectors and the budgets they pick, kept as this
    machine's; the verify curve a copy extension reads is then this machine's, not the shipped one."""
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    pair = tiny_pair("random")
    pair.info.update(target="my/target", draft="my/draft", dtype="fp32", device="cpu", machine="a test box")
    seen = []
    record = measure_pair(pair, list(range(3, 40)), [[5, 9, 17], [8, 3, 2]], 8, 1, "wall", lambda f, w: seen.append(f))
    assert seen[0] == 0 and seen[-1] == 1.0 and seen == sorted(seen)
    assert set(record["acceptance"]) == {"T=0", "T=1"} and record["acceptance"]["T=0"]["rounds"] > 0
    assert set(record["picks"]) == {"T=0", "T=1"}  # picked from its own vectors: no shipped one names this pair
    assert record["picks"]["T=0"]["acceptance"] == record["acceptance"]["T=0"]["vector"]
    assert local_record(pair.info) is None and device_curve(pair.info) is None
    save_local(record)
    assert local_record(pair.info)["target"] == record["target"] == device_curve(pair.info)
    assert local_record({**pair.info, "machine": "another box"}) is None  # another machine's is not this one's
