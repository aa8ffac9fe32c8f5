"""Bench method specs (`chain:3+eagle@skinny`) -> settings, and the prompt suite they run on."""

from __future__ import annotations

from dataclasses import dataclass, replace

from specviz.core.config import (
    MAX_NEW_TOKENS_LIMIT,
    ChainConfig,
    RunConfig,
    _check,
)
from specviz.methods.catalog import CATALOG, COPYING, METHODS, label


@dataclass(frozen=True)
class BenchConfig:
    """`specviz bench`: the prompt suite and the settings swept (Spec-Bench sample by default).

    chain_ks: our fixed-K chains; hf_ks: Hugging Face assisted generation with a constant K (threshold 0),
    run beside its default dynamic schedule. warmup_tokens: length of the untimed warm-up runs.
    """

    n_prompts: int = 80
    max_new_tokens: int = 128
    temperatures: tuple[float, ...] = (0.0, 1.0)
    seed: int = 0
    chain_ks: tuple[int, ...] = (2, 3, 4)
    hf_ks: tuple[int, ...] = (2, 4, 8)
    warmup_tokens: int = 16

    def __post_init__(self):
        _check(
            int(self.n_prompts) == self.n_prompts and self.n_prompts >= 1,
            f"need at least one prompt, got {self.n_prompts}",
        )
        _check(
            1 <= self.max_new_tokens <= MAX_NEW_TOKENS_LIMIT,
            f"max new tokens must lie in [1, {MAX_NEW_TOKENS_LIMIT}], got {self.max_new_tokens}",
        )
        _check(
            len(self.temperatures) >= 1 and all(0 <= t <= 100 for t in self.temperatures),
            f"temperatures must be numbers in [0, 100], got {self.temperatures}",
        )
        _check(all(1 <= k <= 64 for k in (*self.chain_ks, *self.hf_ks)), "every K must lie in [1, 64]")
        _check(
            0 <= self.warmup_tokens <= MAX_NEW_TOKENS_LIMIT, f"warm-up tokens must lie in [0, {MAX_NEW_TOKENS_LIMIT}]"
        )


OURS_FIXED = ("ar", "chain", "heuristic")
KERNELS = {
    "": "",
    "skinny": "specviz kernels",
    "stock": "stock kernels",  # spec suffix @name (kernels.py)
    "fp32draft": "specviz kernels, draft steps over the draft's own weights",
    "mkl": "specviz kernels without the row kernel",
}
DRAFTER_LABELS = {"eagle": "EAGLE drafter", "model": "standalone draft"}  # spec suffix +name


@dataclass(frozen=True)
class Setting:
    key: str  # "ar", "chain:2", "dyspec", "hf", "hf-assist", "hf-assist:4", "hf-heuristic"
    label: str
    kind: str  # "ours" | "hf"
    method: str  # our method name, or the Hugging Face mode
    k: int | None = None
    knobs: tuple = ()  # (RunConfig field, sub-field, value) set by a parametrised spec, e.g. specdecpp:0.8
    kernels: str = ""  # "skinny" | "stock" | "fp32draft" | "mkl" (KERNELS); "" = the default: ours skinny, HF stock
    drafter: str = "auto"  # RunConfig.drafter: spec suffix +eagle / +model (HF always uses the standalone draft)
    copy: bool = False  # RunConfig.copy: spec suffix +copy (dyspec-lookup:B = dyspec:B+copy)
    static: bool = False  # spec suffix +static: a reduced draft head without its context vocabulary (ablation)
    record: bool = True  # RunConfig.record_top at its default; spec suffix +norecord: 0 (what the inspector costs)

    @property
    def hf_assisted(self) -> bool:
        return self.kind == "hf" and self.method not in ("plain", "lookup")  # a draft model assists


# -- prompts and settings ----------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """One method spec, parsed: `name[:arg][/extend][+modifier ...][@kernels]`."""

    full: str  # as written
    text: str  # without its @kernels and +modifiers
    name: str
    arg: str
    extend: str
    mods: frozenset[str]  # copy, static, norecord
    drafter: str  # "", or a DRAFTER_LABELS key
    kernels: str  # a KERNELS key

    @property
    def number(self) -> float | None:
        return float(self.arg) if self.arg else None

    @property
    def k(self) -> int | None:
        return int(self.arg) if self.arg and self.name in ("chain", "hf-assist", "hf-heuristic", "hf-lookup") else None


MODS = ("copy", "static", "norecord")
ALL_SPECS = "chain:K, lookup:K/E, hf, hf-assist, hf-assist:K, hf-heuristic, hf-lookup:K"


def parse_spec(full: str) -> Spec:
    """`full` -> a Spec; a ValueError names the part that is wrong."""
    spec, _, kern = full.partition("@")
    if kern not in KERNELS:
        raise ValueError(f"method spec {full!r}: the part after '@' must be one of {', '.join(KERNELS)}")
    spec, *plus = spec.split("+")
    mods = frozenset(p for p in plus if p in MODS)
    rest = [p for p in plus if p not in MODS]
    if len(rest) > 1 or (rest and rest[0] not in DRAFTER_LABELS):
        raise ValueError(
            f"method spec {full!r}: the parts after '+' must be one of {', '.join(DRAFTER_LABELS)} "
            "and/or copy, static, norecord"
        )
    name, _, arg = spec.partition(":")
    arg, _, extend = arg.partition("/")  # lookup:K/E, ...:B/E+copy: copies in all, past the budget
    if name == "dyspec-lookup":
        mods |= {"copy"}
    if extend and not ("copy" in mods or name == "lookup"):
        raise ValueError(f"method spec {full!r}: '/E' (copies in all) needs the lookup method or +copy")
    parsed = Spec(full, spec, name, arg, extend, mods, rest[0] if rest else "", kern)
    try:  # every number in it parses
        parsed.number, parsed.k, int(extend or 0)
    except ValueError:
        raise ValueError(f"method spec {spec!r}: the part after ':' must be a number") from None
    return parsed


def _hf(label_: str, method: str, k: int):
    return lambda s, cfg: [Setting(s.text, label_.format(k=s.k or k), "hf", method, s.k or k)]


def _chain(s: Spec, cfg: BenchConfig) -> list[Setting]:
    ks = [s.k] if s.k else cfg.chain_ks
    return [Setting(f"chain:{k}", f"specviz {label('chain')}, K={k}", "ours", "chain", k) for k in ks]


def _dyspec_variant(s: Spec, cfg: BenchConfig) -> list[Setting]:
    t = 0.0 if s.name == "dyspec-heap" else s.number if s.number is not None else RunConfig().dyspec.level_threshold
    variant = "heap variant" if t == 0 else f"level variant (t={t:g})"
    return [
        Setting(
            s.text, f"specviz {label('dyspec')}, {variant}", "ours", "dyspec", knobs=(("dyspec", "level_threshold", t),)
        )
    ]


def _dyspec_lookup(s: Spec, cfg: BenchConfig) -> list[Setting]:
    b = int(s.number) if s.number is not None else RunConfig().dyspec.budget
    return [
        Setting(s.text, f"specviz {label('dyspec')}, budget={b}", "ours", "dyspec", knobs=(("dyspec", "budget", b),))
    ]


def _lookup(s: Spec, cfg: BenchConfig) -> list[Setting]:
    k = int(s.number) if s.number is not None else RunConfig().lookup.k
    return [Setting(s.text, f"specviz {label('lookup')}, k={k}", "ours", "lookup", knobs=(("lookup", "k", k),))]


def _ours(s: Spec, cfg: BenchConfig) -> list[Setting]:
    if not s.arg:
        return [Setting(s.name, f"specviz {label(s.name)}", "ours", s.name)]
    m = CATALOG[s.name]
    if m.spec_knob is None:
        raise ValueError(f"method {s.name!r} takes no ':' parameter")
    part, sub = m.knobs[m.spec_knob]
    cast = type(getattr(getattr(RunConfig(), part), sub))  # the knob's own type: int or float
    return [
        Setting(s.text, f"specviz {label(s.name)}, {sub}={s.arg}", "ours", s.name, knobs=((part, sub, cast(s.number)),))
    ]


def _hf_assist(s: Spec, cfg: BenchConfig) -> list[Setting]:
    if s.k:
        return [Setting(s.text, f"HF assisted, constant K={s.k}", "hf", "constant", s.k)]
    return [Setting(s.text, "HF assisted, library defaults (dynamic: K<=20, confidence 0.4)", "hf", "dynamic")]


# spec name -> its settings; `needs`: the method that must be available for it (None: always)
BASES = {
    "chain": (None, _chain),
    "hf": (None, lambda s, cfg: [Setting("hf", "HF generate, target alone", "hf", "plain")]),
    "hf-assist": (None, _hf_assist),
    "hf-lookup": (None, _hf("HF prompt lookup, K={k} (no draft model)", "lookup", 10)),
    "hf-heuristic": (None, _hf("HF assisted, heuristic schedule (start K={k})", "heuristic", 5)),
    "dyspec-level": ("dyspec", _dyspec_variant),
    "dyspec-heap": ("dyspec", _dyspec_variant),
    "dyspec-lookup": ("dyspec", _dyspec_lookup),
    "lookup": ("lookup", _lookup),
}


def base_settings(s: Spec, cfg: BenchConfig, available) -> list[Setting]:
    """The settings a spec's name and argument make, before its modifiers."""
    needs, build = BASES.get(s.name, (s.name, _ours))
    if needs is not None and needs not in available:
        raise ValueError(
            f"unknown method {s.text!r}; available: {', '.join(available)}, {ALL_SPECS}; suffixes +eagle, +model, +copy"
        )
    return build(s, cfg)


def _refuse_if(bad, why: str):
    def check(s: Spec, out: list[Setting]) -> None:
        if any(bad(x) for x in out):
            raise ValueError(f"method spec {s.full!r}: {why}")

    return check


# modifiers, in the order they apply: (applies to the spec?, refusal check, the setting it makes of one)
MODIFIERS = (
    (
        lambda s: bool(s.extend),
        lambda s, out: None,
        lambda s, x: replace(
            x, label=f"{x.label}, extend_to={s.extend}", knobs=(*x.knobs, ("lookup", "extend_to", int(s.extend)))
        ),
    ),
    (
        lambda s: "copy" in s.mods,
        _refuse_if(lambda x: x.kind == "hf" or x.method not in COPYING, f"+copy applies to {', '.join(COPYING)} only"),
        lambda s, x: replace(
            x,
            key=f"{x.key}+copy" if s.name != "dyspec-lookup" else x.key,
            label=f"{x.label} + copying from the context",
            copy=True,
        ),
    ),
    (
        lambda s: bool(s.drafter),
        _refuse_if(lambda x: x.kind == "hf", "Hugging Face settings always use the standalone draft"),
        lambda s, x: replace(
            x, key=f"{x.key}+{s.drafter}", label=f"{x.label} ({DRAFTER_LABELS[s.drafter]})", drafter=s.drafter
        ),
    ),
    (
        lambda s: "static" in s.mods,
        _refuse_if(lambda x: x.kind == "hf" or x.method == "ar", "+static applies to specviz's drafting methods only"),
        lambda s, x: replace(
            x, key=f"{x.key}+static", label=f"{x.label}, head ids only (no context vocabulary)", static=True
        ),
    ),
    (
        lambda s: "norecord" in s.mods,
        _refuse_if(lambda x: x.kind == "hf", "+norecord applies to specviz's methods only"),
        lambda s, x: replace(
            x, key=f"{x.key}+norecord", label=f"{x.label}, nothing recorded for the inspector", record=False
        ),
    ),
    (
        lambda s: bool(s.kernels),
        lambda s, out: None,
        lambda s, x: replace(
            x, key=f"{x.key}@{s.kernels}", label=f"{x.label} [{KERNELS[s.kernels]}]", kernels=s.kernels
        ),
    ),
)


def parse_settings(specs: list[str] | None, cfg: BenchConfig, available=METHODS) -> list[Setting]:
    """Method specs -> settings. 'chain' expands to cfg.chain_ks; 'ar' is always included (the reference)."""
    if not specs or specs == ["all"]:
        specs = (
            ["ar", "chain", "heuristic"]
            + [m for m in available if m not in OURS_FIXED]
            + ["hf", "hf-assist"]
            + [f"hf-assist:{k}" for k in cfg.hf_ks]
        )
    out: list[Setting] = []
    for full in specs:
        s = parse_spec(full)
        made = base_settings(s, cfg, available)
        for applies, check, apply in MODIFIERS:
            if applies(s):
                check(s, made)
                made = [apply(s, x) for x in made]
        out += made
    if not any(s.key == "ar" for s in out):
        out.insert(0, Setting("ar", f"specviz {label('ar')}", "ours", "ar"))
    return list({s.key: s for s in out}.values())


def method_knobs(s: Setting) -> dict:
    """RunConfig fields for a setting: chain:K, or the one knob a parametrised spec sets."""
    if s.method == "chain":
        return {"chain": ChainConfig(s.k)}
    out: dict = {}
    for field, sub, value in s.knobs:
        out[field] = replace(out.get(field, getattr(RunConfig(), field)), **{sub: value})
    return out
