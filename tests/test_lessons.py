"""The shipped lessons: each opens with no model loaded on a round that shows what its title says, and every
sampled round of their traces replays to the verdict the verifier recorded."""

import pytest

from specviz.analysis.lessons import KINDS, find
from specviz.analysis.verification import JUDGE, steps, verdicts
from specviz.app import session
from specviz.core.trace import ACCEPTED, REJECTED
from specviz.tools.lessons import LESSONS

SHIPPED = session.lessons()


def test_the_six_lessons_ship_in_order():
    assert [e["id"] for e in SHIPPED] == [x.id for x in LESSONS] and len(SHIPPED) == 6
    assert all(2 <= e["text"].count(". ") + 1 <= 4 for e in SHIPPED)  # two or three sentences


@pytest.mark.parametrize("entry", SHIPPED, ids=[e["id"] for e in SHIPPED])
def test_a_lesson_opens_on_a_round_that_shows_it(entry):
    _, trace, _ = session.lesson(entry["title"])  # from its file alone: no model
    kind = next(x.kind for x in LESSONS if x.id == entry["id"])
    assert find(trace, kind) == entry["round"] and KINDS[kind][1] == entry["view"]
    walk = steps(trace, entry["round"])
    assert walk and walk[-1].kind != JUDGE


@pytest.mark.parametrize("entry", SHIPPED, ids=[e["id"] for e in SHIPPED])
def test_every_round_of_a_lesson_replays_to_its_recorded_verdict(entry):
    _, trace, _ = session.lesson(entry["title"])
    for i, rnd in enumerate(trace.rounds):
        assert verdicts(steps(trace, i)) == {c: s for c, s in enumerate(rnd.status) if s in (ACCEPTED, REJECTED)}


def test_an_unknown_lesson_is_a_sentence():
    with pytest.raises(ValueError, match="no lesson"):
        session.lesson("how to fly")


@pytest.mark.parametrize("name", sorted(session.recorded()))
def test_every_round_of_a_shipped_trace_replays_to_its_recorded_verdict(name):
    trace, _ = session.load_path(session.recorded()[name])
    for i, rnd in enumerate(trace.rounds):
        assert verdicts(steps(trace, i)) == {c: s for c, s in enumerate(rnd.status) if s in (ACCEPTED, REJECTED)}
