"""A run's settings as one value: the endpoints that take them spell its fields out (names, types, help) for the
API page and the MCP tools, and a call gathers them back into one `Settings`."""

import inspect
from dataclasses import fields
from pathlib import Path

import pytest

from specviz.app import handlers, policy
from specviz.app.inputs import make_configs
from specviz.app.settings import NAMES, Settings, endpoint
from specviz.core.config import RunConfig
from specviz.core.pairs import DEFAULT_PAIR


def test_the_endpoints_take_every_setting_by_name_with_its_type_and_help():
    for fn, before, after in (
        (handlers.run, ["page", "prompt"], ["compare"]),
        (handlers.run_set, ["page", "n", "prompts_file"], ["progress"]),
    ):
        params = inspect.signature(fn).parameters
        assert list(params) == [*before, *NAMES, *after]
        for f in fields(Settings):
            assert params[f.name].annotation is not inspect.Parameter.empty
            assert params[f.name].default is inspect.Parameter.empty  # the page passes every control
            assert f"        {f.name}: {f.metadata['help']}" in fn.__doc__
    assert "method" not in inspect.signature(handlers.race).parameters  # a race takes its methods instead
    m = inspect.signature(handlers.measure).parameters
    assert m["max_new_tokens"].default == 64 and m["k"].default == Settings().k


def test_a_call_gathers_the_settings_into_one_value():
    @endpoint(omit=("pair",))
    def echo(prompt: str, settings: Settings, loud: bool):
        """Echo.

        Args:
            prompt: what to echo.
            loud: shout.
        """
        return prompt, settings, loud

    values = {n: getattr(Settings(), n) for n in NAMES if n != "pair"} | {"k": 7, "method": "dyspec"}
    prompt, s, loud = echo("hi", *values.values(), True)
    assert (prompt, loud) == ("hi", True) and s == Settings(k=7, method="dyspec")
    assert echo(prompt="hi", loud=False, **values)[1] == s
    with pytest.raises(TypeError):
        echo("hi", True)  # a setting missing


def test_the_defaults_are_the_config_dataclasses():
    run, model = make_configs(Settings())
    assert run == RunConfig() and model == policy.model_config(DEFAULT_PAIR, Settings().dtype)


def test_the_api_docs_list_every_setting():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
    table = doc.split("## `/run`", 1)[1].split("\n\n", 2)[1]
    assert all(f"`{n}`" in table for n in NAMES), [n for n in NAMES if f"`{n}`" not in table]
