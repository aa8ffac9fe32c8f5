"""A served engine's run, without the server: the step notation, the forced replay (each step's round equals a fresh
specviz round from that prefix), the reasons given for each kind of difference, the run file's schema, the figures,
and the HTTP client's sentences against addresses on this machine that are not such a server."""

import http.server
import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import make_pair

from specviz.analysis.served import (
    TIE_LOGIT,
    by_position,
    classify,
    compare_steps,
    histogram,
    pair_runs,
    sampled_check,
    wilson,
)
from specviz.core.config import ChainConfig, RunConfig, SamplingConfig
from specviz.core.served import EngineRun, read_run, step_starts, step_tokens, validate_run
from specviz.core.served import json_schema as run_schema
from specviz.core.server import ServerError, check_url, probe
from specviz.core.trace import DraftTree, GenerationTrace, RoundTrace
from specviz.engine import generate
from specviz.engine.replay import replay
from specviz.viz.served import (
    ab_figure,
    histogram_figure,
    lengths_figure,
    positions_figure,
    reasons_html,
    sampled_note,
)

PROMPT = [3, 4, 5, 6]
CHAIN = RunConfig(method="chain", chain=ChainConfig(k=3), drafter="model", max_new_tokens=24)


def test_step_boundaries_follow_the_counts():
    out = list(range(10, 20))  # 10 tokens: the prefill's, then steps of 1, 3, 2, 4 (the last cut to 3)
    acc = [0, 2, 1, 3, 0]
    assert step_starts(len(out), acc) == [1, 2, 5, 7]
    assert step_tokens(out, acc) == [[11], [12, 13, 14], [15, 16], [17, 18, 19]]


@pytest.mark.parametrize("draft", ["near", "random"])
def test_each_replayed_step_is_the_round_specviz_runs_from_that_prefix(draft):
    """Replay another decoder's output (specviz's AR output, cut into steps it never took): round s of the replay
    drafts and verifies exactly as a fresh run from step s's prefix does, and commits the forced tokens."""
    pair = make_pair(draft)
    out = list(generate(pair, PROMPT, replace(CHAIN, method="ar")).output_ids)
    acc = [1, 0, 2, 0, 1, 3, 0, 1, 2, 0, 0, 1]
    rep = replay(pair, PROMPT, out, acc, CHAIN, "test engine")
    steps = step_tokens(out, acc)
    assert len(rep.rounds) == len(steps) and rep.replay == "test engine"
    assert list(rep.output_ids) == [t for s in steps for t in s]
    assert list(rep.prompt_ids) == PROMPT + out[:1]
    for s, (rnd, start) in enumerate(zip(rep.rounds, step_starts(len(out), acc))):
        fresh = generate(pair, PROMPT + out[:start], replace(CHAIN, max_new_tokens=64)).rounds[0]
        assert rnd.tree.tokens == fresh.tree.tokens, s
        assert rnd.status == fresh.status, s
        assert rnd.p == pytest.approx(fresh.p, abs=1e-5), s
    again = GenerationTrace.from_json(rep.to_json())  # a replay's rounds emit the engine's steps: the schema allows it
    assert again.replay == "test engine" and again.output_ids == rep.output_ids


def test_a_trace_that_is_no_replay_still_emits_at_most_one_token_past_its_path():
    d = json.loads(generate(make_pair("near"), PROMPT, CHAIN).to_json())
    d["rounds"][0]["emitted"] = d["rounds"][0]["emitted"] + [1, 2, 3, 4, 5]
    d["output_ids"] = [t for r in d["rounds"] for t in r["emitted"]]
    d.pop("pieces", None), d.pop("text", None)
    with pytest.raises(ValueError, match="at most one more"):
        GenerationTrace.from_dict(d)
    GenerationTrace.from_dict(d | {"replay": "vllm 0.32.0"})


def _round(draft, accepted, p_top, q_top):
    n = len(draft) + 1
    status = ["root"] + ["accepted"] * accepted + ["rejected"] + ["unvisited"] * (n - accepted - 2)
    return RoundTrace(
        index=0,
        context_len=5,
        tree=DraftTree((9, *draft), tuple(range(-1, n - 1)), (1.0,) * n),
        status=tuple(status[:n]),
        p=(None,) + (0.5,) * (n - 1),
        accepted_path=tuple(range(1, accepted + 1)),
        emitted=(),
        correction="resample",
        draft_ms=0,
        verify_ms=0,
        p_top=(None, *p_top),
        q_top=(None, *q_top),
    )


TIE = [[1, 0.40], [2, 0.39]]  # within TIE_LOGIT
CLEAR = [[1, 0.90], [2, 0.05]]


def test_the_reasons_for_a_differing_step():
    assert abs(0.40 / 0.39) < 2.718**TIE_LOGIT and 0.90 / 0.05 > 2.718**TIE_LOGIT
    # specviz's target prefers token 1 where the engine emitted 2
    r = _round([1, 5, 6], 1, [TIE, CLEAR, CLEAR], [CLEAR, CLEAR, CLEAR])
    assert classify(r, [2], 0, 3).reason == "target_tie"
    r = _round([1, 5, 6], 1, [CLEAR, CLEAR, CLEAR], [CLEAR, CLEAR, CLEAR])
    d = classify(r, [2], 0, 3)
    assert d.reason == "target" and d.detail["p"] == [0.9, 0.05]
    # the targets agree; the engine accepted more: its draft proposed the engine's token, specviz's another
    agree = [[[2, 0.9]], [[1, 0.9]], [[3, 0.9]]]
    r = _round([2, 4, 3], 1, agree, [CLEAR, TIE, CLEAR])  # specviz drafted 4 where the engine's draft had 1
    assert classify(r, [2, 1, 3], 2, 3).reason == "draft"
    r = _round([2, 2, 3], 1, agree, [CLEAR, [[2, 0.40], [1, 0.39]], CLEAR])
    assert classify(r, [2, 1, 3], 2, 3).reason == "draft_tie"
    # the engine accepted fewer: specviz's draft proposed the engine's own next token
    r = _round([2, 1, 3], 3, agree, [CLEAR, [[1, 0.9], [7, 0.01]], CLEAR])
    assert classify(r, [2, 1], 1, 3).reason == "verification"
    r = _round([2, 1, 3], 3, agree, [CLEAR, [[1, 0.40], [7, 0.39]], CLEAR])
    assert classify(r, [2, 1], 1, 3).reason == "draft_tie"
    assert classify(r, [2, 1, 3, 8], 3, 3) is None  # the same count: no difference


def _run(accepted, drafted, out_len=None, **over):
    out = list(range(1, (out_len or sum(a + 1 for a in accepted) + 1) + 1))
    prompt = {
        "question_id": 1,
        "text": "hi",
        "prompt_ids": [1, 2],
        "output_ids": out,
        "per_step_accepted": accepted,
        "per_step_drafted": drafted,
        "wall_s": 1.0,
    }
    d = {
        "format": "specviz-engine-run/1",
        "engine": {"name": "vllm", "version": "x", "speculative": {"num_spec_tokens": 3}},
        "settings": {"max_new_tokens": len(out), "temperature": 0},
        "prompts": [prompt | over],
    }
    return d


def test_the_run_file_is_checked_with_a_sentence():
    validate_run(_run([0, 1, 3], [3, 3, 3]))
    bad = {
        "cannot accept more": _run([4], [3]),
        "both be there": _run([1], None),
        "fall short": _run([0], [3], out_len=9),
    }
    for why, d in bad.items():
        with pytest.raises(ValueError, match=why):
            validate_run(d)
    with pytest.raises(ValueError, match="not a specviz engine run"):
        validate_run({"format": "specviz-trace/1"})
    for text in (b"{", b"[]", b"x" * 10):
        with pytest.raises(ValueError, match="engine run"):
            read_run(text)


def test_compare_steps_counts_each_engine_step_and_skips_a_cut_last_step():
    pair = make_pair("near")
    out = list(generate(pair, PROMPT, replace(CHAIN, method="ar")).output_ids)
    acc = [0] * 20 + [3]  # 24 tokens: the last step is cut by the output's end
    run = validate_run(_run(acc, [3] * 21, out_len=len(out)))
    p = run.prompts[0].model_copy(update={"output_ids": out, "prompt_ids": PROMPT})
    rep = replay(pair, PROMPT, out, acc, CHAIN, "e")
    counts, diffs = compare_steps(p, rep)
    assert len(counts) == len(step_starts(len(out), acc)) == len(rep.rounds)
    assert all(d.step < len(counts) - 1 for d in diffs)  # never the cut last step
    assert all(d.reason is not None and d.engine != d.specviz for d in diffs)
    sampled = replay(pair, PROMPT, out, acc, replace(CHAIN, sampling=SamplingConfig(temperature=1.0)), "e")
    assert compare_steps(p, sampled)[1] == []  # sampled steps are compared over the set only


def test_rates_histogram_and_an_ab_over_runs():
    lo, hi = wilson(3, 10)
    assert 0.1 < lo < 0.3 < hi < 0.61 and wilson(0, 0) == (0.0, 1.0)
    rows = by_position([0, 1, 3, 2], [3, 3, 3, 2])
    assert [(r.reached, r.accepted) for r in rows] == [(4, 3), (4, 2), (3, 1)]
    assert histogram([0, 1, 3, 2], [3, 3, 3, 2]) == [1, 1, 1, 1]
    a = EngineRun.model_validate(_run([0, 1, 0], [3, 3, 3]))
    b = EngineRun.model_validate(_run([1, 2, 1], [3, 3, 3]))
    ab = pair_runs(a, b)
    assert ab.acceptance_length.mean == pytest.approx(1.0) and ab.unpaired == 0
    for fig in (lengths_figure(a), positions_figure(a, b), histogram_figure(a), ab_figure(ab)):
        assert fig.data
    assert reasons_html(a) == ""
    other = EngineRun.model_validate(
        _run([1], [3]) | {"prompts": [_run([1], [3])["prompts"][0] | {"question_id": 2, "prompt_ids": [5]}]}
    )
    with pytest.raises(ValueError, match="share no prompt"):
        pair_runs(a, other)


class _NotOpenAI(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # every path: a page that is not JSON
        self.send_response(404)
        self.end_headers()
        self.wfile.write(b"<html>no such page</html>")

    def log_message(self, *args):
        pass


def test_the_client_says_what_is_wrong_with_an_address():
    for bad in ("ftp://x", "localhost:8000", "http://127.0.0.1:8000/?q=1", ""):
        with pytest.raises(ServerError, match="not a server address"):
            check_url(bad)
    assert check_url(" http://127.0.0.1:8000/v1/ ") == "http://127.0.0.1:8000"
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotOpenAI)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    try:
        with pytest.raises(ServerError, match="answered 404"):
            probe(f"http://127.0.0.1:{port}")
    finally:
        srv.shutdown()
        srv.server_close()
    with pytest.raises(ServerError, match="nothing answers"):
        probe(f"http://127.0.0.1:{port}")  # closed now


def test_the_engine_command_checks_its_arguments_before_asking_a_server(tmp_path, capsys):
    from specviz.tools.engine import main

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"turns": ["hi"]}) + "\n")
    base = ["--prompts", str(prompts), "--max-new-tokens", "8", "--out", str(tmp_path / "r.json")]
    cases = {
        "--reference needs --target and --draft": ["--url", "http://127.0.0.1:9", "--temperature", "0", "--reference"],
        "temperature must be >= 0": ["--url", "http://127.0.0.1:9", "--temperature", "-1"],
        "not a server address": ["--url", "nowhere", "--temperature", "0"],
        "nothing answers": ["--url", "http://127.0.0.1:9", "--temperature", "0"],
    }
    for why, args in cases.items():
        assert main(base + args) == 2
        assert why in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_a_sampled_run_is_checked_rate_by_rate_against_the_algorithm():
    """At T > 0 the engine's acceptance per draft position is set against specviz's at the same steps (Fisher's
    test): an engine that accepts nothing where the algorithm accepts a third is named; agreeing rates are not."""

    def run(engine, ours):
        d = _run(engine, [3] * len(engine))
        prompt = d["prompts"][0]
        prompt["reference"] = {"output_ids": [], "per_step_accepted": ours}
        d["reference_settings"] = {}
        r = EngineRun.model_validate(d)
        checks = [c.__dict__ for c in sampled_check(r)]
        return r.model_copy(update={"reference_settings": {"sampled_check": checks}}), checks

    silent, checks = run([0] * 90, [1, 0, 0] * 30)
    assert checks[0]["engine"] == (0, 90) and checks[0]["specviz"] == (30, 90) and checks[0]["p_value"] < 1e-9
    assert "accepts less than the algorithm at draft position 1" in sampled_note(silent)
    alike, _ = run([1, 0, 0] * 30, [0, 1, 0] * 30)
    assert sampled_note(alike).startswith("Sampled: the engine accepts as the algorithm does")


def test_the_published_run_schema_is_the_one_the_code_checks():
    published = Path(__file__).resolve().parents[1] / "docs" / "engine-run.schema.json"
    assert json.loads(published.read_text()) == json.loads(json.dumps(run_schema()))
