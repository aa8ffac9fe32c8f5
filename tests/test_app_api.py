"""The page's endpoints as a client and an assistant call them: the parameters named as a user would, a keyword
call with the rest at the page's defaults, and the MCP tools with every setting documented."""

import asyncio
import json
from pathlib import Path

import pytest
from app_server import app_url

gradio_client = pytest.importorskip("gradio_client")

PROMPT = "Name three primary colours."


@pytest.fixture(scope="module")
def client():
    return gradio_client.Client(app_url(), verbose=False)


def test_the_run_endpoint_names_its_parameters_as_a_user_would(client):
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    names = [p["parameter_name"] for p in api["/run"]["parameters"]]
    assert names[:3] == ["prompt", "method", "k"] and "temperature" in names and "max_new_tokens" in names
    assert not [n for n in names if n.endswith("_") or n.startswith("value_")], names
    outputs = [r["label"] for r in api["/run"]["returns"]]
    assert outputs[0] == "status" and outputs[-1] == "trace" and "tree" in outputs, outputs
    assert not [n for n in outputs if not n or n.startswith("value_")], outputs


def test_keyword_call_from_the_api_docs(client):
    """docs/api.md's example: named parameters, the rest at the page's defaults; the last output is the trace."""
    out = client.predict(prompt="Name a colour.", method="dyspec", max_new_tokens=2, compare=False, api_name="/run")
    assert out[0].startswith("Done: 2 tokens")
    trace = out[-1]
    assert trace["method"] == "dyspec" and len(trace["output_ids"]) == 2 and trace["text"]
    file = out[-2]["value"] if isinstance(out[-2], dict) else out[-2]  # the DownloadButton's update, or its path
    assert json.loads(Path(file).read_text()) == trace


def test_an_assistant_measures_a_run_through_the_mcp_endpoint():
    """The page's endpoints as MCP tools: list them, call `measure`, read back acceptance per position."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def call():
        async with streamable_http_client(app_url() + "gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as s:
                await s.initialize()
                tools = {t.name: t for t in (await s.list_tools()).tools}
                out = await s.call_tool("measure", {"prompt": PROMPT, "method": "chain", "max_new_tokens": 6})
                return tools, out

    tools, out = asyncio.run(call())
    assert {"run", "measure", "import_trace"} <= tools.keys()
    for name in ("run", "race", "run_set", "measure"):  # every setting an endpoint takes, documented
        props = tools[name].inputSchema["properties"]
        assert "budget" in props and "draft tree nodes" in props["budget"].get("description", ""), (name, props)
    text = "".join(getattr(c, "text", "") for c in out.content)
    got = json.loads(text)
    assert got["method"] == "chain" and got["tokens"] == 6 and got["target_calls"] >= 2
    assert got["acceptance_by_position"][0]["position"] == 1 and "rate" in got["acceptance_by_position"][0]
