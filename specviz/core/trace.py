"""Records that decoding yields and the dashboard draws: plain Python values, JSON round trip.

No torch at import: traces can be loaded, compared and drawn without any model.

Notation (declared once, used everywhere): ``q`` is the draft's probability of a drafted
token, ``p`` the target's probability of that token in the same context (both after the
same temperature / top-k / top-p warping). A round's tree has node 0 = the root, which is
the last committed token; every other node is a drafted token.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

ROOT, ACCEPTED, REJECTED, UNVISITED = "root", "accepted", "rejected", "unvisited"
STATUSES = (ROOT, ACCEPTED, REJECTED, UNVISITED)
BONUS, RESAMPLE = "bonus", "resample"
TRACE_FORMAT = "specviz-trace/1"
MAX_TRACE_BYTES = 50_000_000


@dataclass(frozen=True)
class DraftTree:
    """A draft token tree. A chain has parents (-1, 0, 1, ...); the autoregressive baseline is the root alone."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    q: tuple[float, ...]

    def __post_init__(self):
        n = len(self.tokens)
        if not (n >= 1 and len(self.parents) == n and len(self.q) == n):
            raise ValueError("a DraftTree needs equal-length tokens, parents and q, with at least the root")
        if self.parents[0] != -1 or any(not (0 <= p < i) for i, p in enumerate(self.parents[1:], 1)):
            raise ValueError("DraftTree parents must be topological: parents[0] == -1 and 0 <= parents[i] < i")

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class RoundTrace:
    """One verification round: one target forward over a draft tree."""

    index: int
    context_len: int
    tree: DraftTree
    status: tuple[str, ...]
    p: tuple[float | None, ...]
    accepted_path: tuple[int, ...]
    emitted: tuple[int, ...]
    correction: str
    draft_ms: float
    verify_ms: float
    overhead_ms: float = 0.0
    draft_forwards: int = 0
    copied: tuple[int, ...] | None = None  # nodes copied from the context (prompt lookup), not drafted
    # SpecDec++ only
    accept_probs: tuple[float, ...] | None = None
    stop_probs: tuple[float, ...] | None = None
    threshold: float | None = None
    stop_reason: str | None = None
    hindsight_k: int | None = None

    @property
    def n_accepted(self) -> int:
        return len(self.accepted_path)

    @property
    def n_drafted(self) -> int:
        return len(self.tree) - 1


@dataclass(frozen=True)
class GenerationTrace:
    """One run of one method on one prompt."""

    method: str
    config: dict
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    rounds: tuple[RoundTrace, ...]
    token_text: dict[int, str] = field(default_factory=dict)
    total_ms: float = 0.0
    prompt_text: str = ""
    models: dict = field(default_factory=dict)
    stop: str = "length"

    @property
    def text(self) -> str:
        return "".join(self.token_text.get(t, "") for t in self.output_ids)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["format"] = TRACE_FORMAT
        d["token_text"] = {str(k): v for k, v in self.token_text.items()}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict) -> GenerationTrace:
        try:
            return _trace_from_dict(d)
        except ValueError:
            raise
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"not a specviz trace: {type(e).__name__}: {e}") from None

    @classmethod
    def from_json(cls, s: str | bytes) -> GenerationTrace:
        if len(s) > MAX_TRACE_BYTES:
            raise ValueError(f"trace file is larger than {MAX_TRACE_BYTES // 1_000_000} MB")
        try:
            d = json.loads(s)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            raise ValueError(f"trace file is not valid JSON: {e}") from None
        return cls.from_dict(d)


def _num(x, name, allow_none=False):
    if x is None and allow_none:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"trace field {name} must be a finite number, got {x!r}")
    return x


def _ints(xs, name):
    if not isinstance(xs, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in xs):
        raise ValueError(f"trace field {name} must be a list of integers")
    return tuple(xs)


def _round_from_dict(r: dict) -> RoundTrace:
    if not isinstance(r, dict):
        raise ValueError("each round must be a JSON object")
    t = r["tree"]
    tree = DraftTree(
        _ints(t["tokens"], "tree.tokens"), _ints(t["parents"], "tree.parents"), tuple(_num(x, "tree.q") for x in t["q"])
    )
    status = tuple(r["status"])
    if len(status) != len(tree) or any(s not in STATUSES for s in status):
        raise ValueError(f"round {r.get('index')}: status must give one of {STATUSES} per tree node")
    p = tuple(_num(x, "p", allow_none=True) for x in r["p"])
    if len(p) != len(tree):
        raise ValueError(f"round {r.get('index')}: p must have one entry per tree node")
    path = _ints(r["accepted_path"], "accepted_path")
    if any(not (0 < i < len(tree)) for i in path):
        raise ValueError(f"round {r.get('index')}: accepted_path names a node outside the tree")
    opt = {}
    for k in ("accept_probs", "stop_probs"):
        if r.get(k) is not None:
            opt[k] = tuple(_num(x, k) for x in r[k])
    for k in ("threshold",):
        if r.get(k) is not None:
            opt[k] = _num(r[k], k)
    if r.get("copied") is not None:
        opt["copied"] = _ints(r["copied"], "copied")
        if any(not (0 < i < len(tree)) for i in opt["copied"]):
            raise ValueError(f"round {r.get('index')}: copied names a node outside the tree")
    if r.get("stop_reason") is not None:
        opt["stop_reason"] = str(r["stop_reason"])
    if r.get("hindsight_k") is not None:
        opt["hindsight_k"] = int(_num(r["hindsight_k"], "hindsight_k"))
    return RoundTrace(
        index=int(_num(r["index"], "index")),
        context_len=int(_num(r["context_len"], "context_len")),
        tree=tree,
        status=status,
        p=p,
        accepted_path=path,
        emitted=_ints(r["emitted"], "emitted"),
        correction=str(r["correction"]),
        draft_ms=_num(r["draft_ms"], "draft_ms"),
        verify_ms=_num(r["verify_ms"], "verify_ms"),
        overhead_ms=_num(r.get("overhead_ms", 0.0), "overhead_ms"),
        draft_forwards=int(_num(r.get("draft_forwards", 0), "draft_forwards")),
        **opt,
    )


def _trace_from_dict(d: dict) -> GenerationTrace:
    if not isinstance(d, dict):
        raise ValueError("a trace must be a JSON object")
    if d.get("format", TRACE_FORMAT) != TRACE_FORMAT:
        raise ValueError(f"unsupported trace format {d.get('format')!r} (expected {TRACE_FORMAT})")
    if not isinstance(d["rounds"], list):
        raise ValueError("trace field rounds must be a list")
    tt = d.get("token_text", {})
    if not isinstance(tt, dict) or any(not isinstance(v, str) for v in tt.values()):
        raise ValueError("trace field token_text must map token ids to strings")
    try:
        token_text = {int(k): v for k, v in tt.items()}
    except ValueError:
        raise ValueError("token_text keys must be integer token ids") from None
    cfg = d.get("config", {})
    if not isinstance(cfg, dict):
        raise ValueError("trace field config must be an object")
    return GenerationTrace(
        method=str(d["method"]),
        config=cfg,
        prompt_ids=_ints(d["prompt_ids"], "prompt_ids"),
        output_ids=_ints(d["output_ids"], "output_ids"),
        rounds=tuple(_round_from_dict(r) for r in d["rounds"]),
        token_text=token_text,
        total_ms=_num(d.get("total_ms", 0.0), "total_ms"),
        prompt_text=str(d.get("prompt_text", "")),
        models=dict(d.get("models", {})),
        stop=str(d.get("stop", "length")),
    )
