"""One method's traces over a set of prompts (`RunSet`), read from a JSON-lines file of traces (a `generate
--prompts` file) or from one setting of a bench result kept with `--traces`. Every file is validated: a wrong file,
mixed methods or mixed tokenizers get a sentence.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from specviz.core.trace import GenerationTrace, RoundTrace

MAX_SET_PROMPTS = 2_000  # traces per file; a larger file is refused with a sentence


@dataclass(frozen=True)
class PromptRun:
    """One prompt's trace, with the prompt's id and category where its file named them."""

    qid: str
    category: str
    trace: GenerationTrace


@dataclass(frozen=True)
class RunSet:
    """One method's runs over a set of prompts."""

    label: str
    runs: tuple[PromptRun, ...]

    @property
    def method(self) -> str:
        return self.runs[0].trace.method

    @property
    def traces(self) -> list[GenerationTrace]:
        return [r.trace for r in self.runs]

    @property
    def rounds(self) -> list[RoundTrace]:
        return [rnd for r in self.runs for rnd in r.trace.rounds]

    @property
    def temperature(self) -> float | None:
        t = (self.runs[0].trace.config.get("sampling") or {}).get("temperature")
        return t if isinstance(t, (int, float)) else None


# -- reading -----------------------------------------------------------------------------------------


def _tokenizer_clash(a: GenerationTrace, b: GenerationTrace) -> int | None:
    """A token id that two traces label differently (their tokenizers differ), or None."""
    for i, s in a.token_text.items():
        t = b.token_text.get(i)
        if t is not None and t != s:
            return i
    return None


def check_same_tokenizer(traces: Sequence[GenerationTrace], what: str = "these traces") -> None:
    """Refuse traces whose shared token ids read as different text, or whose vocabulary sizes differ."""
    sizes = {t.models.get("vocab_size") for t in traces} - {None}
    if len(sizes) > 1:
        raise ValueError(f"{what} come from tokenizers of different vocabulary sizes ({', '.join(map(str, sizes))})")
    first = traces[0]
    for t in traces[1:]:
        clash = _tokenizer_clash(first, t)
        if clash is not None:
            raise ValueError(
                f"{what} come from two tokenizers: token {clash} reads {first.token_text[clash]!r} in one and "
                f"{t.token_text[clash]!r} in another"
            )


def runs_from_lines(lines: Iterable[str], label: str) -> RunSet:
    """A RunSet from JSON lines, one GenerationTrace a line (`question_id` and `category` read where present).
    Every line is validated; a wrong file, mixed methods or mixed tokenizers get a sentence."""
    runs = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if len(runs) >= MAX_SET_PROMPTS:
            raise ValueError(f"{label} holds more than {MAX_SET_PROMPTS} traces; split it")
        try:
            d = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise ValueError(
                f"{label}, line {n}, is not JSON: a prompt set is a JSON-lines file of traces "
                "(`specviz generate --prompts ... --out FILE.jsonl`)"
            ) from None
        if not isinstance(d, dict) or "rounds" not in d:
            raise ValueError(f"{label}, line {n}, is not a specviz trace (no rounds)")
        try:
            trace = GenerationTrace.from_dict(d)
        except ValueError as e:
            raise ValueError(f"{label}, line {n}: {e}") from None
        qid = d.get("question_id", n)
        cat = d.get("category", "all")
        runs.append(PromptRun(str(qid)[:64], str(cat)[:64] if isinstance(cat, str) else "all", trace))
    if not runs:
        raise ValueError(f"{label} holds no traces")
    methods = Counter(r.trace.method for r in runs)
    if len(methods) > 1:
        listed = ", ".join(f"{m} ({c})" for m, c in methods.most_common())
        raise ValueError(f"{label} mixes methods: {listed}; a prompt set is one method's runs")
    check_same_tokenizer([r.trace for r in runs], f"the traces in {label}")
    return RunSet(label, tuple(runs))


def pool(sets: Sequence[RunSet]) -> RunSet:
    """Several files of one method's runs as one set (one method and one tokenizer, as in one file)."""
    if len(sets) == 1:
        return sets[0]
    methods = {s.method for s in sets}
    if len(methods) > 1:
        raise ValueError(f"the files mix methods ({', '.join(sorted(methods))}); a prompt set is one method's runs")
    runs = tuple(r for s in sets for r in s.runs)
    check_same_tokenizer([r.trace for r in runs], "the pooled files")
    return RunSet(" + ".join(s.label for s in sets), runs)


# -- files -------------------------------------------------------------------------------------------

MAX_SET_FILE_BYTES = 500_000_000


def read_runset(spec: str, label: str | None = None) -> RunSet:
    """A RunSet from a JSON-lines file of traces (`generate --prompts ... --out`), or from one setting of a bench
    result kept with `--traces`: `BENCH.json#LABEL` (the labels are listed when none or a wrong one is given)."""
    path, pick = spec, ""
    if not Path(spec).is_file():  # a file name may hold "#" itself
        path, _, pick = spec.partition("#")
    p = Path(path).expanduser()
    if not p.is_file():
        raise ValueError(f"{path} is not a file: name a JSON-lines file of traces or a bench JSON")
    if p.stat().st_size > MAX_SET_FILE_BYTES:
        raise ValueError(f"{path} is larger than {MAX_SET_FILE_BYTES // 1_000_000} MB")
    bench = _bench_json(p)
    if bench is not None:
        return _bench_setting(p, bench, pick, label)
    if pick:
        raise ValueError(f"{path} is not a bench result, so '#{pick}' names nothing in it")
    with open(p, encoding="utf-8", errors="replace") as f:
        return runs_from_lines(f, label or p.name)


def _bench_json(p: Path) -> dict | None:
    """The file as a bench result (one JSON object with "suites"), or None where it is something else."""
    with open(p, encoding="utf-8", errors="replace") as f:
        first = f.readline()
        try:
            d = json.loads(first)
        except (json.JSONDecodeError, RecursionError):
            if not first.lstrip().startswith("{"):
                return None
            try:  # a pretty-printed bench result spans lines
                d = json.loads(first + f.read())
            except (json.JSONDecodeError, RecursionError):
                return None
    return d if isinstance(d, dict) and "suites" in d else None


def _bench_setting(p: Path, bench: dict, pick: str, label: str | None) -> RunSet:
    kept = bench.get("traces")
    if not isinstance(kept, dict) or not kept:
        raise ValueError(
            f"{p} holds a bench's summaries, not its traces: rerun `specviz bench` with --traces DIR and pass "
            f"{p.name}#LABEL or a file in DIR"
        )
    if pick not in kept:
        listed = ", ".join(sorted(kept))
        what = f"'{pick}' is not a setting of {p.name}" if pick else f"{p.name} holds several settings"
        raise ValueError(f"{what}: name one as {p.name}#LABEL, with LABEL one of {listed}")
    target = (p.parent / str(kept[pick])).resolve()
    if not target.is_file():
        raise ValueError(f"{p.name}#{pick} names the trace file {target}, which is missing")
    with open(target, encoding="utf-8", errors="replace") as f:
        return runs_from_lines(f, label or pick)
