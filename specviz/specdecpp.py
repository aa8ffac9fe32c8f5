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

from .config import SpecDecPPConfig
from .drafters import DraftLMDrafter, Proposal
from .trace import DraftTree
from .tree import chain

HEAD_FILE, HEAD_CONFIG = "acceptance_head.safetensors", "acceptance_head.json"
HEAD_FORMAT = "specviz-acceptance-head/1"
STOP_REASONS = ("threshold", "k_max", "eos", "budget")


class AcceptanceHead(nn.Module):
    """Draft hidden state (..., H) -> 2 logits (..., 2); softmax[..., 1] = predicted acceptance.

    q_feature (beyond the paper): also read log q(Y), the draft's own probability of the candidate
    being scored, projected into the hidden state before the blocks. The drafter knows q(Y) for free,
    and on the shipped 1-layer draft q(Y) alone ranks acceptances better (held-out AUC 0.70) than the
    paper's hidden-state-only head did (0.645).

    regime_feature (beyond the paper, with q_feature): also read whether the round samples or decodes
    greedily. The label means different things in the two (1[argmax p = Y] against min(1, p/q)), and a
    head that cannot tell them apart ranks greedy rounds worse than q(Y) alone does (held-out AUC on the
    EAGLE drafter's greedy rows 0.73 against 0.81). With the flag, greedy rows: standalone head 0.75 -> 0.78,
    EAGLE head 0.73 -> 0.75 (same rows; still below q(Y) alone, see the model cards).
    """

    def __init__(self, hidden_size: int, num_layers: int = 3, rng: torch.Generator | None = None,
                 q_feature: bool = False, regime_feature: bool = False):
        super().__init__()
        if hidden_size < 1 or num_layers < 0:
            raise ValueError(f"an acceptance head needs hidden_size >= 1 and num_layers >= 0, got {hidden_size}, {num_layers}")
        if regime_feature and not q_feature:
            raise ValueError("the regime input rides on the q input: regime_feature needs q_feature")
        self.hidden_size, self.num_layers, self.q_feature = hidden_size, num_layers, q_feature
        self.regime_feature = regime_feature
        self.blocks = nn.ModuleList(nn.Linear(hidden_size, hidden_size) for _ in range(num_layers))
        self.q_in = nn.Linear(2 if regime_feature else 1, hidden_size) if q_feature else None
        self.out = nn.Linear(hidden_size, 2)
        self.float()
        if rng is not None:                                  # PyTorch's default bounds, drawn from `rng`
            with torch.no_grad():
                for prm in self.parameters():
                    bound = hidden_size ** -0.5
                    prm.copy_((torch.rand(prm.shape, generator=rng, device=rng.device) * 2 - 1) * bound)

    def forward(self, x: torch.Tensor, q: torch.Tensor | None = None, greedy: torch.Tensor | bool | None = None) -> torch.Tensor:
        """x: (..., H) draft hidden states; q: (...) the draft's probability of each scored candidate;
        greedy: (...) or one bool, whether the round decodes greedily (read by a regime_feature head)."""
        x = x.float()
        if self.q_in is not None:
            if q is None:
                raise ValueError("this acceptance head reads q(Y), the draft probability of the candidate; pass q")
            inp = torch.log(torch.as_tensor(q, dtype=torch.float32, device=x.device).clamp_min(1e-6))[..., None]
            if self.regime_feature:
                if greedy is None:
                    raise ValueError("this acceptance head reads the decoding regime; pass greedy")
                g = torch.as_tensor(greedy, dtype=torch.float32, device=x.device).expand(inp.shape[:-1])[..., None]
                inp = torch.cat([inp, g], -1)
            x = x + self.q_in(inp)
        for block in self.blocks:
            x = x + nn.functional.silu(block(x))
        return self.out(x)

    @torch.inference_mode()
    def accept_prob(self, x: torch.Tensor, q: torch.Tensor | float | None = None, greedy=None) -> torch.Tensor:
        """Predicted P(accepted), shape (...)."""
        logits = self.forward(x, q, greedy)
        return torch.sigmoid(logits[..., 1] - logits[..., 0])


def stop_rule(n: int, head_prob: float, cum: float, eos: bool, cfg: SpecDecPPConfig,
              budget: int | None = None) -> tuple[float, str | None]:
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

    Order of checks (as in the official loop): EOS stops drafting at once; then the round's
    remaining token budget (``budget``, when it is below k_max) and k_max; below k_min never
    stop; otherwise stop when ``1 - cum > threshold`` (strictly).
    """
    cum = cum * (1.0 if n == 1 else float(head_prob))
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
    """Where the rule stops on recorded per-step factors (a replay; the round must have drafted far enough)."""
    cum = 1.0
    for n, (a, e) in enumerate(zip(accept_probs, eos), 1):
        cum, reason = stop_rule(n, a, cum, e, cfg)
        if reason:
            return n
    return len(accept_probs)


class SpecDecPPDrafter(DraftLMDrafter):
    """Chain drafting with the SpecDec++ stop rule.

    Proposal.info carries, per draft step i = 1..n: ``accept_probs[i-1]`` = the factor used at
    that step (1 at step 1, else the head's estimate for Y_{i-1}: the lag above) and
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

    def propose(self, committed, remaining):
        budget = remaining - 1                               # the round always adds one target token
        info = {"threshold": self.cfg.threshold}
        if min(self.cfg.k_max, budget) < 1:
            self.slots = {}
            return Proposal(DraftTree((committed[-1],), (-1,), (1.0,)),
                            info={**info, "accept_probs": (), "stop_probs": (), "stop_reason": "budget"})
        logits = self.feed_pending(committed)
        toks, qs, props, factors, stops = [], [], {}, [], []
        cum, hidden, reason, greedy = 1.0, None, None, self.sampling.greedy
        while reason is None:
            node = len(toks)                                 # the parent of the candidate drawn now
            y, qy, dist = self.pick(logits)
            toks.append(y)
            qs.append(qy)
            if dist is not None:
                props[node] = dist
            n = node + 1
            a = 1.0 if hidden is None else float(self.head.accept_prob(hidden, qs[-2], greedy))   # scores Y_{n-1}
            cum, reason = stop_rule(n, a, cum, y in self.eos_ids, self.cfg, budget)
            factors.append(a)
            stops.append(1.0 - cum)
            if reason is None:
                out = self.lm.forward([y])
                self.slots[n] = self.lm.length - 1
                logits, hidden = out.logits[-1], out.hidden[-1]
        info.update(accept_probs=tuple(factors), stop_probs=tuple(stops), stop_reason=reason)
        return Proposal(chain(committed[-1], toks, qs), props, len(toks), info)


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
           "q_feature": head.q_feature, "regime_feature": head.regime_feature, **meta}
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
    head = AcceptanceHead(int(cfg["hidden_size"]), int(cfg["num_layers"]), q_feature=bool(cfg.get("q_feature", False)),
                          regime_feature=bool(cfg.get("regime_feature", False)))
    head.load_state_dict(load_file(folder / HEAD_FILE))
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
