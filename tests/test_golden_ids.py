"""The output ids of every method on the default pair equal the recorded ones (tests/data/golden_ids.json), bit for
bit: greedy and sampled at T = 1 with fixed seeds. Each setting runs at both temperatures on one prompt, rotating
through all twelve; `python tests/golden_ids.py check tests/data/golden_ids.json` checks every recorded run."""

import json
from pathlib import Path

import golden_ids
import pytest

RECORD = Path(__file__).resolve().parent / "data" / "golden_ids.json"
CASES = [
    (s, t, (2 * n + j) % golden_ids.N_PROMPTS)
    for n, s in enumerate(golden_ids.SETTINGS)
    for j, t in enumerate(golden_ids.TEMPERATURES)
]


@pytest.fixture(scope="module")
def recorded():
    rec = json.loads(RECORD.read_text())
    if rec["machine"] != golden_ids.machine():
        pytest.skip(f"recorded on {rec['machine']}; this is {golden_ids.machine()}")
    return rec["ids"]


@pytest.fixture(scope="module")
def pair():
    return golden_ids.load()


@pytest.mark.parametrize("setting,temperature,i", CASES, ids=[golden_ids.key(*c) for c in CASES])
def test_same_ids_as_recorded(recorded, pair, setting, temperature, i):
    text = golden_ids.prompts()[i]
    assert golden_ids.run_ids(pair, setting, temperature, i, text) == recorded[golden_ids.key(setting, temperature, i)]
