"""What the dashboard runs: the model pair (loaded once), a method as a stream of traces, the cached
autoregressive baseline, example prompts and trace files. No gradio here; torch loads on first use.

One decode runs at a time: the pair's KV caches are shared state, so every decode holds `_busy`.
Loading a pair holds `_loading` instead, so a slow load does not stop runs on the loaded pair.
Traces are timed inside the decode loop only, so tokens/s excludes the time a caller spends
drawing between rounds.

Trace files are ``GenerationTrace`` JSON; the app adds the autoregressive baseline of the same
prompt under the extra key ``"baseline"`` (itself a trace), so a replay can show the speedup. Any
plain trace file loads too.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import torch

from specviz.analysis.hardware import context_ids, measure_pair, spread_prompts
from specviz.analysis.runset import PromptRun
from specviz.app.zerogpu import gpu, seconds_for
from specviz.core.assets import LESSONS, SHIPPED_NAMES, SPEC_BENCH, TRACES
from specviz.core.config import ModelConfig, RunConfig
from specviz.core.curves import save_local
from specviz.core.device import resolve_device, resolve_dtype
from specviz.core.pairs import DEFAULT_PAIR, PAIRS, PairSpec
from specviz.core.prompts import encode_prompt, read_prompts, stratified
from specviz.core.trace import MAX_TRACE_BYTES, GenerationTrace
from specviz.engine.loop import iter_rounds, prepare
from specviz.engine.record import TraceBuilder
from specviz.methods.registry import drafter_kind
from specviz.methods.specdecpp.head import head_config
from specviz.models.loading import load_pair, on_space
from specviz.train.config import QUICK
from specviz.train.head import fit_for_pair

EXAMPLE_IDS = (122, 144, 444, 228, 159, 104)  # Spec-Bench question ids: code, STEM, math, translation, ...
BASELINE_KEY = "baseline"
BUSY_TIMEOUT_S = 300
MODEL_SLOTS = 2  # requests the page lets in at once: one decoding, one loading a pair or next in line
BASELINE_CACHE = 32
MAX_SET = 20  # prompts one Prompt set run may decode (a public page shares one CPU)
HARDWARE_PROMPTS, HARDWARE_TOKENS, HARDWARE_REPEATS = 4, 24, 3  # the Hardware tab's measurement: under a minute

_busy = threading.Lock()  # held while a decode uses the pair's caches
_loading = threading.Lock()  # held while a pair loads
_pairs: dict[ModelConfig, object] = {}
_baselines: OrderedDict[tuple, GenerationTrace] = OrderedDict()


def public() -> bool:
    """Public mode: only the allow-listed pairs, never a path or hub id typed in the page. SPECVIZ_PUBLIC=1 turns
    it on, 0 off; unset, it is on where the page is a Hugging Face Space (SPACE_ID set) and off elsewhere."""
    return os.environ.get("SPECVIZ_PUBLIC", "1" if on_space() else "0") == "1"


def mcp() -> bool:
    """Serve the page's endpoints as MCP tools too (at /gradio_api/mcp/): SPECVIZ_MCP=1 turns it on, 0 off; unset,
    on for a local page and off on a public one."""
    return os.environ.get("SPECVIZ_MCP", "0" if public() else "1") == "1"


def pair_status(spec: PairSpec, gpu_gb: float | None = None) -> str | None:
    """Why `spec` cannot load here, or None where it can: the hub switched off, no token for a gated model, or no
    GPU with its memory (`gpu_gb`: the GPU's memory in GB, default: measured; a ZeroGPU Space counts as large)."""
    if spec.hub and os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return "the model hub is switched off here (HF_HUB_OFFLINE)"
    if spec.gated and not (os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")):
        return "its models are gated: set HF_TOKEN to a token with access"
    if spec.gpu_gb:
        have = gpu_memory_gb() if gpu_gb is None else gpu_gb
        if have < spec.gpu_gb:
            return f"it needs a GPU with {spec.gpu_gb:g} GB" + (f" (this one has {have:.0f} GB)" if have else "")
    return None


def gpu_memory_gb() -> float:
    """The GPU's memory in GB: 0 without one; a ZeroGPU Space lends large slices (SPACES_ZERO_GPU set)."""
    if os.environ.get("SPACES_ZERO_GPU"):
        return 40.0
    if not torch.cuda.is_available():
        return 0.0
    return torch.cuda.get_device_properties(0).total_memory / 1e9


def offered_pairs() -> list[tuple[str, str]]:
    """(label, name) of every pair that can load here (the offline default always can), the default first; each
    label says what the pair needs."""
    return [(s.label, s.name) for s in PAIRS.values() if pair_status(s) is None]


def model_config(
    pair: str, dtype: str, target: str = "", draft: str = "", device_map: str = "", max_memory: str = ""
) -> ModelConfig:
    """The ModelConfig for the page's model choice; custom target / draft and a device map only outside public
    mode."""
    if pair not in PAIRS:
        raise ValueError(f"unknown model pair {pair!r}; choose one of: {', '.join(PAIRS)}")
    why = pair_status(PAIRS[pair])
    if why:
        raise ValueError(f"the pair {pair} cannot load here: {why}")
    target, draft = (target or "").strip(), (draft or "").strip()
    device_map, max_memory = (device_map or "").strip() or None, (max_memory or "").strip() or None
    if (target or draft) and public():
        raise ValueError("this is a public deployment: only the listed model pairs can be loaded")
    if device_map and public():
        raise ValueError("this is a public deployment: the pairs load as listed, without a device map")
    base = PAIRS[pair].model
    return replace(
        base,
        target=target or base.target,
        draft=draft or base.draft,
        dtype=dtype,
        device_map=device_map or base.device_map,
        max_memory=max_memory or base.max_memory,
    )


@contextmanager
def _hold(lock: threading.Lock = _busy, what: str = "the model is busy with other runs"):
    if not lock.acquire(timeout=BUSY_TIMEOUT_S):
        raise RuntimeError(f"{what}; try again in a minute")
    try:
        yield
    finally:
        lock.release()


def _resolved(cfg: ModelConfig) -> ModelConfig:
    """`cfg` as `_pairs` keys it: "auto" dtype is what it picks."""
    return replace(cfg, dtype=resolve_dtype(cfg.dtype, resolve_device(cfg.device)))


def loaded(cfg: ModelConfig):
    """The loaded pair for `cfg`. One pair is kept in memory: a new one loads under `_loading`, never `_busy`,
    so a slow load (a big model, a slow hub) does not hold up runs on the pair already loaded; the new pair
    replaces the old only once it has loaded, so a failed load leaves the old one serving. A run still
    decoding on the old pair keeps it until it ends."""
    cfg = _resolved(cfg)
    if cfg in _pairs:
        return _pairs[cfg]
    with _hold(_loading, "another model pair is loading"):
        if cfg not in _pairs:
            pair = load_pair(cfg, progress=lambda msg: print(msg, flush=True))
            _pairs.clear()
            _pairs[cfg] = pair
        return _pairs[cfg]


@contextmanager
def holding(cfg: ModelConfig):
    """The loaded pair for `cfg`, held for one caller's whole piece of work (no run decodes on it meanwhile)."""
    pair = loaded(cfg)
    with _hold():
        yield pair


@contextmanager
def no_collector():
    """Python's cycle collector off for a round: its full scans of a page's heap (Gradio, plotly, the traces) land
    inside the decode otherwise, and a round's tensors and records are freed by reference counts."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def warm_up(cfg: ModelConfig = PAIRS[DEFAULT_PAIR].model) -> None:
    """Load the default pair and run two tokens through it ahead of the first click (the first forwards
    of a fresh process are slow); run in a background thread at launch."""
    pair = loaded(cfg)
    with _hold():
        for _ in iter_rounds(pair, encode_prompt(pair.tokenizer, "Hi"), RunConfig(max_new_tokens=2)):
            pass
    gc.collect()
    gc.freeze()  # the page's long-lived objects (Gradio, the models) leave the collector's scans


@gpu(duration=lambda prompt, run, model: seconds_for(run))
def stream(prompt: str, run: RunConfig, model: ModelConfig) -> Iterator[GenerationTrace]:
    """Decode `prompt` with `run.method`, yielding the trace so far after every verified round."""
    pair = loaded(model)
    with _hold():
        ids = encode_prompt(pair.tokenizer, prompt)
        t0 = time.perf_counter()
        drafter, rng = prepare(pair, run)
        build, spent = TraceBuilder(pair, drafter, ids, run, prompt), time.perf_counter() - t0
        it = iter_rounds(pair, ids, run, drafter, rng)
        while True:
            t0 = time.perf_counter()
            with no_collector():
                rnd = next(it, None)
            spent += time.perf_counter() - t0
            if rnd is None:
                return
            build.add(rnd)
            yield build.trace(spent * 1e3)


def train_head(cfg: ModelConfig, progress, stop: threading.Event) -> dict:
    """Train a SpecDec++ head for the drafter SpecDec++ uses on the pair `cfg` (loaded once, kept loaded) with the
    quick preset, where SpecDec++ then finds it (no reload); its card. `progress(fraction, what)`; `stop` set ends
    it (`train.head.Stopped`), writing nothing."""
    if public():
        raise ValueError("a public page never trains: run specviz on your own machine to train a head for your pair")
    pair = loaded(cfg)
    stop.clear()
    drafter = _specdecpp_lm(pair)
    if pair.drafter_name(drafter) in SHIPPED_NAMES:
        raise ValueError(
            "the shipped drafters come with their heads (trained with the full recipe: docs/training.md); "
            "the quick preset is for your own pair: name its target and draft under Model pair"
        )
    with _hold(what="the model is busy with a run; train when it ends"):
        _, card = fit_for_pair(pair, drafter, QUICK, "spec-bench", progress, stop.is_set)
    return card


def _specdecpp_lm(pair):
    """The drafter SpecDec++ runs with on `pair` at the page's default drafter choice (`registry.drafter_kind`)."""
    return pair.eagle if drafter_kind(RunConfig(method="specdecpp"), pair) == "eagle" else pair.draft


def head_card_of(cfg: ModelConfig) -> dict | None:
    """The card of the SpecDec++ head the loaded pair `cfg` would use ({} none yet; None: the pair is not loaded)."""
    pair = _pairs.get(_resolved(cfg))
    return None if pair is None else head_config(pair, _specdecpp_lm(pair))


def step_ms(cfg: ModelConfig) -> float:
    """The loaded pair `cfg`'s ms of a one-token target forward plus a draft one, timed here (0: not loaded, or busy
    with a run)."""
    pair = _pairs.get(_resolved(cfg))
    if pair is None or not _busy.acquire(blocking=False):
        return 0.0
    try:
        total = 0.0
        for lm in (pair.target, pair.draft):
            lm.reset()
            for _ in range(2):  # the second is timed: the first pays for a fresh shape
                t0 = time.perf_counter()
                lm.forward([0])
            total += (time.perf_counter() - t0) * 1e3
            lm.reset()
        return total
    finally:
        _busy.release()


def measure_hardware(cfg: ModelConfig, progress) -> dict:
    """The pair `cfg`'s curves, acceptance vectors and budget picks measured on this machine (`analysis.hardware`),
    kept as this machine's record of it; the record."""
    if public():
        raise ValueError("a public page shares its machine: measure on your own machine with `specviz budget`")
    pair = loaded(cfg)
    with _hold(what="the model is busy with a run; measure when it ends"):
        prompts = spread_prompts(pair, HARDWARE_PROMPTS)
        record = measure_pair(pair, context_ids(pair), prompts, HARDWARE_TOKENS, HARDWARE_REPEATS, "wall", progress)
    save_local(record)
    return record


def last(items: Iterable):
    """The last item of `items` (None when empty): a stream's last trace is the whole run."""
    out = None
    for item in items:
        out = item
    return out


def run_to_end(prompt: str, run: RunConfig, model: ModelConfig) -> GenerationTrace:
    return last(stream(prompt, run, model))


def baseline_stream(prompt: str, run: RunConfig, model: ModelConfig) -> Iterator[GenerationTrace]:
    """Autoregressive decoding of the same prompt with the same sampling and length, yielding the trace so far after
    every round (so a caller can stop it between any two); the last one is the whole run, and it is cached."""
    key = (model, prompt, run.sampling, run.max_new_tokens)
    if key not in _baselines:
        trace = None
        for trace in stream(prompt, replace(run, method="ar"), model):
            yield trace
        _baselines[key] = trace
        while len(_baselines) > BASELINE_CACHE:
            _baselines.popitem(last=False)
    _baselines.move_to_end(key)
    yield _baselines[key]


def baseline(prompt: str, run: RunConfig, model: ModelConfig) -> GenerationTrace:
    """The autoregressive run of the same prompt (`baseline_stream`'s last trace)."""
    return last(baseline_stream(prompt, run, model))


def race(prompt: str, runs: Sequence[RunConfig], model: ModelConfig) -> Iterator[tuple[list[GenerationTrace], bool]]:
    """Each method in turn on the same prompt (timed alone). Yields (the finished traces so far, whether one just
    finished) after every round, so a caller can stop the race between any two rounds."""
    done = []
    for run in runs:
        trace = yield from _pacing(stream(prompt, run, model), (done, False))
        done.append(trace)
        yield list(done), True


def _pacing(traces: Iterator[GenerationTrace], step):
    """Yield `step` after every trace of a stream (a caller can stop between any two rounds); return the last."""
    last = None
    for trace in traces:
        last = trace
        yield step
    return last


def set_prompts(n: int, path: str | None = None) -> list[dict]:
    """The prompts of a set run: the first n of an uploaded JSON-lines file, or n of the shipped Spec-Bench sample
    balanced over its tasks (seed 0, as the bench draws them)."""
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_SET:
        raise ValueError(f"a prompt set holds 1 to {MAX_SET} prompts here, got {n!r}")
    if path:
        return read_prompts(path, n)
    if not SPEC_BENCH.exists():
        raise ValueError("the Spec-Bench sample does not ship with this copy: upload a JSON-lines file of prompts")
    return stratified(read_prompts(SPEC_BENCH), n, 0)


def run_set(rows: Sequence[dict], run: RunConfig, model: ModelConfig) -> Iterator[tuple[list[PromptRun], int]]:
    """Each prompt in turn with one method. Yields (the finished runs, the prompt now decoding) after every round,
    so a caller can stop between any two rounds."""
    done: list[PromptRun] = []
    for i, row in enumerate(rows):
        trace = yield from _pacing(stream(row["turns"][0], run, model), (done, i))
        qid, cat = row.get("question_id", i + 1), row.get("category", "all")
        done.append(PromptRun(str(qid)[:64], str(cat)[:64], trace))
    yield done, len(rows)


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
