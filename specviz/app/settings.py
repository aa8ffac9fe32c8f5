"""A run's settings as one frozen value, `Settings`: a field per control of the page, by the control's name, with its
type, its default (the config dataclasses') and its help. The endpoints that take settings (`endpoint`) are written
over one `settings` parameter; the signature and docstring Gradio reads for the API page and the MCP tools spell the
fields out, so adding a setting touches this module and the control that shows it."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

from specviz.core.config import METHODS, ModelConfig, RunConfig
from specviz.core.pairs import DEFAULT_PAIR

_RUN = RunConfig()


def _setting(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Settings:
    """What a run is asked for, as the page's controls hold it (checked by `app.inputs.make_configs`)."""

    method: str = _setting(_RUN.method, ", ".join(METHODS) + ".")
    k: int = _setting(_RUN.chain.k, "draft tokens a round (chain; prompt lookup's copy length).")
    h: float = _setting(_RUN.specdecpp.threshold, "SpecDec++'s stop threshold on P(at least one rejection).")
    budget: int = _setting(_RUN.dyspec.budget, "draft tree nodes (dyspec, sequoia).")
    width: int = _setting(_RUN.tree.width, "children a node (kary).")
    depth: int = _setting(_RUN.tree.depth, "tree depth (kary).")
    start_k: int = _setting(_RUN.heuristic.start_k, "the heuristic schedule's first K.")
    copy: bool = _setting(_RUN.copy, "also copy tokens from the context (prompt lookup) where that beats the draft.")
    temperature: float = _setting(_RUN.sampling.temperature, "0 decodes greedily.")
    top_p: float = _setting(_RUN.sampling.top_p, "nucleus sampling's mass.")
    max_new_tokens: int = _setting(_RUN.max_new_tokens, "the most tokens to generate.")
    seed: int = _setting(_RUN.sampling.seed, "the sampling seed.")
    pair: str = _setting(DEFAULT_PAIR, "the model pair, by name.")
    dtype: str = _setting(ModelConfig().dtype, "auto, fp32 or bf16.")
    target: str = _setting("", "a target folder or hub id in place of the pair's (not on a public page).")
    draft: str = _setting("", "a draft folder or hub id in place of the pair's (not on a public page).")
    device_map: str = _setting(
        "",
        "place the target with accelerate: auto, balanced, sequential or a JSON file (not on a public page; "
        "empty: one device).",
    )
    max_memory: str = _setting("", "with device_map, the most each device may hold, e.g. 0=20GiB,cpu=64GiB.")
    drafter: str = _setting(_RUN.drafter, "auto, eagle or model.")


NAMES = tuple(f.name for f in fields(Settings))
_TYPES = typing.get_type_hints(Settings)


def endpoint(
    only: Sequence[str] | None = None, omit: Sequence[str] = (), defaults: dict | None = None, optional: bool = False
):
    """Decorate `fn(..., settings: Settings, ...)`: the function Gradio sees takes the settings `only` names (default
    all, less `omit`) as parameters in place of `settings`, typed, and documented in its docstring's Args from the
    fields' help; a call gathers them into one Settings (the rest at their defaults, or `defaults`'). `optional`:
    the parameters keep their defaults (an endpoint no control feeds); else every one is required, as the page
    passes them all."""
    names = [n for n in (only or NAMES) if n not in omit]
    base = replace(Settings(), **(defaults or {}))

    def wrap(fn):
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        at = [p.name for p in params].index("settings")
        kind, none = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty
        spelled = [
            inspect.Parameter(n, kind, annotation=_TYPES[n], default=getattr(base, n) if optional else none)
            for n in names
        ]
        public = sig.replace(parameters=[*params[:at], *spelled, *params[at + 1 :]])

        def gathered(args, kwargs) -> dict:
            got = public.bind(*args, **kwargs)
            got.apply_defaults()
            values = dict(got.arguments)
            settings = replace(base, **{n: values.pop(n) for n in names})
            return {**values, "settings": settings}

        if inspect.isgeneratorfunction(fn):

            @functools.wraps(fn)
            def call(*args, **kwargs):
                return (yield from fn(**gathered(args, kwargs)))
        else:

            @functools.wraps(fn)
            def call(*args, **kwargs):
                return fn(**gathered(args, kwargs))

        del call.__wrapped__  # what Gradio reads is the public signature, not fn's
        call.__signature__ = public
        call.__annotations__ = {p.name: p.annotation for p in public.parameters.values() if p.annotation is not none}
        call.__doc__ = with_args(fn.__doc__ or "", names)
        return call

    return wrap


def with_args(doc: str, names: Sequence[str]) -> str:
    """`doc`, whose Args section (if any) ends it, with the help of the settings `names` added to that section."""
    helps = {f.name: f.metadata["help"] for f in fields(Settings)}
    head = doc.rstrip() + ("" if "\n    Args:\n" in doc else "\n\n    Args:")
    return head + "".join(f"\n        {n}: {helps[n]}" for n in names) + "\n    "
