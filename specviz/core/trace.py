"""Records that decoding yields and the dashboard draws: plain Python values, JSON round trip.

No torch at import: traces can be loaded, compared and drawn without any model. A trace file is validated
against its schema (`core.schema`) before any of it is used.

Notation (declared once, used everywhere): ``q`` is the draft's probability of a drafted
token, ``p`` the target's probability of that token in the same context (both after the
same temperature / top-k / top-p warping). A round's tree has node 0 = the root, which is
the last committed token; every other node is a drafted token.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, is_dataclass

from specviz.core.schema import load_json, validate

_LEAVES = (int, float, str, bool, type(None))


def plain(x):
    """`dataclasses.asdict` without its deep copy of every leaf: dataclasses -> dicts, dicts and tuples rebuilt,
    numbers and strings shared (a trace's dict form is made after every round of a streamed run)."""
    if isinstance(x, _LEAVES):
        return x
    if isinstance(x, tuple):
        return tuple([plain(i) for i in x])
    if isinstance(x, list):
        return [plain(i) for i in x]
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if is_dataclass(x) and not isinstance(x, type):
        return {f.name: plain(getattr(x, f.name)) for f in fields(x)}
    return copy.deepcopy(x)


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

    def path_of(self, tokens: Sequence[int]) -> list[int]:
        """The nodes below the root that spell the longest prefix of `tokens` (a replayed step's kept path)."""
        path, node = [], 0
        for t in tokens:
            child = next(
                (i for i in range(node + 1, len(self)) if self.parents[i] == node and self.tokens[i] == t), None
            )
            if child is None:
                break
            path.append(child)
            node = child
        return path


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
    # a tree grower's round with a copy: {"prior": alpha_1, "q": the draft's probability, "token"} of its first
    # copied token (what `specviz copy-calibration` fits)
    copy_rating: dict | None = None
    u: tuple[float | None, ...] | None = None  # per node, the uniform draw it was judged with (sampled runs)
    # sampled runs: per judged node, [R(y), D(y)] when it was judged (the residual's and the proposal's probability
    # of its token; D = 1 for a copied node): accepted iff u D(y) < R(y), the verifier's own comparison
    judged: tuple[list | None, ...] | None = None
    # the node inspector's records (RunConfig.record_top; engine.tops): per node, [[token id, probability], ...]
    q_top: tuple[list | None, ...] | None = None  # the top of the draft distribution the node was drawn from
    p_top: tuple[list | None, ...] | None = None  # the top of the target's distribution it was judged against
    residual_top: tuple[list | None, ...] | None = None  # rejected nodes: the top of the residual left after them
    p_entropy: tuple[float | None, ...] | None = None  # the entropy (nats) of the distribution p_top is the top of
    head_inputs: tuple[dict, ...] | None = None  # SpecDec++: the head's scalar inputs at each draft step, by name
    # tree growers (methods.trees.grow): the order nodes were added, each node's value w (the product of q along
    # its path, root 1) and, for DySpec, the best slots [node, value, copy slot?] competing at each added node
    expand_order: tuple[int, ...] | None = None
    values: tuple[float, ...] | None = None
    frontier: tuple[list, ...] | None = None

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
    pieces: tuple[str, ...] | None = None  # the text each output id adds (core.text); None in older traces
    replay: str | None = None  # a replay of another decoder's output: its name (rounds commit its steps' tokens)

    @property
    def greedy(self) -> bool:
        """Whether the run decoded greedily (temperature 0): its rounds were verified by argmax matching."""
        return self.config.get("sampling", {}).get("temperature", 0) == 0

    @property
    def text(self) -> str:
        """The output as text: the tokenizer's decode of output_ids (older traces: their ids' labels joined)."""
        if self.pieces is not None:
            return "".join(self.pieces)
        return "".join(self.token_text.get(t, "") for t in self.output_ids)

    def to_dict(self) -> dict:
        d = plain(self)
        d["format"] = TRACE_FORMAT
        if self.pieces is not None:
            d["text"] = self.text
        d["token_text"] = {str(k): v for k, v in self.token_text.items()}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict) -> GenerationTrace:
        """A trace from its dict form, as JSON would carry it (tuples read as lists, keys as strings)."""
        try:
            d = json.loads(json.dumps(d))
        except (TypeError, ValueError, RecursionError):
            raise ValueError("a trace must hold JSON values only (objects, lists, strings, numbers)") from None
        return _trace_from_dict(d)

    @classmethod
    def from_json(cls, s: str | bytes) -> GenerationTrace:
        return _trace_from_dict(load_json(s, MAX_TRACE_BYTES, "trace file"))


def _tuple(xs):
    return None if xs is None else tuple(xs)


def _trace_from_dict(d: dict) -> GenerationTrace:
    f = validate(d)
    rounds = tuple(
        RoundTrace(
            index=r.index,
            context_len=r.context_len,
            tree=DraftTree(tuple(r.tree.tokens), tuple(r.tree.parents), tuple(r.tree.q)),
            status=tuple(r.status),
            p=tuple(r.p),
            accepted_path=tuple(r.accepted_path),
            emitted=tuple(r.emitted),
            correction=r.correction,
            draft_ms=r.draft_ms,
            verify_ms=r.verify_ms,
            overhead_ms=r.overhead_ms,
            draft_forwards=r.draft_forwards,
            copied=_tuple(r.copied),
            accept_probs=_tuple(r.accept_probs),
            stop_probs=_tuple(r.stop_probs),
            threshold=r.threshold,
            stop_reason=r.stop_reason,
            hindsight_k=r.hindsight_k,
            copy_rating=None if r.copy_rating is None else r.copy_rating.model_dump(),
            u=_tuple(r.u),
            judged=_tuple(r.judged),
            q_top=_tuple(r.q_top),
            p_top=_tuple(r.p_top),
            residual_top=_tuple(r.residual_top),
            p_entropy=_tuple(r.p_entropy),
            head_inputs=_tuple(r.head_inputs),
            expand_order=_tuple(r.expand_order),
            values=_tuple(r.values),
            frontier=_tuple(r.frontier),
        )
        for r in f.rounds
    )
    return GenerationTrace(
        method=f.method,
        config=f.config,
        prompt_ids=tuple(f.prompt_ids),
        output_ids=tuple(f.output_ids),
        rounds=rounds,
        token_text={int(k): v for k, v in f.token_text.items()},
        total_ms=f.total_ms,
        prompt_text=f.prompt_text,
        models=f.models,
        stop=f.stop,
        pieces=_tuple(f.pieces),
        replay=f.replay,
    )
