"""Bad input at the edges gets one clear sentence before any model loads: the command line's arguments, prompt text,
sampling numbers, model paths and result files. A message never carries an exception's class name or an Errno."""

import re
import subprocess
import sys

import pytest

from specviz.core.config import ModelConfig, SamplingConfig
from specviz.core.output import replacing
from specviz.core.prompts import check_text, read_prompts
from specviz.models.loading import load_pair
from specviz.tools import cli

LIBRARY_WORDS = re.compile(r"Error\b|Errno|Traceback|Exception|object has no attribute")


def generate_args(tmp_path, *extra):
    return ["generate", "--prompt", "Name three colours.", "--out", str(tmp_path / "out.jsonl"), *extra]


@pytest.fixture
def no_models(monkeypatch):
    """Fail the test if the command line gets as far as loading a model."""
    monkeypatch.setattr(
        cli, "load_pair", lambda *a, **k: pytest.fail("a model loaded before the arguments were checked")
    )


def run_cli(argv, capsys) -> tuple[int, str]:
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse refuses a flag's value with exit status 2
        rc = e.code
    err = capsys.readouterr().err
    assert not LIBRARY_WORDS.search(err), err
    return rc, err


@pytest.mark.parametrize(
    "extra,needle",
    [
        (("--threads", "-1"), "must be positive"),
        (("--budget", "0"), "must be positive"),
        (("--k-max", "0"), "must be positive"),
        (("--width", "0"), "must be positive"),
        (("--max-new-tokens", "0"), "must be positive"),
        (("--threshold", "0"), "must be positive"),
        (("--k", "many"), "is not a whole number"),
        (("--temperature", "1e-30"), "too small to sample with"),
        (("--method", "chain", "--k", "100"), "K \\(draft length\\) must be an integer in \\[1, 64\\]"),
        (("--record-top", "-1"), "must be 0 or more"),
        (("--record-top", "65"), "record top must be a whole number in \\[0, 64\\]"),
    ],
)
def test_cli_refuses_bad_numbers_before_loading(tmp_path, capsys, no_models, extra, needle):
    rc, err = run_cli(generate_args(tmp_path, *extra), capsys)
    assert rc == 2 and re.search(needle, err), err


def test_cli_refuses_bad_files_before_loading(tmp_path, capsys, no_models):
    (tmp_path / "a-file").write_text("x")
    cases = {
        "is not a file": ["generate", "--prompts", str(tmp_path), "--out", str(tmp_path / "o.jsonl")],
        "is a folder": ["generate", "--prompt", "hi", "--out", str(tmp_path)],
        "is a file, not a folder": ["generate", "--prompt", "hi", "--out", str(tmp_path / "a-file" / "o.jsonl")],
        "not a usable path": ["generate", "--prompt", "hi", "--out", "x" * 5000],
        "not valid Unicode": ["generate", "--prompt", "caf\udce9", "--out", str(tmp_path / "o.jsonl")],
        "empty": ["generate", "--prompt", "   ", "--out", str(tmp_path / "o.jsonl")],
    }
    for needle, argv in cases.items():
        rc, err = run_cli(argv, capsys)
        assert rc == 2 and needle in err, (needle, err)


def test_prompt_text_and_prompt_files(tmp_path):
    with pytest.raises(ValueError, match="20,000"):
        check_text("x" * 20_001)
    with pytest.raises(ValueError, match="at position 3"):
        check_text("abc\ud800")
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"turns": "not a list"}\n')
    with pytest.raises(ValueError, match="p.jsonl:1: expected a JSON object"):
        read_prompts(bad)


def test_a_tiny_temperature_is_refused_and_zero_is_greedy():
    with pytest.raises(ValueError, match="use 0 for greedy decoding or at least 0.01"):
        SamplingConfig(temperature=1e-30)
    assert SamplingConfig(temperature=0).greedy and not SamplingConfig(temperature=0.01).greedy


@pytest.mark.parametrize(
    "target,needle",
    [
        ("/" + "x" * 50_000, "characters long"),
        ("", "must be a folder, a .gguf file or a hub id"),
    ],
)
def test_model_sources_are_checked_before_any_library_sees_them(target, needle):
    with pytest.raises(ValueError, match=needle) as e:
        load_pair(ModelConfig(target=target or " ", device="cpu"), progress=lambda m: None)
    assert not LIBRARY_WORDS.search(str(e.value))


def test_a_folder_or_file_that_is_no_model(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    for target, needle in ((tmp_path, "holds no model"), (tmp_path / "notes.txt", "not a .gguf file")):
        with pytest.raises(ValueError, match=needle):
            load_pair(ModelConfig(target=str(target), device="cpu"), progress=lambda m: None)
    with pytest.raises(ValueError, match="draft folder .* holds no model"):
        load_pair(ModelConfig(draft=str(tmp_path), device="cpu"), progress=lambda m: None)


def test_a_failed_write_keeps_the_earlier_result(tmp_path):
    out = tmp_path / "result.jsonl"
    out.write_text("earlier\n")
    with pytest.raises(RuntimeError), replacing(out) as f:
        f.write("half a result")
        raise RuntimeError("stopped")
    assert out.read_text() == "earlier\n" and [p.name for p in tmp_path.iterdir()] == ["result.jsonl"]
    with replacing(out) as f:
        f.write("new\n")
    assert out.read_text() == "new\n"


SILENT_HUB = """
import socket, sys, threading
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(50); held = []
threading.Thread(target=lambda: [held.append(srv.accept()[0]) for _ in iter(int, 1)], daemon=True).start()
import os
os.environ.update(HF_ENDPOINT=f"http://127.0.0.1:{srv.getsockname()[1]}", HF_HUB_OFFLINE="0", HF_HOME=sys.argv[1])
import specviz.models.hub as L
L.HUB_TIMEOUT_S, L.HUB_DEADLINE_S = 1.0, 4.0
from specviz.tools.cli import main
sys.exit(main(["generate", "--prompt", "hi", "--target", "someorg/some-model", "--out", sys.argv[1] + "/t.json"]))
"""


def test_a_silent_hub_ends_a_load_with_a_message(tmp_path):
    """A hub that accepts connections and never answers: the load gives up at its deadline, with a sentence."""
    out = subprocess.run([sys.executable, "-c", SILENT_HUB, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "the model hub did not answer within 4 s" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["bench", "--n-prompts", "0"], "must be positive"),
        (["bench", "--max-new-tokens", "-3"], "must be positive"),
        (["bench", "--out", "/"], "is a folder"),
        (["bench", "--md", "/etc/passwd/report.md"], "is a file, not a folder"),
        (["sweep", "run", "--per-family", "0"], "must be positive"),
        (["sweep", "run", "--ks", "2", "0"], "must be positive"),
        (["loadtest", "--clients", "0"], "must be positive"),
        (["loadtest", "--out", "/proc/specviz/load.json"], "cannot be"),
        (["record", "--max-new-tokens", "0"], "must be positive"),
        (["budget", "--repeats", "0"], "must be positive"),
        (["acceptance", "--tokens", "zero"], "is not a whole number"),
        (["lookup-priors", "--limit", "0"], "must be positive"),
    ],
)
def test_every_tool_refuses_bad_counts_and_result_paths_before_working(capsys, argv, needle):
    rc, err = run_cli(argv, capsys)
    assert rc == 2 and needle in err, err


def test_a_prompts_file_with_a_byte_order_mark_is_read(tmp_path):
    """Editors on Windows save UTF-8 with a byte-order mark; the file reads as any other."""
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"turns": ["Hello there"]}\n', encoding="utf-8-sig")
    assert read_prompts(path) == [{"turns": ["Hello there"]}]
