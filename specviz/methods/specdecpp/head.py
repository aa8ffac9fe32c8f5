"""The SpecDec++ acceptance-prediction head: the module, its files and which head serves a pair."""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from specviz.core.assets import SHIPPED_NAMES, head_cache
from specviz.methods.specdecpp import inputs as head_inputs

HEAD_FILE, HEAD_CONFIG = "acceptance_head.safetensors", "acceptance_head.json"
HEAD_FORMAT = "specviz-acceptance-head/1"


class AcceptanceHead(nn.Module):
    """Draft hidden state (..., H) -> 2 logits (..., 2); softmax[..., 1] = predicted acceptance.

    inputs (beyond the paper): names of scalar columns from `specviz.methods.specdecpp.inputs.CATALOG` the head
    also reads, projected into the hidden state before the blocks. The drafter knows them for free: log q(Y) (on
    the shipped one-layer drafts q(Y) alone ranks acceptances better than the paper's hidden-state-only head),
    whether the round is greedy (the label means 1[argmax p = Y] there and min(1, p/q) when sampling, and a head
    that cannot tell them apart ranks greedy rounds worse than q(Y) alone), the draft's entropy and runner-up
    probability, the candidate's depth in the round, and whether the context's own n-gram continuation agrees
    with it. The model cards record what each adds.

    lag (True: the paper's): which hidden state scores candidate Y. Lagged, the state at Y's own input
    position, computed by the draft forward that also drafts the next candidate (`stop_rule`). Not lagged
    (beyond the paper), the state that produced Y's logits, so Y is scored before any forward over it. The
    training rows hold both (`specviz.train.head_data`); a head is trained for one and runs that way.
    """

    def __init__(
        self,
        hidden_size: int,
        num_layers: int = 3,
        rng: torch.Generator | None = None,
        inputs: tuple[str, ...] = (),
        lag: bool = True,
    ):
        super().__init__()
        self.lag = bool(lag)
        self.card: dict = {}  # what a trace records of it: set from its config when loaded (`card`)
        if hidden_size < 1 or num_layers < 0:
            raise ValueError(
                f"an acceptance head needs hidden_size >= 1 and num_layers >= 0, got {hidden_size}, {num_layers}"
            )
        self.hidden_size, self.num_layers, self.inputs = hidden_size, num_layers, head_inputs.check(inputs)
        self.blocks = nn.ModuleList(nn.Linear(hidden_size, hidden_size) for _ in range(num_layers))
        self.scalar_in = nn.Linear(len(self.inputs), hidden_size) if self.inputs else None
        self.out = nn.Linear(hidden_size, 2)
        self.float()
        if rng is not None:  # PyTorch's default bounds, drawn from `rng`
            with torch.no_grad():
                for prm in self.parameters():
                    bound = hidden_size**-0.5
                    prm.copy_((torch.rand(prm.shape, generator=rng, device=rng.device) * 2 - 1) * bound)

    def forward(self, x: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
        """x: (..., H) draft hidden states; columns: (..., len(CATALOG)) the `specviz.methods.specdecpp.inputs.columns`
        of each scored candidate (only the head's own `inputs` are read)."""
        x = x.float()
        if self.scalar_in is not None:
            if columns is None:
                raise ValueError(f"this acceptance head reads {self.inputs} beside the hidden state; pass columns")
            x = x + self.scalar_in(head_inputs.select(columns.to(x.device, torch.float32), self.inputs))
        for block in self.blocks:
            x = x + nn.functional.silu(block(x))
        return self.out(x)

    @torch.inference_mode()
    def accept_prob(self, x: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
        """Predicted P(accepted), shape (...)."""
        logits = self.forward(x, columns)
        return torch.sigmoid(logits[..., 1] - logits[..., 0])


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def weights_digest(folder: str | Path) -> str:
    """A digest of the weights a model folder holds: its *.safetensors and *.gguf files but a head's, by content (one
    file: that file's digest); "" for a name that is no local folder (a hub id)."""
    folder = Path(folder)
    if not folder.is_dir():
        return ""
    files = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".gguf") and p.name != HEAD_FILE)
    if len(files) == 1:
        return file_digest(files[0])
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.name}:{file_digest(p)};".encode())
    return h.hexdigest()[:16]


def save_head(head: AcceptanceHead, folder: str | Path, meta: dict) -> Path:
    """Write acceptance_head.safetensors + acceptance_head.json (architecture and `meta`) into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().float().contiguous() for k, v in head.state_dict().items()}, folder / HEAD_FILE)
    cfg = {
        "format": HEAD_FORMAT,
        "hidden_size": head.hidden_size,
        "num_layers": head.num_layers,
        "inputs": list(head.inputs),
        "lag": head.lag,
        **meta,
    }
    (folder / HEAD_CONFIG).write_text(json.dumps(undefined_as_null(cfg), indent=2, allow_nan=False) + "\n")
    return folder / HEAD_FILE


def undefined_as_null(x):
    """`x` with every NaN (a figure without the data to define it: an AUC over one class) as None, so the card is
    JSON any reader parses."""
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: undefined_as_null(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [undefined_as_null(v) for v in x]
    return x


def load_head(folder: str | Path) -> tuple[AcceptanceHead, dict]:
    """Read a head saved by `save_head`; returns (head, its JSON config)."""
    folder = Path(folder)
    if not (folder / HEAD_FILE).exists() or not (folder / HEAD_CONFIG).exists():
        raise FileNotFoundError(f"no acceptance head in {folder} (expected {HEAD_FILE} and {HEAD_CONFIG})")
    cfg = json.loads((folder / HEAD_CONFIG).read_text())
    if cfg.get("format") != HEAD_FORMAT:
        raise ValueError(f"{folder / HEAD_CONFIG}: unsupported format {cfg.get('format')!r} (expected {HEAD_FORMAT})")
    inputs = (
        cfg["inputs"]
        if "inputs" in cfg
        else head_inputs.LEGACY[bool(cfg.get("q_feature")), bool(cfg.get("regime_feature"))]
    )  # the older format's flags
    head = AcceptanceHead(
        int(cfg["hidden_size"]), int(cfg["num_layers"]), inputs=tuple(inputs), lag=bool(cfg.get("lag", True))
    )
    state = {k.replace("q_in.", "scalar_in.", 1): v for k, v in load_file(folder / HEAD_FILE).items()}
    head.load_state_dict(state)
    return head.eval(), cfg


def head_folder(pair, lm=None) -> Path | None:
    """Where the head for drafter `lm` (default: the standalone draft) would live: that drafter's folder."""
    name = pair.drafter_name(pair.draft if lm is None else lm)
    if name in SHIPPED_NAMES:
        return Path(SHIPPED_NAMES[name])
    if not name:
        return None
    return Path(name) if Path(name).is_dir() else head_cache(name)  # a hub draft's head lives in the user cache


def has_head(pair, lm=None) -> bool:
    """Whether a trained head lies beside drafter `lm` (default: the standalone draft), without loading it."""
    folder = head_folder(pair, lm)
    return folder is not None and (folder / HEAD_FILE).exists()


def head_card(pair, lm=None) -> dict:
    """What a trace records of the head beside drafter `lm` (its `card`, from its JSON config alone; {} when there is
    none)."""
    cfg = head_config(pair, lm)
    return card(cfg) if cfg else {}


def head_config(pair, lm=None) -> dict:
    """The JSON config (its card's source: recipe, held-out metrics, rows, time) of the head beside drafter `lm`;
    {} when there is none or it cannot be read."""
    if not has_head(pair, lm):
        return {}
    try:
        return json.loads((head_folder(pair, lm) / HEAD_CONFIG).read_text())
    except (OSError, ValueError):
        return {}


def card(cfg: dict) -> dict:
    """A head's card from its JSON config: its lag, reject weight and held-out AUC."""
    return {
        "lag": bool(cfg.get("lag", True)),
        "reject_weight": (cfg.get("recipe") or {}).get("reject_weight"),
        "heldout_auc": (cfg.get("heldout") or {}).get("auc"),
    }


def head_for_pair(pair, lm=None) -> AcceptanceHead:
    """The trained head shipped beside this pair's drafter `lm` (default: the standalone draft); ValueError when
    none."""
    folder = head_folder(pair, lm)
    if not has_head(pair, lm):
        raise ValueError(
            f"SpecDec++ needs an acceptance head trained for this pair (target {pair.info.get('target')}, "
            f"draft {pair.info.get('draft')}), and none was found{f' in {folder}' if folder else ''}. "
            "Train one with `specviz train head --quick --target TARGET --draft DRAFT` (minutes for a small pair) or, "
            "on a local page, with *Train a head for this pair* under Model pair; or pick another method."
        )
    head, cfg = load_head(folder)
    if cfg.get("target") not in (None, pair.info.get("target")):
        raise ValueError(
            f"the acceptance head in {folder} was trained for target {cfg['target']!r}, "
            f"not {pair.info.get('target')!r}; retrain it with `python -m specviz.train head`"
        )
    if cfg.get("draft_sha256") and weights_digest(folder) not in ("", cfg["draft_sha256"]):
        warnings.warn(
            f"the acceptance head in {folder} was trained for an earlier draft checkpoint; "
            "output stays lossless but the stop rule may be off. Retrain: python -m specviz.train head",
            stacklevel=2,
        )
    head.card = card(cfg)
    return head
