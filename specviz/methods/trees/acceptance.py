"""The pair's measured positional acceptance vector (Sequoia's P[k]), stored in assets/acceptance.json."""

from __future__ import annotations

import json
from pathlib import Path

from specviz.core.assets import ACCEPTANCE
from specviz.core.priors import SEQUOIA_FALLBACK_ACCEPTANCE


def acceptance_key(target: str, draft: str, temperature: float) -> str:
    return f"{target}|{draft}|T={float(temperature):g}"


def load_acceptance(target: str, draft: str, temperature: float, path: Path = ACCEPTANCE) -> tuple[float, ...]:
    """The cached vector of this target and drafter (`Pair.drafter_name`) at this temperature; else at the
    pair's nearest temperature; else the fallback."""
    if path.exists():
        table = json.loads(path.read_text())
        key = acceptance_key(target, draft, temperature)
        if key in table:
            return tuple(table[key]["vector"])
        same_pair = [r for r in table.values() if (r["target"], r["draft"]) == (target, draft)]
        if same_pair:
            return tuple(min(same_pair, key=lambda r: abs(r["temperature"] - temperature))["vector"])
    return SEQUOIA_FALLBACK_ACCEPTANCE


def save_acceptance(record: dict, path: Path = ACCEPTANCE) -> None:
    table = json.loads(path.read_text()) if path.exists() else {}
    table[acceptance_key(record["target"], record["draft"], record["temperature"])] = record
    path.write_text(json.dumps(table, indent=1) + "\n")
