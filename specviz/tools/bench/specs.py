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
        spec, _, kern = full.partition("@")
        if kern not in KERNELS:
            raise ValueError(f"method spec {full!r}: the part after '@' must be one of {', '.join(KERNELS)}")
        spec, *plus = spec.split("+")
        copy, static, norecord = "copy" in plus, "static" in plus, "norecord" in plus
        plus = [p for p in plus if p not in ("copy", "static", "norecord")]
        if len(plus) > 1 or (plus and plus[0] not in DRAFTER_LABELS):
            raise ValueError(
                f"method spec {full!r}: the parts after '+' must be one of {', '.join(DRAFTER_LABELS)} "
                "and/or copy, static, norecord"
            )
        drafter = plus[0] if plus else ""
        n_before = len(out)
        name, _, arg = spec.partition(":")
        arg, _, extend = arg.partition("/")  # lookup:K/E, ...:B/E+copy: copies in all, past the budget
        copy = copy or name == "dyspec-lookup"
        if extend and not (copy or name == "lookup"):
            raise ValueError(f"method spec {full!r}: '/E' (copies in all) needs the lookup method or +copy")
        try:
            ext = (("lookup", "extend_to", int(extend)),) if extend else ()
            k = int(arg) if arg and name in ("chain", "hf-assist", "hf-heuristic", "hf-lookup") else None
            x = float(arg) if arg else None
        except ValueError:
            raise ValueError(f"method spec {spec!r}: the part after ':' must be a number") from None
        if name == "chain":
            out += [
                Setting(f"chain:{x}", f"specviz {label('chain')}, K={x}", "ours", "chain", x)
                for x in ([k] if k else cfg.chain_ks)
            ]
        elif name == "hf":
            out.append(Setting("hf", "HF generate, target alone", "hf", "plain"))
        elif name == "hf-assist" and k:
            out.append(Setting(spec, f"HF assisted, constant K={k}", "hf", "constant", k))
        elif name == "hf-assist":
            out.append(Setting(spec, "HF assisted, library defaults (dynamic: K<=20, confidence 0.4)", "hf", "dynamic"))
        elif name == "hf-lookup":
            out.append(Setting(spec, f"HF prompt lookup, K={k or 10} (no draft model)", "hf", "lookup", k or 10))
        elif name == "hf-heuristic":
            out.append(Setting(spec, f"HF assisted, heuristic schedule (start K={k or 5})", "hf", "heuristic", k or 5))
        elif name in ("dyspec-level", "dyspec-heap") and "dyspec" in available:
            t = 0.0 if name == "dyspec-heap" else x if x is not None else RunConfig().dyspec.level_threshold
            variant = "heap variant" if t == 0 else f"level variant (t={t:g})"
            out.append(
                Setting(
                    spec,
                    f"specviz {label('dyspec')}, {variant}",
                    "ours",
                    "dyspec",
                    knobs=(("dyspec", "level_threshold", t),),
                )
            )
        elif name == "dyspec-lookup" and "dyspec" in available:
            b = int(x) if x is not None else RunConfig().dyspec.budget
            out.append(
                Setting(
                    spec, f"specviz {label('dyspec')}, budget={b}", "ours", "dyspec", knobs=(("dyspec", "budget", b),)
                )
            )
        elif name == "lookup" and name in available:
            k = int(x) if x is not None else RunConfig().lookup.k
            out.append(
                Setting(spec, f"specviz {label('lookup')}, k={k}", "ours", "lookup", knobs=(("lookup", "k", k),))
            )
        elif name in available and arg:
            if CATALOG[name].spec_knob is None:
                raise ValueError(f"method {name!r} takes no ':' parameter")
            field, sub = CATALOG[name].knobs[CATALOG[name].spec_knob]
            cast = type(getattr(getattr(RunConfig(), field), sub))  # the knob's own type: int or float
            out.append(
                Setting(spec, f"specviz {label(name)}, {sub}={arg}", "ours", name, knobs=((field, sub, cast(x)),))
            )
        elif name in available:
            out.append(Setting(name, f"specviz {label(name)}", "ours", name))
        else:
            raise ValueError(
                f"unknown method {spec!r}; available: {', '.join(available)}, chain:K, lookup:K/E, "
                "hf, hf-assist, hf-assist:K, hf-heuristic, hf-lookup:K; suffixes +eagle, +model, +copy"
            )
        if ext:
            out[n_before:] = [
                replace(s, label=f"{s.label}, extend_to={extend}", knobs=(*s.knobs, *ext)) for s in out[n_before:]
            ]
        if copy:
            if any(s.kind == "hf" or s.method not in COPYING for s in out[n_before:]):
                raise ValueError(f"method spec {full!r}: +copy applies to {', '.join(COPYING)} only")
            out[n_before:] = [
                replace(
                    s,
                    key=f"{s.key}+copy" if name != "dyspec-lookup" else s.key,
                    label=f"{s.label} + copying from the context",
                    copy=True,
                )
                for s in out[n_before:]
            ]
        if drafter:
            if any(s.kind == "hf" for s in out[n_before:]):
                raise ValueError(f"method spec {full!r}: Hugging Face settings always use the standalone draft")
            out[n_before:] = [
                replace(s, key=f"{s.key}+{drafter}", label=f"{s.label} ({DRAFTER_LABELS[drafter]})", drafter=drafter)
                for s in out[n_before:]
            ]
        if static:
            if any(s.kind == "hf" or s.method == "ar" for s in out[n_before:]):
                raise ValueError(f"method spec {full!r}: +static applies to specviz's drafting methods only")
            out[n_before:] = [
                replace(
                    s, key=f"{s.key}+static", label=f"{s.label}, head ids only (no context vocabulary)", static=True
                )
                for s in out[n_before:]
            ]
        if norecord:
            if any(s.kind == "hf" for s in out[n_before:]):
                raise ValueError(f"method spec {full!r}: +norecord applies to specviz's methods only")
            out[n_before:] = [
                replace(
                    s, key=f"{s.key}+norecord", label=f"{s.label}, nothing recorded for the inspector", record=False
                )
                for s in out[n_before:]
            ]
        if kern:
            out[n_before:] = [
                replace(s, key=f"{s.key}@{kern}", label=f"{s.label} [{KERNELS[kern]}]", kernels=kern)
                for s in out[n_before:]
            ]
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
