"""SpecDec++ (Huang, Guo, Wang 2024): a trained head decides when to stop drafting.

Notation (the paper's): a round drafts candidates Y_1..Y_n; ``a_i`` is the head's predicted
probability that Y_i is accepted given Y_1..Y_{i-1} were; ``cum(n) = prod_{i<=n} a_i``; the round
stops once the predicted probability of at least one rejection, ``1 - cum(n)``, exceeds the
threshold ``h``. ``k_min`` / ``k_max`` bound n. Verification is the shared chain verifier, so the
method is lossless whatever the head predicts.

The head reads the draft's last hidden state (post final norm, the input of its output layer):
residual blocks ``x <- x + SiLU(W x + b)``, each with its own weights (the official code shares one
block's weights across all layers by accident; we do not), then ``Linear(hidden, 2)``; class 1 =
accepted. It runs in fp32 whatever the draft's dtype.
"""
from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import torch
from torch import nn

from . import head_inputs
from .config import SpecDecPPConfig
from .drafters import DraftLMDrafter, Proposal
from .sampling import warp
from .trace import DraftTree
from .tree import chain

HEAD_FILE, HEAD_CONFIG = "acceptance_head.safetensors", "acceptance_head.json"
HEAD_FORMAT = "specviz-acceptance-head/1"
STOP_REASONS = ("threshold", "k_max", "eos", "budget")


class AcceptanceHead(nn.Module):
    """Draft hidden state (..., H) -> 2 logits (..., 2); softmax[..., 1] = predicted acceptance.

    inputs (beyond the paper): names of scalar columns from `head_inputs.CATALOG` the head also reads,
    projected into the hidden state before the blocks. The drafter knows them for free: log q(Y) (on the
    1-layer drafts q(Y) alone ranks acceptances better, held-out AUC 0.70, than the paper's hidden-state-only
    head, 0.645), whether the round is greedy (the label means 1[argmax p = Y] there and min(1, p/q) when
    sampling, and a head that cannot tell them apart ranks greedy rounds worse than q(Y) alone), the draft's
    entropy and runner-up probability, the candidate's depth in the round, and whether the context's own
    n-gram continuation agrees with it (`head_inputs`). The model cards record what each adds.

    lag (True: the paper's): which hidden state scores candidate Y. Lagged, the state at Y's own input
    position, computed by the draft forward that also drafts the next candidate (`stop_rule`). Not lagged
    (beyond the paper), the state that produced Y's logits, so Y is scored before any forward over it. The
    training rows hold both (`train.head_data`); a head is trained for one and runs that way.
    """

    def __init__(self, hidden_size: int, num_layers: int = 3, rng: torch.Generator | None = None,
                 inputs: tuple[str, ...] = (), lag: bool = True):
        super().__init__()
        self.lag = bool(lag)
        if hidden_size < 1 or num_layers < 0:
            raise ValueError(f"an acceptance head needs hidden_size >= 1 and num_layers >= 0, got {hidden_size}, {num_layers}")
        self.hidden_size, self.num_layers, self.inputs = hidden_size, num_layers, head_inputs.check(inputs)
        self.blocks = nn.ModuleList(nn.Linear(hidden_size, hidden_size) for _ in range(num_layers))
        self.scalar_in = nn.Linear(len(self.inputs), hidden_size) if self.inputs else None
        self.out = nn.Linear(hidden_size, 2)
        self.float()
        if rng is not None:                                  # PyTorch's default bounds, drawn from `rng`
            with torch.no_grad():
                for prm in self.parameters():
                    bound = hidden_size ** -0.5
                    prm.copy_((torch.rand(prm.shape, generator=rng, device=rng.device) * 2 - 1) * bound)

    def forward(self, x: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
        """x: (..., H) draft hidden states; columns: (..., len(CATALOG)) the `head_inputs.columns` of each
        scored candidate (only the head's own `inputs` are read)."""
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


def stop_rule(n: int, head_prob: float, cum: float, eos: bool, cfg: SpecDecPPConfig,
              budget: int | None = None, lagged: bool = True) -> tuple[float, str | None]:
    """One draft step of the SpecDec++ stop rule, as the official code runs it.

    Call it after the n-th candidate Y_n has been sampled. Returns the new running product
    ``cum`` and the stop reason, or None to draft Y_{n+1}.

    The one-step lag: the head is applied to the hidden state at the *last input position* of
    the draft forward that produced Y_n's logits, and that input is Y_{n-1} (for n = 1, the last
    committed token). So ``head_prob`` at step n is the predicted acceptance of Y_{n-1}, computed
    for free in the forward that drafts Y_n. At n = 1 the input token is already verified, so
    its factor is forced to 1 (``head_prob`` is ignored) and the threshold cannot fire. When the
    rule stops at step n, all n sampled candidates are submitted: the decision "P(a rejection
    among Y_1..Y_{n-1}) > h" still sends Y_n, which costs nothing more to draft and only one more
    position to verify.

    ``lagged=False`` (beyond the paper; a head trained with ``lag=False``, `AcceptanceHead`): ``head_prob``
    at step n is the predicted acceptance of Y_n itself, read from the hidden state that produced Y_n's
    logits and Y_n's own scalar inputs, so every factor counts, the rule can stop after Y_1, and stopping
    submits exactly Y_1..Y_n without a draft forward over Y_n.

    Order of checks (as in the official loop): EOS stops drafting at once; then the round's
    remaining token budget (``budget``, when it is below k_max) and k_max; below k_min never
    stop; otherwise stop when ``1 - cum > threshold`` (strictly).
    """
    cum = cum * (1.0 if lagged and n == 1 else float(head_prob))
    if eos:
        return cum, "eos"
    if budget is not None and budget < cfg.k_max and n >= budget:
        return cum, "budget"
    if n >= cfg.k_max:
        return cum, "k_max"
    if n < cfg.k_min:
        return cum, None
    return cum, ("threshold" if 1.0 - cum > cfg.threshold else None)


def stop_point(accept_probs, eos: list[bool], cfg: SpecDecPPConfig) -> int:
    """Where the rule stops on recorded per-step factors (a replay; the round must have drafted far enough).
    The recorded factors already carry the lag, if any (a lagged round records 1 at step 1)."""
    cum = 1.0
    for n, (a, e) in enumerate(zip(accept_probs, eos), 1):
        cum, reason = stop_rule(n, a, cum, e, cfg, lagged=False)
        if reason:
            return n
    return len(accept_probs)


class SpecDecPPDrafter(DraftLMDrafter):
    """Chain drafting with the SpecDec++ stop rule.

    Proposal.info carries, per draft step i = 1..n: ``accept_probs[i-1]`` = the factor used at
    that step (a lagged head, the paper's: 1 at step 1, else the head's estimate for Y_{i-1}; a head
    trained without the lag: its estimate for Y_i) and
    ``stop_probs[i-1]`` = 1 - cum after that step (the value compared with h); plus the
    threshold and the stop reason.
    """

    def __init__(self, lm, sampling, rng, head: AcceptanceHead, cfg: SpecDecPPConfig = SpecDecPPConfig(),
                 eos_ids=frozenset()):
        super().__init__(lm, sampling, rng, eos_ids)
        hidden = lm.config.hidden_size
        if head.hidden_size != hidden:
            raise ValueError(f"the acceptance head expects hidden size {head.hidden_size}, the draft has {hidden}")
        self.head = head.to(lm.device).eval()
        self.cfg = cfg
        reads_copy = {"copy_n", "copy_y"} & set(head.inputs)
        self.index = head_inputs.new_index() if reads_copy else None

    def begin(self, prompt_ids):
        super().begin(prompt_ids)
        if self.index is not None:
            self.index = head_inputs.new_index()

    def propose(self, committed, remaining):
        budget = remaining - 1                               # the round always adds one target token
        info = {"threshold": self.cfg.threshold}
        if min(self.cfg.k_max, budget) < 1:
            self.slots = {}
            return Proposal(DraftTree((committed[-1],), (-1,), (1.0,)),
                            info={**info, "accept_probs": (), "stop_probs": (), "stop_reason": "budget"})
        logits = self.feed_pending(committed)
        if self.index is not None:
            self.index.sync(committed)
        tent = self.target_entropy()
        toks, qs, rows, props, factors, stops = [], [], [], {}, [], []
        cum, hidden, reason = 1.0, self._last_hidden, None   # hidden: the draft's state that produced `logits`
        while reason is None:
            node = len(toks)                                 # the parent of the candidate drawn now
            q = warp(logits, self.sampling)
            y, qy, dist = self.pick(logits, q)
            rows.append(self.columns(q, y, node + 1, toks, tent))
            toks.append(y)
            qs.append(qy)
            if dist is not None:
                props[node] = dist
            n = node + 1
            if self.head.lag:                                # scores Y_{n-1}, read at its own position
                a = 1.0 if n == 1 else float(self.head.accept_prob(hidden, rows[-2]))
            else:                                            # scores Y_n, read where its logits came from
                a = float(self.head.accept_prob(hidden, rows[-1]))
            cum, reason = stop_rule(n, a, cum, y in self.eos_ids, self.cfg, budget, self.head.lag)
            factors.append(a)
            stops.append(1.0 - cum)
            if reason is None:
                out = self.lm.forward([y])
                self.slots[n] = self.lm.length - 1
                logits, hidden = out.logits[-1], out.hidden[-1]
        info.update(accept_probs=tuple(factors), stop_probs=tuple(stops), stop_reason=reason)
        return Proposal(chain(committed[-1], toks, qs), props, len(toks), info)

    def target_entropy(self) -> float:
        """`head_inputs` target_entropy: from the target's hidden state of the last committed token's parent
        position, which a feature drafter holds (0 for a token-level draft or a head that does not read it)."""
        n = getattr(self.lm, "n_target", 0)
        if "target_entropy" not in self.head.inputs or n < 1:
            return 0.0
        return float(head_inputs.target_entropy(self.lm, self.lm.tfeat[n - 1]))

    def columns(self, q: torch.Tensor, y: int, depth: int, drafted: list[int], tent: float = 0.0) -> torch.Tensor:
        """The head's scalar inputs for candidate y, drawn from q at `depth` after the round's `drafted` tokens
        (`head_inputs.columns`; the same construction as the training rows), or None for a head that reads none."""
        if not self.head.inputs:
            return None
        dev = q.device                                      # built where the head runs: no host round trip
        dist = head_inputs.distribution_columns(q, torch.tensor(y, device=dev), self.lm.support)
        copy = head_inputs.copy_columns(self.index, drafted, y) if self.index is not None else (0.0, 0.0)
        return head_inputs.columns(dist, torch.tensor(float(self.sampling.greedy), device=dev),
                                   torch.tensor(depth, device=dev), torch.tensor(copy, device=dev),
                                   torch.tensor(tent, device=dev))


# -- shipping a head ---------------------------------------------------------------------------

def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def save_head(head: AcceptanceHead, folder: str | Path, meta: dict) -> Path:
    """Write acceptance_head.safetensors + acceptance_head.json (architecture and `meta`) into `folder`."""
    from safetensors.torch import save_file
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().float().contiguous() for k, v in head.state_dict().items()}, folder / HEAD_FILE)
    cfg = {"format": HEAD_FORMAT, "hidden_size": head.hidden_size, "num_layers": head.num_layers,
           "inputs": list(head.inputs), "lag": head.lag, **meta}
    (folder / HEAD_CONFIG).write_text(json.dumps(cfg, indent=2) + "\n")
    return folder / HEAD_FILE


def load_head(folder: str | Path) -> tuple[AcceptanceHead, dict]:
    """Read a head saved by `save_head`; returns (head, its JSON config)."""
    from safetensors.torch import load_file
    folder = Path(folder)
    if not (folder / HEAD_FILE).exists() or not (folder / HEAD_CONFIG).exists():
        raise FileNotFoundError(f"no acceptance head in {folder} (expected {HEAD_FILE} and {HEAD_CONFIG})")
    cfg = json.loads((folder / HEAD_CONFIG).read_text())
    if cfg.get("format") != HEAD_FORMAT:
        raise ValueError(f"{folder / HEAD_CONFIG}: unsupported format {cfg.get('format')!r} (expected {HEAD_FORMAT})")
    inputs = cfg["inputs"] if "inputs" in cfg else \
        head_inputs.LEGACY[bool(cfg.get("q_feature")), bool(cfg.get("regime_feature"))]   # heads saved before 2026-12
    head = AcceptanceHead(int(cfg["hidden_size"]), int(cfg["num_layers"]), inputs=tuple(inputs),
                          lag=bool(cfg.get("lag", True)))
    state = {k.replace("q_in.", "scalar_in.", 1): v for k, v in load_file(folder / HEAD_FILE).items()}
    head.load_state_dict(state)
    return head.eval(), cfg


def head_folder(pair, lm=None) -> Path | None:
    """Where the head for drafter `lm` (default: the standalone draft) would live: that drafter's folder."""
    from .loading import SHIPPED_NAMES
    name = pair.drafter_name(pair.draft if lm is None else lm)
    if name in SHIPPED_NAMES:
        return Path(SHIPPED_NAMES[name])
    return Path(name) if name and Path(name).is_dir() else None


def has_head(pair, lm=None) -> bool:
    """Whether a trained head lies beside drafter `lm` (default: the standalone draft), without loading it."""
    folder = head_folder(pair, lm)
    return folder is not None and (folder / HEAD_FILE).exists()


def head_card(pair, lm=None) -> dict:
    """What a trace records of the head beside drafter `lm`: its lag, reject weight and held-out AUC (from its
    JSON config alone; {} when there is none)."""
    if not has_head(pair, lm):
        return {}
    cfg = json.loads((head_folder(pair, lm) / HEAD_CONFIG).read_text())
    return {"lag": bool(cfg.get("lag", True)), "reject_weight": (cfg.get("recipe") or {}).get("reject_weight"),
            "heldout_auc": (cfg.get("heldout") or {}).get("auc")}


def head_for_pair(pair, lm=None) -> AcceptanceHead:
    """The trained head shipped beside this pair's drafter `lm` (default: the standalone draft); ValueError when none."""
    folder = head_folder(pair, lm)
    if not has_head(pair, lm):
        raise ValueError(
            f"SpecDec++ needs an acceptance head trained for this pair (target {pair.info.get('target')}, "
            f"draft {pair.info.get('draft')}), and none was found{f' in {folder}' if folder else ''}. "
            "Train one with `python -m specviz.train head`, or pick another method.")
    head, cfg = load_head(folder)
    if cfg.get("target") not in (None, pair.info.get("target")):
        raise ValueError(f"the acceptance head in {folder} was trained for target {cfg['target']!r}, "
                         f"not {pair.info.get('target')!r}; retrain it with `python -m specviz.train head`")
    draft_file = folder / ("eagle.safetensors" if (folder / "eagle.safetensors").exists() else "draft.safetensors")
    if cfg.get("draft_sha256") and draft_file.exists() and file_digest(draft_file) != cfg["draft_sha256"]:
        warnings.warn(f"the acceptance head in {folder} was trained for an earlier draft checkpoint; "
                      "output stays lossless but the stop rule may be off. Retrain: python -m specviz.train head")
    return head
