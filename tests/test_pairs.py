"""The pair dropdown offers a pair only where it can load, and says what each needs; ZeroGPU's decorator marks the
decode where `spaces` is installed and is a no-op elsewhere; the app builds with and without the package."""

import subprocess
import sys
from pathlib import Path

import pytest

from specviz.app import policy, zerogpu
from specviz.core.assets import head_cache
from specviz.core.config import RunConfig
from specviz.core.pairs import DEFAULT_PAIR, PAIRS
from specviz.methods.specdecpp.head import head_folder

ROOT = Path(__file__).resolve().parents[1]
QWEN = "Qwen2.5-1.5B-Instruct + Qwen2.5-0.5B-Instruct"
LLAMA = "Llama-3.2-3B-Instruct + Llama-3.2-1B-Instruct"


def test_each_pair_says_what_it_needs_and_shares_a_family():
    specs = list(PAIRS.values())
    assert specs[0].name == DEFAULT_PAIR and specs[0].gpu_gb == 0 and not specs[0].hub
    for spec in specs[1:]:
        assert spec.hub and spec.gpu_gb > 0 and spec.model.device == "cuda" and spec.model.eagle == "none"
        assert spec.needs in spec.label and "GPU" in spec.needs
        family = spec.model.target.split("/")[1].split("-")[0]  # Qwen2.5, Llama
        assert spec.model.draft.split("/")[1].startswith(family)


def test_a_pair_is_offered_only_where_it_can_load(monkeypatch):
    measured = policy.gpu_memory_gb
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    assert policy.pair_status(PAIRS[DEFAULT_PAIR], gpu_gb=0) is None
    assert policy.pair_status(PAIRS[QWEN], gpu_gb=0) == "it needs a GPU with 8 GB"
    assert policy.pair_status(PAIRS[QWEN], gpu_gb=6) == "it needs a GPU with 8 GB (this one has 6 GB)"
    assert policy.pair_status(PAIRS[QWEN], gpu_gb=80) is None
    assert "gated: set HF_TOKEN" in policy.pair_status(PAIRS[LLAMA], gpu_gb=80)
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    assert policy.pair_status(PAIRS[LLAMA], gpu_gb=80) is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "model hub is switched off" in policy.pair_status(PAIRS[QWEN], gpu_gb=80)
    monkeypatch.setattr(policy, "gpu_memory_gb", lambda: 0.0)
    assert [name for _, name in policy.offered_pairs()] == [DEFAULT_PAIR]
    with pytest.raises(ValueError, match="cannot load here: the model hub is switched off"):
        policy.model_config(QWEN, "auto")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")  # a ZeroGPU Space: large GPU slices, none in the main process
    monkeypatch.setattr(policy, "gpu_memory_gb", measured)
    assert policy.gpu_memory_gb() == 40.0
    offered = [name for _, name in policy.offered_pairs()]
    assert QWEN in offered and LLAMA in offered and offered[0] == DEFAULT_PAIR
    assert policy.model_config(QWEN, "bf16").target == "Qwen/Qwen2.5-1.5B-Instruct"


def test_a_hub_drafts_head_is_looked_for_in_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))

    class Pair:
        draft = object()
        info = {"target": "Qwen/Qwen2.5-1.5B-Instruct", "draft": "Qwen/Qwen2.5-0.5B-Instruct"}

        def drafter_name(self, lm):
            return self.info["draft"]

    assert (
        head_folder(Pair())
        == head_cache("Qwen/Qwen2.5-0.5B-Instruct")
        == tmp_path / "heads" / "Qwen--Qwen2.5-0.5B-Instruct"
    )


def test_zerogpu_marks_the_decode_and_is_a_no_op_without_spaces(monkeypatch):
    assert zerogpu.seconds_for(RunConfig(max_new_tokens=100)) == 35
    assert zerogpu.seconds_for(RunConfig(max_new_tokens=2000)) == zerogpu.MAX_S
    assert zerogpu.spaces is not None  # requirements.txt installs it
    marked = zerogpu.gpu(duration=lambda n: 10)(lambda n: n + 1)
    assert marked(1) == 2  # no ZeroGPU here: the function runs as it is
    monkeypatch.setattr(zerogpu, "spaces", None)
    plain = lambda n: n  # noqa: E731
    assert zerogpu.gpu(duration=lambda n: 10)(plain) is plain


def test_the_app_builds_without_the_spaces_package():
    code = (
        "import sys; sys.modules['spaces'] = None\n"  # import spaces now raises ImportError
        "from specviz.app import ui, zerogpu\n"
        "assert zerogpu.spaces is None\n"
        "ui.build_ui(); print('built')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "built" in out.stdout, out.stderr[-2000:]
