"""The shipped lessons: each opens with no model loaded on a round that shows what its title says, and every
sampled round of their traces replays to the verdict the verifier recorded."""

import pytest

from specviz.analysis.lessons import KINDS, find
from specviz.analysis.verification import JUDGE, steps, verdicts
from specviz.app import files, knobs
from specviz.core.config import RunConfig
from specviz.core.trace import ACCEPTED, REJECTED
from specviz.methods.catalog import knob_values
from specviz.tools.lessons import LESSONS

SHIPPED = files.lessons()


def test_the_six_lessons_ship_in_order():
    assert [e["id"] for e in SHIPPED] == [x.id for x in LESSONS] and len(SHIPPED) == 6
    assert all(2 <= e["text"].count(". ") + 1 <= 4 for e in SHIPPED)  # two or three sentences


@pytest.mark.parametrize("entry", SHIPPED, ids=[e["id"] for e in SHIPPED])
def test_a_lesson_opens_on_a_round_that_shows_it(entry):
    _, trace, _ = files.lesson(entry["title"])  # from its file alone: no model
    kind = next(x.kind for x in LESSONS if x.id == entry["id"])
    assert find(trace, kind) == entry["round"] and KINDS[kind][1] == entry["view"]
    walk = steps(trace, entry["round"])
    assert walk and walk[-1].kind != JUDGE


@pytest.mark.parametrize("entry", SHIPPED, ids=[e["id"] for e in SHIPPED])
def test_every_round_of_a_lesson_replays_to_its_recorded_verdict(entry):
    _, trace, _ = files.lesson(entry["title"])
    for i, rnd in enumerate(trace.rounds):
        assert verdicts(steps(trace, i)) == {c: s for c, s in enumerate(rnd.status) if s in (ACCEPTED, REJECTED)}


def test_an_unknown_lesson_is_a_sentence():
    with pytest.raises(ValueError, match="no lesson"):
        files.lesson("how to fly")


@pytest.mark.parametrize("name", sorted(files.recorded()))
def test_every_round_of_a_shipped_trace_replays_to_its_recorded_verdict(name):
    trace, _ = files.load_path(files.recorded()[name])
    for i, rnd in enumerate(trace.rounds):
        assert verdicts(steps(trace, i)) == {c: s for c, s in enumerate(rnd.status) if s in (ACCEPTED, REJECTED)}


@pytest.mark.parametrize("entry", SHIPPED, ids=[e["id"] for e in SHIPPED])
def test_opening_a_lesson_sets_the_controls_to_its_runs_settings(entry):
    """The method, its knobs and the sampling controls read the lesson's own run, never the page's last ones."""
    _, trace, _ = files.lesson(entry["title"])
    got = dict(zip(knobs.SHOWN, knobs.shown(trace)))
    run = RunConfig.from_dict(trace.config)
    assert got["method"]["value"] == trace.method and got["temperature"]["value"] == run.sampling.temperature
    for name, value in knob_values(run).items():
        if name in knobs.NAMES:
            assert got[name]["value"] == value and got[name]["visible"]
    hidden = set(knobs.NAMES) - set(knob_values(run))
    assert all(got[n]["visible"] is False for n in hidden)
    if trace.method == "chain" and not run.copy:  # the lesson's round drafted K tokens: the K control says K
        assert got["k"]["value"] == len(trace.rounds[entry["round"]].tree) - 1
