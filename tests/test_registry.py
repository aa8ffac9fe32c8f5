"""One registry: every method has one description (methods.catalog) and one builder (methods.registry), and the
dashboard, the command line and the bench set the same RunConfig fields from the same knob values."""

import pytest

from specviz.app.inputs import make_run
from specviz.app.settings import Settings
from specviz.core.config import METHODS, RunConfig
from specviz.methods.catalog import CATALOG, with_knobs
from specviz.methods.registry import BUILDERS
from specviz.tools.bench.specs import BenchConfig, method_knobs, parse_settings
from specviz.tools.cli import parser, run_config

D = RunConfig()
VALUES = {"k": 4, "start_k": 4, "h": 0.7, "budget": 5, "width": 3, "depth": 2, "copy": True}


def knob_values(run: RunConfig, method: str) -> dict:
    out = {}
    for knob, (part, sub) in CATALOG[method].knobs.items():
        out[knob] = getattr(run, sub) if not part else getattr(getattr(run, part), sub)
    return out


def test_every_method_is_described_and_built_once():
    assert tuple(CATALOG) == METHODS and set(BUILDERS) == set(METHODS)
    for m in CATALOG.values():
        assert m.label and m.short and (m.spec_knob is None or m.spec_knob in m.knobs)


@pytest.mark.parametrize("method", METHODS)
def test_app_and_cli_set_the_same_knobs(method):
    app = make_run(
        Settings(
            method=method,
            **{n: VALUES[n] for n in ("k", "h", "budget", "width", "depth", "start_k", "copy")},
            temperature=0.0,
            top_p=1.0,
            max_new_tokens=32,
            seed=0,
        )
    )
    flags = [
        "generate",
        "--prompt",
        "x",
        "--out",
        "x.jsonl",
        "--method",
        method,
        "--k",
        "4",
        "--threshold",
        "0.7",
        "--budget",
        "5",
        "--width",
        "3",
        "--depth",
        "2",
        "--copy",
        "--max-new-tokens",
        "32",
    ]
    cli = run_config(parser().parse_args(flags))
    assert app.method == cli.method == method
    assert knob_values(app, method) == knob_values(cli, method)
    assert all(knob_values(app, method)[k] == VALUES[k] for k in CATALOG[method].knobs if k in VALUES)


def test_with_knobs_sets_only_the_methods_own_fields_and_refuses_unknown_methods():
    run = with_knobs(D, "dyspec", {"budget": 7, "k": 9, "width": 5})
    assert run.dyspec.budget == 7 and run.chain == D.chain and run.tree == D.tree
    with pytest.raises(ValueError, match="unknown method 'medusa'; choose one of ar, chain"):
        with_knobs(D, "medusa", {})


def test_bench_spec_parameter_sets_the_catalog_knob():
    for spec, method in (
        ("specdecpp:0.7", "specdecpp"),
        ("dyspec:5", "dyspec"),
        ("sequoia:5", "sequoia"),
        ("kary:3", "kary"),
    ):
        s = next(s for s in parse_settings([spec], BenchConfig()) if s.method == method)
        part, sub = CATALOG[method].knobs[CATALOG[method].spec_knob]
        assert getattr(method_knobs(s)[part], sub) == float(spec.split(":")[1])
