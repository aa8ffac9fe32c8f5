"""A served engine's run as specviz records it (`specviz engine`): the file's schema, checked before any field is used.

Per prompt: what the engine returned, unchanged (its output ids and its per-step accepted and drafted counts), and,
where specviz replayed it, the reference: specviz's own free run with the same folders and settings, specviz's count
at each of the engine's steps (its replay of the engine's output), the steps where the two differ with a reason,
and the first of them. `json_schema()` is the published form (docs/engine-run.schema.json).

Step notation, declared once: the engine's prefill emits output token 0 with no draft; engine step s then starts at
output position `start[s]` = 1 + sum over earlier steps of (accepted + 1), drafts `drafted[s]` tokens, accepts
`accepted[s]` of them and emits accepted[s] + 1 tokens (fewer where the length limit cuts the last step).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from specviz.core.schema import MAX_IDS, Record, TokenId, checked, load_json

RUN_FORMAT = "specviz-engine-run/1"
MAX_RUN_BYTES = 200_000_000
MAX_PROMPTS = 1000
Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]

# why specviz's count at an engine step differs from the engine's (analysis.served says how each is found)
REASONS = {
    "target_tie": "a near-tie in the target that the two numerics broke differently",
    "target": "the two targets disagree by more than a near-tie (not the same model, or far numerics)",
    "draft_tie": "a near-tie in the draft that the two numerics broke differently",
    "draft": "the engine's draft proposes what the reference draft does not (the export or the drafter)",
    "verification": "the same draft and output with another count (the engine's verification is not the algorithm's)",
}
Reason = Literal["target_tie", "target", "draft_tie", "draft", "verification"]


def step_starts(n_output: int, accepted: list[int]) -> list[int]:
    """Each engine step's first output position (see the module's notation); steps past the output are left out."""
    starts, pos = [], 1
    for a in accepted:
        if pos >= n_output:
            break
        starts.append(pos)
        pos += a + 1
    return starts


def step_tokens(output_ids: list[int], accepted: list[int]) -> list[list[int]]:
    """The tokens each engine step emitted: accepted[s] + 1 from its start, cut at the output's end."""
    starts = step_starts(len(output_ids), accepted)
    return [list(output_ids[p : p + a + 1]) for p, a in zip(starts, accepted)]


class StepDifference(Record):
    step: Count
    position: Count  # output position where the step starts
    engine: Count  # accepted by the engine
    specviz: Count  # accepted by specviz from the same prefix
    reason: Reason | None = None  # None at T > 0: sampled counts differ by their draws
    detail: dict = Field(default_factory=dict)  # the two candidates and their probabilities


class Reference(Record):
    output_ids: list[TokenId] = Field(max_length=MAX_IDS)  # specviz's own free run
    per_step_accepted: list[Count] = Field(max_length=MAX_IDS)  # specviz's count at each engine step
    first_difference: StepDifference | None = None
    differences: list[StepDifference] = Field(default_factory=list, max_length=MAX_IDS)
    output_first_difference: Count | None = None  # first output position where the free run parts from the engine
    free_run_accepted: list[Count] = Field(default_factory=list, max_length=MAX_IDS)  # the free run's rounds
    replay: dict | None = None  # the replay as a specviz trace (its rounds are the engine's steps)
    wall_s: Seconds = 0.0  # the free run, end to end


class PromptRecord(Record):
    question_id: str | int | None = None
    category: str | None = None
    text: str
    prompt_ids: list[TokenId] = Field(max_length=MAX_IDS)
    output_ids: list[TokenId] = Field(max_length=MAX_IDS)
    per_step_accepted: list[Count] | None = Field(None, max_length=MAX_IDS)
    per_step_drafted: list[Count] | None = Field(None, max_length=MAX_IDS)
    finish_reason: str | None = None
    wall_s: Seconds  # the request, end to end, as the client saw it
    metrics: dict = Field(default_factory=dict)  # the engine's own per-request metrics, unchanged
    reference: Reference | None = None

    @model_validator(mode="after")
    def _consistent(self):
        acc, dr = self.per_step_accepted, self.per_step_drafted
        if (acc is None) != (dr is None) or (acc is not None and len(acc) != len(dr)):
            raise ValueError("per_step_accepted and per_step_drafted must both be there, one entry per step")
        if acc is not None and any(a > d for a, d in zip(acc, dr)):
            raise ValueError("a step cannot accept more tokens than it drafted")
        if acc is not None and self.output_ids and sum(a + 1 for a in acc) + 1 < len(self.output_ids):
            raise ValueError("the steps' tokens (accepted + 1 each, plus the prefill's one) fall short of the output")
        ref = self.reference
        if (
            ref is not None
            and acc is not None
            and len(ref.per_step_accepted) != len(step_starts(len(self.output_ids), acc))
        ):
            raise ValueError("reference.per_step_accepted must hold one count per engine step")
        return self


class EngineRun(Record):
    format: Literal["specviz-engine-run/1"] = RUN_FORMAT
    engine: dict  # name, version, url, model, root, max_model_len, speculative (as the engine reports them)
    settings: dict  # prompts file, max_new_tokens, temperature, seed, target, draft
    reference_settings: dict | None = None  # specviz's side: method, K, dtype, drafter, machine
    prompts: list[PromptRecord] = Field(min_length=1, max_length=MAX_PROMPTS)
    recorded: str = ""  # when (ISO 8601)

    @property
    def label(self) -> str:
        e, k = self.engine, self.engine.get("speculative", {}).get("num_spec_tokens")
        return f"{e.get('name', 'engine')} {e.get('version', '')}".strip() + (f", K = {k}" if k else ", no draft")


def validate_run(d: object) -> EngineRun:
    """`d` (parsed JSON) as an EngineRun, or a ValueError naming the first field that is wrong and why."""
    if not isinstance(d, dict):
        raise ValueError("an engine run must be a JSON object")
    if d.get("format") != RUN_FORMAT:
        raise ValueError(f"not a specviz engine run (format {str(d.get('format'))[:40]!r}, expected {RUN_FORMAT!r})")
    return checked(EngineRun, d, "engine run")


def read_run(text: str | bytes) -> EngineRun:
    """An engine run from its JSON text: size, JSON and schema checked, each with a sentence."""
    return validate_run(load_json(text, MAX_RUN_BYTES, "engine run file"))


def json_schema() -> dict:
    """The published JSON Schema of an engine run file (docs/engine-run.schema.json)."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **EngineRun.model_json_schema()}
