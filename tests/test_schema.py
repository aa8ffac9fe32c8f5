"""Trace files are validated against the published schema (docs/trace.schema.json): every invariant a trace must
hold is refused with one sentence that names the field, and every shipped trace and a fresh one pass."""

import copy
import json
import re
from pathlib import Path

import pytest

from specviz.core.config import RunConfig
from specviz.core.schema import json_schema
from specviz.core.trace import GenerationTrace
from specviz.engine import generate

ROOT = Path(__file__).resolve().parents[1]
LIBRARY_WORDS = re.compile(r"Error\b|Errno|Traceback|object has no attribute|dictionary update sequence")


def test_the_published_schema_is_the_one_the_code_checks():
    assert json.loads((ROOT / "docs" / "trace.schema.json").read_text()) == json.loads(json.dumps(json_schema()))


@pytest.fixture(scope="module")
def good():
    from conftest import make_pair

    return json.loads(generate(make_pair("near"), [3, 4, 5], RunConfig(method="dyspec", max_new_tokens=10)).to_json())


def test_a_fresh_trace_and_every_shipped_one_pass(good):
    assert json.loads(GenerationTrace.from_dict(good).to_json()) == good
    assert good["models"]["vocab_size"] == 64
    for path in sorted((ROOT / "assets" / "traces").glob("*.json")):
        GenerationTrace.from_json(path.read_text())


def _set(d: dict, path: str, value):
    *head, last = path.split(".")
    for part in head:
        d = d[int(part)] if isinstance(d, list) else d[part]
    if isinstance(d, list):
        d[int(last)] = value
    else:
        d[last] = value


BAD = {
    "a string where a tree belongs": ("rounds.0.tree", "x", "rounds.0.tree"),
    "a string where the config belongs": ("config", "abc", "config"),
    "a string where the sampling settings belong": ("config.sampling", "greedy", "config.sampling must be an object"),
    "a temperature that is not a number": ("config.sampling.temperature", "hot", "must be a number"),
    "a list of pairs as token_text": ("token_text", [["1", "a"]], "token_text"),
    "a negative token id": ("output_ids.0", -3, "output_ids.0"),
    "a negative context length": ("rounds.0.context_len", -1, "context_len"),
    "an id outside the named vocabulary": ("prompt_ids.0", 64, "inside the vocabulary of 64"),
    "output that disagrees with the rounds": ("output_ids", [1, 2, 3], "emitted tokens"),
    "a method name holding HTML": ("method", "<img src=x onerror=alert(1)>", "method"),
    "a probability above 1": ("rounds.0.tree.q.1", 1.5, "less than or equal to 1"),
    "a NaN probability": ("rounds.0.p.1", float("nan"), "rounds.0.p.1"),
    "parents that are not topological": ("rounds.0.tree.parents", None, "topological"),
    "an accepted path that is no path": ("rounds.0.accepted_path", None, "accepted_path must run"),
    "a second root": ("rounds.0.status", None, "only node 0"),
    "rounds out of order": ("rounds.0.index", 5, "numbered"),
    "an unknown format": ("format", "other/9", "format"),
    "an unknown correction": ("rounds.0.correction", "magic", "correction"),
    "a huge token text": ("token_text.3", "x" * 10_000, "token_text.3"),
    "draws that miss a node": ("rounds.0.u", [None], "one entry per tree node"),
    "a draw above 1": ("rounds.0.u", [None, 1.5, None, None], "less than or equal to 1"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_broken_trace_is_refused_with_a_sentence(good, name):
    path, value, needle = BAD[name]
    d = copy.deepcopy(good)
    n = len(d["rounds"][0]["tree"]["tokens"])
    if value is None and path.endswith("parents"):
        value = [-1] + [i for i in range(1, n)]  # every node its own parent
    elif value is None and path.endswith("accepted_path"):
        value = [n - 1, 1] if n > 2 else [1, 1]
    elif value is None and path.endswith("status"):
        value = ["root"] * n
    _set(d, path, value)
    with pytest.raises(ValueError, match="not a valid specviz trace") as e:
        GenerationTrace.from_json(json.dumps(d))
    msg = str(e.value)
    assert needle in msg and not LIBRARY_WORDS.search(msg), msg
