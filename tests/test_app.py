"""The dashboard through gradio_client: a run on the real default pair, export -> import replay, 8 clients at
once, bad input answered with an error while the app keeps serving, public-mode model allow-list."""

import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from app_server import DTYPE, app_url  # noqa: E402

from specviz.app import exports, files, policy  # noqa: E402
from specviz.app import ui as app  # noqa: E402
from specviz.core.config import RunConfig  # noqa: E402
from specviz.core.pairs import DEFAULT_PAIR, PAIRS

gradio_client = pytest.importorskip("gradio_client")
from gradio_client.exceptions import AppError  # noqa: E402

D = RunConfig()
PROMPT = "Name three primary colours."
OUTPUTS = (
    "status",
    "cards",
    "spans",
    "round",
    "tree",
    "stop",
    "speed",
    "pos",
    "hist",
    "calib",
    "growth",
    "inspect",
    "verification step",
    "verification words",
    "verification bars",
    "download",
    "trace",
)


def run_args(prompt=PROMPT, method="chain", max_new=3, compare=False, **kw):
    v = dict(
        k=D.chain.k,
        h=D.specdecpp.threshold,
        budget=D.dyspec.budget,
        width=D.tree.width,
        depth=D.tree.depth,
        start_k=D.heuristic.start_k,
        copy=D.copy,
        temperature=D.sampling.temperature,
        top_p=D.sampling.top_p,
        max_new=max_new,
        seed=D.sampling.seed,
    )
    v.update(kw)
    return [
        prompt,
        method,
        v["k"],
        v["h"],
        v["budget"],
        v["width"],
        v["depth"],
        v["start_k"],
        v["copy"],
        v["temperature"],
        v["top_p"],
        v["max_new"],
        v["seed"],
        DEFAULT_PAIR,
        DTYPE,
        v.get("target", ""),
        "",
        v.get("device_map", ""),
        v.get("max_memory", ""),
        v.get("drafter", D.drafter),
        compare,
    ]


@pytest.fixture(scope="module")
def client():
    return gradio_client.Client(app_url(), verbose=False)


def _run(client, *args):
    return dict(zip(OUTPUTS, client.predict(*args, api_name="/run")))


def _plot_title(plot) -> str:
    fig = json.loads(plot["plot"]) if isinstance(plot["plot"], str) else plot["plot"]
    return fig["layout"]["title"]["text"]


def test_run_then_export_and_replay(client):
    out = _run(client, *run_args(max_new=4, compare=True))
    assert out["status"].startswith("Done: 4 tokens")
    assert _plot_title(out["tree"]).startswith("Round ")
    assert "autoregressive" in _plot_title(out["speed"])
    spans = out["spans"]
    assert len(spans) == 4 and all(s["class_or_confidence"] for s in spans)
    path = out["download"]["value"] if isinstance(out["download"], dict) else out["download"]
    trace, base = files.load_path(path)
    assert trace.method == "chain" and len(trace.output_ids) == 4 and base.method == "ar"
    replay = dict(zip(OUTPUTS, client.predict(gradio_client.handle_file(path), api_name="/import_trace")))
    assert "Replaying" in replay["status"] and replay["spans"] == spans
    assert _plot_title(replay["tree"]) == _plot_title(out["tree"])


def test_eight_clients_at_once():
    url = app_url()

    def one(i):
        c = gradio_client.Client(url, verbose=False)
        return dict(zip(OUTPUTS, c.predict(*run_args(prompt=f"Count to {i + 2}.", max_new=1), api_name="/run")))

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    assert all(r["status"].startswith("Done: 1 token ") for r in results)


def test_stop_cancels_a_run_and_frees_the_model(client):
    job = client.submit(*run_args(max_new=256), api_name="/run")
    deadline = time.monotonic() + 120
    while len(job.outputs()) < 2 and time.monotonic() < deadline:  # the first round has been shown
        time.sleep(0.2)
    assert len(job.outputs()) >= 2
    job.cancel()
    out = _run(client, *run_args(max_new=2))
    assert out["status"].startswith("Done: 2 tokens")


BAD_RUNS = {
    "empty prompt": (run_args(prompt="   "), "the prompt is empty"),
    "huge prompt": (run_args(prompt="x" * 100_000), "100,000 characters long; the limit is 20,000"),
    "absurd K": (run_args(k=10**9), "greater than maximum value 16"),
    "negative temperature": (run_args(temperature=-5), "less than minimum value 0"),
    "tiny temperature": (run_args(temperature=1e-30), "too small to sample with"),
    "absurd length": (run_args(max_new=10**7), "greater than maximum value 512"),
    "negative seed": (run_args(seed=-1), "less than minimum value 0"),
    "unknown method": (run_args(method="warp-drive"), "not in the list of choices"),
    "unknown drafter": (run_args(drafter="medusa"), "not in the list of choices"),
    "huge target path": (run_args(target="/" + "x" * 50_000), "characters long"),
    "a folder that is no model": (run_args(target="/tmp"), "holds no model"),
    "top-p above 1": (run_args(top_p=5), "greater than maximum value 1"),
    "a zero budget": (run_args(budget=0), "less than minimum value 1"),
    "a zero tree width": (run_args(width=0), "less than minimum value 1"),
    "a threshold above 1": (run_args(h=2), "greater than maximum value"),
    "a word for K": (run_args(k="many"), "number"),
    "an unknown pair": (run_args()[:13] + ["some other pair"] + run_args()[14:], "not in the list of choices"),
    "an unknown dtype": (run_args()[:14] + ["fp8"] + run_args()[15:], "not in the list of choices"),
    "a missing target folder": (run_args(target="/no/such/model"), "not found"),
    "a pickle-only hub id": (run_args(target="nobody/no-such-model"), "cannot load model"),
    "an unknown device map": (run_args(device_map="everywhere"), "device map must be one of"),
    "a malformed max memory": (run_args(device_map="auto", max_memory="cpu=lots"), "DEVICE=SIZE pairs"),
}


@pytest.mark.parametrize("name", list(BAD_RUNS))
def test_bad_input_gives_a_sentence_and_the_next_run_is_served(client, name):
    args, needle = BAD_RUNS[name]
    with pytest.raises(AppError) as e:
        client.predict(*args, api_name="/run")
    msg = str(e.value)
    assert needle in msg and "Errno" not in msg and "Traceback" not in msg, msg
    assert _run(client, *run_args(max_new=1))["status"].startswith("Done: 1 token")


def raw_call(endpoint: str, body: str) -> str:
    """One call over plain HTTP, with a JSON body a Python client would not send; the event stream's text."""
    url = app_url()
    r = httpx.post(f"{url}gradio_api/call/{endpoint}", content=body, headers={"content-type": "application/json"})
    r.raise_for_status()
    return httpx.get(f"{url}gradio_api/call/{endpoint}/{r.json()['event_id']}", timeout=120).text


RAW_RUNS = {  # JSON that gradio_client cannot write: a lone surrogate escape, a NaN
    "a lone surrogate in the prompt": (
        json.dumps({"data": run_args(prompt="hi SURROGATE there")}).replace("SURROGATE", "\\ud800"),
        "not valid Unicode text at position 3",
    ),
    "a NaN temperature": (json.dumps({"data": run_args(temperature=float("nan"))}), "temperature must be a number"),
}


@pytest.mark.parametrize("name", list(RAW_RUNS))
def test_raw_json_gives_a_sentence_and_the_next_run_is_served(client, name):
    body, needle = RAW_RUNS[name]
    events = raw_call("run", body)
    assert "event: error" in events and needle in events and "Traceback" not in events, events
    assert _run(client, *run_args(max_new=1))["status"].startswith("Done: 1 token")


def race_args(methods, prompt=PROMPT, **kw):
    return [prompt, methods, *run_args(**kw)[2:-1]]


BAD_RACES = {
    "a race of one": (race_args(["chain"]), "pick 2 to 4 methods"),
    "a race of five": (race_args(["ar", "chain", "heuristic", "dyspec", "kary"]), "pick 2 to 4 methods"),
    "a race with an unknown method": (race_args(["chain", "warp-drive"]), "not in the list of choices"),
    "a race with an empty prompt": (race_args(["ar", "chain"], prompt="  "), "the prompt is empty"),
}


@pytest.mark.parametrize("name", list(BAD_RACES))
def test_a_bad_race_gives_a_sentence_and_the_next_run_is_served(client, name):
    args, needle = BAD_RACES[name]
    with pytest.raises(AppError) as e:
        client.predict(*args, api_name="/race")
    msg = str(e.value)
    assert needle in msg and "Errno" not in msg and "Traceback" not in msg, msg
    assert _run(client, *run_args(max_new=1))["status"].startswith("Done: 1 token")


def test_a_race_of_two_methods_draws_both(client):
    fig = client.predict(*race_args(["ar", "chain"], max_new=3), api_name="/race")
    fig = json.loads(fig["plot"]) if isinstance(fig["plot"], str) else fig["plot"]
    assert len(fig["data"]) >= 2


def _hostile_files(tmp: Path) -> dict[str, Path]:
    good = files.dump(files.load_path(next(iter(files.recorded().values())))[0]) if files.recorded() else None
    bad = {
        "not json": "this is not JSON {",
        "a list": "[1, 2, 3]",
        "deep nesting": "[" * 100_000 + "]" * 100_000,
        "wrong format": json.dumps({"format": "other/9", "rounds": []}),
        "bad statuses": json.dumps(
            {
                "method": "chain",
                "config": {},
                "prompt_ids": [1],
                "output_ids": [],
                "rounds": [
                    {
                        "index": 0,
                        "context_len": 1,
                        "tree": {"tokens": [1, 2], "parents": [-1, 0], "q": [1, 0.5]},
                        "status": ["root", "<img src=x onerror=alert(1)>"],
                        "p": [None, 0.5],
                        "accepted_path": [],
                        "emitted": [3],
                        "correction": "resample",
                        "draft_ms": 1,
                        "verify_ms": 1,
                    }
                ],
            }
        ),
        "cyclic tree": json.dumps(
            {
                "method": "chain",
                "config": {},
                "prompt_ids": [1],
                "output_ids": [],
                "rounds": [
                    {
                        "index": 0,
                        "context_len": 1,
                        "tree": {"tokens": [1, 2], "parents": [-1, 1], "q": [1, 0.5]},
                        "status": ["root", "accepted"],
                        "p": [None, 0.5],
                        "accepted_path": [1],
                        "emitted": [2],
                        "correction": "bonus",
                        "draft_ms": 1,
                        "verify_ms": 1,
                    }
                ],
            }
        ),
    }
    if good:
        d = json.loads(good)
        d["baseline"] = {"method": "chain"}
        bad["bad baseline"] = json.dumps(d)
    out = {}
    for name, text in bad.items():
        p = tmp / (name.replace(" ", "_") + ".json")
        p.write_text(text)
        out[name] = p
    return out


HOSTILE = ("not json", "a list", "deep nesting", "wrong format", "bad statuses", "cyclic tree", "bad baseline")


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_upload_gives_a_sentence_and_the_app_keeps_serving(client, tmp_path, name):
    files = _hostile_files(tmp_path)
    if name not in files:
        pytest.skip("no recorded trace ships with this copy")
    with pytest.raises(AppError) as e:
        client.predict(gradio_client.handle_file(str(files[name])), api_name="/import_trace")
    msg = str(e.value)
    assert "could not load that trace file" in msg and not re.search(r"Errno|Traceback|object has no", msg), msg
    assert _run(client, *run_args(max_new=2))["status"].startswith("Done: 2 tokens")


def test_public_mode_allows_only_listed_pairs(monkeypatch):
    monkeypatch.setenv("SPECVIZ_PUBLIC", "1")
    assert policy.model_config(DEFAULT_PAIR, "auto") == PAIRS[DEFAULT_PAIR].model
    with pytest.raises(ValueError, match="public"):
        policy.model_config(DEFAULT_PAIR, "bf16", target="/etc")
    with pytest.raises(ValueError, match="unknown model pair"):
        policy.model_config("HuggingFaceTB/SmolLM2-1.7B", "bf16")
    monkeypatch.delenv("SPECVIZ_PUBLIC")
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert policy.model_config(DEFAULT_PAIR, "fp32", target="/some/folder").target == "/some/folder"
    monkeypatch.setenv("SPACE_ID", "someone/specviz")  # a Space is public unless told otherwise
    assert policy.public()
    monkeypatch.setenv("SPECVIZ_PUBLIC", "0")
    assert not policy.public()


def test_widget_defaults_come_from_the_config():
    demo = app.build_ui()
    by_label = {getattr(b, "label", None): b for b in demo.blocks.values()}
    assert by_label["K: draft tokens per round"].value == D.chain.k
    assert by_label["max new tokens"].value == D.max_new_tokens
    assert by_label["Method"].value == D.method
    assert by_label["temperature (0 = greedy)"].value == D.sampling.temperature


def test_main_respects_server_env(monkeypatch):
    seen = {}
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.2")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7999")
    monkeypatch.setattr(threading, "Thread", lambda **kw: type("T", (), {"start": lambda self: None})())
    monkeypatch.setattr(app.gr.Blocks, "launch", lambda self, **kw: seen.update(kw))
    app.main()
    assert seen["server_name"] == "127.0.0.2" and seen["server_port"] == 7999 and not seen.get("share")


def test_an_export_file_removed_by_another_run_is_skipped(tmp_path, monkeypatch):
    """Runs clean old exports as they start; a file another visitor's run removed between the listing and its
    age check is skipped, not a failed run."""
    monkeypatch.setattr(exports, "FOLDER", tmp_path)
    old = tmp_path / "specviz-chain-old.json"
    old.write_text("{}")
    stale = time.time() - exports.TTL_S - 60
    os.utime(old, (stale, stale))
    gone = tmp_path / "specviz-chain-gone.json"
    real_glob = Path.glob
    monkeypatch.setattr(Path, "glob", lambda self, pat: [gone, *real_glob(self, pat)])
    path = exports.path("chain")
    assert path.parent == tmp_path and not old.exists()
