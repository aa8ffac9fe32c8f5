"""Every decoding method, described once: name, labels, the knobs a user turns, and what a bench spec sets.

This half of the registry imports no torch, so the dashboard's figures and the command line's argument
parser read it without loading a model; `methods.registry` adds each method's builder under the same name.

A knob is a name a person uses (the app's slider, the command line's flag, the bench spec's `name:X`) bound
to one RunConfig field: `("chain", "k")` is `RunConfig.chain.k`, `("", "copy")` is `RunConfig.copy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from specviz.core.config import METHODS, RunConfig

COPY = ("", "copy")


@dataclass(frozen=True)
class Method:
    name: str
    label: str  # the app's dropdown and the bench's tables
    short: str  # axes and lanes of the figures
    knobs: dict[str, tuple[str, str]] = field(default_factory=dict)  # knob name -> (RunConfig field, sub-field)
    spec_knob: str | None = None  # the knob a bench spec `name:X` sets
    copy: str | None = None  # RunConfig.copy: "switch" (copy rounds), "tree" (copy slots), None


CATALOG: dict[str, Method] = {
    m.name: m
    for m in (
        Method("ar", "Autoregressive (target only)", "autoregressive"),
        Method(
            "chain",
            "Speculative sampling, fixed K",
            "chain, fixed K",
            {"k": ("chain", "k"), "copy": COPY},
            "k",
            "switch",
        ),
        Method(
            "heuristic",
            "HF heuristic K (+2 / -1)",
            "heuristic K",
            {"start_k": ("heuristic", "start_k"), "copy": COPY},
            None,
            "switch",
        ),
        Method(
            "specdecpp",
            "SpecDec++ (acceptance head)",
            "SpecDec++",
            {"h": ("specdecpp", "threshold"), "k_max": ("specdecpp", "k_max"), "copy": COPY},
            "h",
            "switch",
        ),
        Method(
            "dyspec", "DySpec dynamic tree", "DySpec", {"budget": ("dyspec", "budget"), "copy": COPY}, "budget", "tree"
        ),
        Method(
            "kary",
            "Fixed k-ary tree (SpecInfer-style)",
            "k-ary tree",
            {"width": ("tree", "width"), "depth": ("tree", "depth"), "copy": COPY},
            "width",
            "switch",
        ),
        Method(
            "sequoia", "Sequoia DP tree", "Sequoia", {"budget": ("tree", "budget"), "copy": COPY}, "budget", "switch"
        ),
        Method("lookup", "Prompt lookup (no draft model)", "prompt lookup", {"k": ("lookup", "k")}, "k"),
    )
}
assert tuple(CATALOG) == METHODS, "core.config.METHODS names the methods RunConfig accepts; describe each here"
COPY_SWITCHED = tuple(m.name for m in CATALOG.values() if m.copy == "switch")  # RunConfig.copy: copy rounds
COPYING = tuple(m.name for m in CATALOG.values() if m.copy)  # ... and DySpec: copy slots in its tree
TREES = ("dyspec", "kary", "sequoia")  # the methods whose drafts branch (the others draft a chain, or nothing)


def method(name: str) -> Method:
    """The method called `name`, or a ValueError that lists the ones there are."""
    if name not in CATALOG:
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}")
    return CATALOG[name]


def knob_values(run: RunConfig) -> dict[str, object]:
    """The value of each knob `run.method` has, read from `run` (the reverse of `with_knobs`)."""
    out = {}
    for knob, (part, sub) in method(run.method).knobs.items():
        out[knob] = getattr(run, sub) if not part else getattr(getattr(run, part), sub)
    return out


def label(name: str) -> str:
    return CATALOG[name].label if name in CATALOG else name


def with_knobs(run: RunConfig, name: str, values: dict[str, object]) -> RunConfig:
    """`run` as method `name` with the given knob values set (None = leave the default); knobs the method does not
    have are ignored. The config dataclasses check each value's range."""
    m = method(name)
    out = replace(run, method=name)
    for knob, value in values.items():
        if value is None or knob not in m.knobs:
            continue
        part, sub = m.knobs[knob]
        out = (
            replace(out, **{sub: value})
            if not part
            else replace(out, **{part: replace(getattr(out, part), **{sub: value})})
        )
    return out
