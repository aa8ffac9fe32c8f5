"""The trace file's schema: what a specviz trace (JSON) may hold, checked by pydantic before any field is used.

`GenerationTrace.from_dict` validates through `TraceFile`; `json_schema()` is the published form
(docs/trace.schema.json), so other tools can write traces the dashboard replays. Beyond types and ranges the
schema holds the invariants that make a trace mean something: topological parents, one status per node with the
root first, an accepted path that is a path from the root through accepted nodes, emitted tokens that add up to
the output, output pieces that join to the output text, token ids inside the vocabulary the trace names,
probabilities in [0, 1], and bounded sizes.
"""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specviz.core.config import MAX_NEW_TOKENS_LIMIT, MAX_RECORD_TOP, METHODS, RunConfig, SamplingConfig
from specviz.core.prompts import MAX_PROMPT_CHARS, MAX_PROMPT_TOKENS

MAX_TREE_NODES = 257  # a budget of 256 drafted nodes and the root
MAX_ROUNDS = MAX_NEW_TOKENS_LIMIT
MAX_IDS = MAX_PROMPT_TOKENS + MAX_NEW_TOKENS_LIMIT
MAX_TOKEN_TEXT = 256  # characters of one token's text
MAX_VOCAB = 2**24

TokenId = Annotated[int, Field(ge=0, lt=MAX_VOCAB)]
Prob = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Mass = Annotated[float, Field(ge=0, le=1.001, allow_inf_nan=False)]  # a renormalised probability (float rounding)
Ms = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
Pair = Annotated[list[TokenId | Prob], Field(min_length=2, max_length=2)]  # [token id, probability]
Top = Annotated[list[Pair], Field(max_length=MAX_RECORD_TOP)]  # most probable first
Slot = Annotated[list[int | Prob | bool], Field(min_length=3, max_length=3)]  # [node, value, copy slot?]


class Record(BaseModel):
    """A record of a file specviz reads: strict types, unknown keys ignored, frozen."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class CopyRating(Record):
    prior: Prob
    q: Prob
    token: TokenId


class Tree(Record):
    tokens: list[TokenId] = Field(min_length=1, max_length=MAX_TREE_NODES)
    parents: list[int] = Field(max_length=MAX_TREE_NODES)
    q: list[Prob] = Field(max_length=MAX_TREE_NODES)

    @model_validator(mode="after")
    def _topological(self):
        if not len(self.tokens) == len(self.parents) == len(self.q):
            raise ValueError("tokens, parents and q must have one entry per node")
        if self.parents[0] != -1 or any(not 0 <= p < i for i, p in enumerate(self.parents[1:], 1)):
            raise ValueError("parents must be topological: parents[0] is -1 and 0 <= parents[i] < i")
        return self


class Round(Record):
    index: Count
    context_len: Annotated[int, Field(ge=1)]
    tree: Tree
    status: list[Literal["root", "accepted", "rejected", "unvisited"]]
    p: list[Prob | None]
    accepted_path: list[int]
    emitted: list[TokenId] = Field(max_length=MAX_TREE_NODES)
    correction: Literal["bonus", "resample"]
    draft_ms: Ms
    verify_ms: Ms
    overhead_ms: Ms = 0.0
    draft_forwards: Count = 0
    copied: list[int] | None = None
    accept_probs: list[Prob] | None = Field(None, max_length=MAX_TREE_NODES)
    stop_probs: list[Prob] | None = Field(None, max_length=MAX_TREE_NODES)
    threshold: Prob | None = None
    stop_reason: Literal["threshold", "k_max", "eos", "budget"] | None = None
    hindsight_k: Count | None = None
    copy_rating: CopyRating | None = None
    u: list[Prob | None] | None = Field(None, max_length=MAX_TREE_NODES)
    judged: list[Annotated[list[Mass], Field(min_length=2, max_length=2)] | None] | None = Field(
        None, max_length=MAX_TREE_NODES
    )
    q_top: list[Top | None] | None = Field(None, max_length=MAX_TREE_NODES)
    p_top: list[Top | None] | None = Field(None, max_length=MAX_TREE_NODES)
    residual_top: list[Top | None] | None = Field(None, max_length=MAX_TREE_NODES)
    p_entropy: list[Annotated[float, Field(ge=0, le=50, allow_inf_nan=False)] | None] | None = Field(
        None, max_length=MAX_TREE_NODES
    )
    head_inputs: list[dict[str, Annotated[float, Field(allow_inf_nan=False)]]] | None = Field(
        None, max_length=MAX_TREE_NODES
    )
    expand_order: list[int] | None = Field(None, max_length=MAX_TREE_NODES)
    values: list[Prob] | None = Field(None, max_length=MAX_TREE_NODES)
    frontier: list[Annotated[list[Slot], Field(max_length=MAX_RECORD_TOP)]] | None = Field(
        None, max_length=MAX_TREE_NODES
    )

    @model_validator(mode="after")
    def _consistent(self):
        n, parents = len(self.tree.tokens), self.tree.parents
        if len(self.status) != n or len(self.p) != n:
            raise ValueError("status and p must have one entry per tree node")
        if self.u is not None and len(self.u) != n:
            raise ValueError("u must have one entry per tree node (null where no draw was made)")
        if self.judged is not None and len(self.judged) != n:
            raise ValueError("judged must have one entry per tree node (null where no node was judged)")
        for name in ("q_top", "p_top", "residual_top", "p_entropy", "values"):
            xs = getattr(self, name)
            if xs is not None and len(xs) != n:
                raise ValueError(f"{name} must have one entry per tree node (null where there is none)")
        for name in ("q_top", "p_top", "residual_top"):
            for top in getattr(self, name) or ():
                if top is None:
                    continue
                if any(not isinstance(t, int) or isinstance(t, bool) or not 0 <= x <= 1 for t, x in top):
                    raise ValueError(f"{name} entries must be [token id, probability] pairs")
                if any(a[1] < b[1] for a, b in zip(top, top[1:])):
                    raise ValueError(f"{name} entries must be sorted, most probable first")
        if self.expand_order is not None and sorted(self.expand_order) != list(range(1, n)):
            raise ValueError("expand_order must name every drafted node once")
        if self.frontier is not None and self.expand_order is not None and len(self.frontier) != len(self.expand_order):
            raise ValueError("frontier must hold one list of slots per added node")
        for step in self.frontier or ():
            if any(
                not isinstance(u, int) or isinstance(u, bool) or not 0 <= u < n or not isinstance(c, bool)
                for u, _, c in step
            ):
                raise ValueError("frontier slots must be [node, value, copy slot?] with a node of the tree")
        if self.status[0] != "root" or "root" in self.status[1:]:
            raise ValueError("node 0, and only node 0, has status root")
        prev = 0
        for u in self.accepted_path:
            if not (0 < u < n and parents[u] == prev and self.status[u] == "accepted"):
                raise ValueError("accepted_path must run from the root down through accepted nodes of the tree")
            prev = u
        if any(not 0 < u < n for u in self.copied or ()):
            raise ValueError("copied names a node outside the tree")
        return self


class TraceFile(Record):
    format: Literal["specviz-trace/1"] = "specviz-trace/1"
    method: Literal[METHODS]
    config: dict = Field(default_factory=dict)
    prompt_ids: list[TokenId] = Field(max_length=MAX_IDS)
    output_ids: list[TokenId] = Field(max_length=MAX_IDS)
    rounds: list[Round] = Field(max_length=MAX_ROUNDS)
    token_text: dict[str, Annotated[str, Field(max_length=MAX_TOKEN_TEXT)]] = Field(
        default_factory=dict, max_length=MAX_IDS
    )
    total_ms: Ms = 0.0
    prompt_text: str = Field("", max_length=MAX_PROMPT_CHARS)
    models: dict = Field(default_factory=dict)
    stop: Literal["length", "eos"] = "length"
    pieces: list[str] | None = Field(None, max_length=MAX_IDS)
    text: str | None = Field(None, max_length=MAX_IDS * MAX_TOKEN_TEXT)
    replay: str | None = Field(None, max_length=200)  # the decoder whose output the rounds commit (engine.loop)

    @model_validator(mode="after")
    def _consistent(self):
        _check_config(self.config)
        if self.replay is None and any(len(r.emitted) > len(r.accepted_path) + 1 for r in self.rounds):
            raise ValueError("a round emits its accepted tokens and at most one more")
        emitted = [t for r in self.rounds for t in r.emitted]
        if emitted != self.output_ids:
            raise ValueError(
                f"output_ids ({len(self.output_ids)} tokens) must be the rounds' emitted tokens "
                f"({len(emitted)} in {len(self.rounds)} rounds)"
            )
        if any(r.index != i for i, r in enumerate(self.rounds)):
            raise ValueError("rounds must be numbered 0, 1, 2, ... in order")
        if self.pieces is not None and len(self.pieces) != len(self.output_ids):
            n, m = len(self.output_ids), len(self.pieces)
            raise ValueError(f"pieces must hold one text per output id ({n}), not {m}")
        if self.text is not None and self.pieces is not None and self.text != "".join(self.pieces):
            raise ValueError("text must be the output's pieces joined")
        if any(not k.isdigit() for k in self.token_text):
            raise ValueError("token_text keys must be token ids")
        vocab = self.models.get("vocab_size")
        if vocab is not None:
            ids = [*self.prompt_ids, *self.output_ids, *(t for r in self.rounds for t in r.tree.tokens)]
            if not isinstance(vocab, int) or any(t >= vocab for t in ids):
                raise ValueError(f"every token id must lie inside the vocabulary of {vocab} the trace names")
        return self


CONFIG_GROUPS = tuple(f.name for f in fields(RunConfig) if is_dataclass(getattr(RunConfig(), f.name)))  # its parts


def _check_config(config: dict) -> None:
    """The run's settings as the viewers read them: each of RunConfig's parts an object, the sampling settings the
    ones `SamplingConfig` accepts."""
    for group in CONFIG_GROUPS:
        if group in config and not isinstance(config[group], dict):
            raise ValueError(f"config.{group} must be an object of settings, not {type(config[group]).__name__}")
    known = {f.name for f in fields(SamplingConfig)}
    try:
        SamplingConfig(**{k: v for k, v in config.get("sampling", {}).items() if k in known})
    except (TypeError, ValueError) as e:
        raise ValueError(f"config.sampling: {e}") from None


def load_json(text: str | bytes, max_bytes: int, what: str) -> object:
    """`text` parsed as JSON, or a ValueError saying it is too large or not JSON (`what`: "trace file", ...)."""
    if len(text) > max_bytes:
        raise ValueError(f"{what} is larger than {max_bytes // 1_000_000} MB")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"{what} is not valid JSON: {e}") from None


def checked(model: type[BaseModel], d: object, what: str):
    """`d` as a `model`, or a ValueError naming the first field that is wrong and why (`what`: "specviz trace")."""
    try:
        return model.model_validate(d)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        where = ".".join(str(x) for x in err["loc"]) or f"the {what}"
        raise ValueError(f"not a valid {what}: {where}: {err['msg'].removeprefix('Value error, ')}") from None


def validate(d: object) -> TraceFile:
    """`d` (parsed JSON) as a TraceFile, or a ValueError naming the first field that is wrong and why."""
    if not isinstance(d, dict):
        raise ValueError("a trace must be a JSON object")
    return checked(TraceFile, d, "specviz trace")


def json_schema() -> dict:
    """The published JSON Schema of a trace file (docs/trace.schema.json)."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **TraceFile.model_json_schema()}
