"""The page's files: trace files (a `GenerationTrace` JSON, with the autoregressive baseline of the same prompt under
"baseline" where the page has one, so a replay can show the speedup; any plain trace file loads too), the shipped
recorded traces and lessons, and the example prompts."""

from __future__ import annotations

import json
from pathlib import Path

from specviz.core.assets import LESSONS, SPEC_BENCH, TRACES
from specviz.core.trace import MAX_TRACE_BYTES, GenerationTrace

EXAMPLE_IDS = (122, 144, 444, 228, 159, 104)  # Spec-Bench question ids: code, STEM, math, translation, ...

BASELINE_KEY = "baseline"


def as_dict(trace: GenerationTrace, base: GenerationTrace | None = None) -> dict:
    """A trace file's content: the trace, plus the autoregressive baseline when there is one."""
    d = trace.to_dict()
    if base is not None:
        d[BASELINE_KEY] = base.to_dict()
    return d


def dump(trace: GenerationTrace, base: GenerationTrace | None = None) -> str:
    """A trace file (`as_dict` as JSON)."""
    return dumps(as_dict(trace, base))


def dumps(data: dict) -> str:
    """A trace file's content (`as_dict`'s) as JSON."""
    return json.dumps(data, ensure_ascii=False)


def load(data: str | bytes) -> tuple[GenerationTrace, GenerationTrace | None]:
    """Parse and validate a trace file; ValueError with a readable reason on anything malformed."""
    trace = GenerationTrace.from_json(data)
    extra = json.loads(data).get(BASELINE_KEY)
    if extra is None:
        return trace, None
    base = GenerationTrace.from_dict(extra)
    if base.method != "ar":
        raise ValueError(f"the trace file's baseline must be an autoregressive run, got {base.method!r}")
    return trace, base


def load_path(path: str | Path) -> tuple[GenerationTrace, GenerationTrace | None]:
    p = Path(path)
    if p.stat().st_size > MAX_TRACE_BYTES:
        raise ValueError(f"trace file is larger than {MAX_TRACE_BYTES // 1_000_000} MB")
    return load(p.read_bytes())


def recorded() -> dict[str, Path]:
    """The traces shipped in assets/traces, by file name (without .json)."""
    return {p.stem: p for p in sorted(TRACES.glob("*.json"))}


def lessons() -> list[dict]:
    """The shipped lessons (assets/lessons/index.json: id, title, text, file, round, view), in order; [] if none."""
    index = LESSONS / "index.json"
    try:
        entries = json.loads(index.read_text(encoding="utf-8")) if index.exists() else []
    except ValueError:
        return []
    return [e for e in entries if isinstance(e, dict) and (LESSONS / str(e.get("file", ""))).is_file()]


def lesson(title: str) -> tuple[dict, GenerationTrace, Path]:
    """The lesson named `title`: its entry, its trace and the trace's file (ValueError: no such lesson)."""
    entry = next((e for e in lessons() if e["title"] == title), None)
    if entry is None:
        raise ValueError(f"no lesson {title!r}")
    path = LESSONS / entry["file"]
    return entry, load_path(path)[0], path


def example_prompts() -> list[str]:
    """A few short Spec-Bench questions (first turns), in EXAMPLE_IDS order; [] if the file is absent."""
    if not SPEC_BENCH.exists():
        return []
    rows = {}
    for line in SPEC_BENCH.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            rows[r["question_id"]] = r["turns"][0]
    return [rows[i] for i in EXAMPLE_IDS if i in rows]
