"""Distillation data: the target's own continuations of chat prompts, with its top-k next-token log-probs.

Notation: a sequence is prompt x_1..x_P followed by the target's response y_1..y_R; at response position
i the target's next-token distribution p_i = p(. | x, y_<i) is kept as its top-k (ids, log p). Greedy
sequences take y_i = argmax p_i (the path chain decoding walks at T = 0); sampled ones draw y_i from p_i
at temperature T (more varied paths; p_i itself stays the untempered distribution).

Generation is batched and left-padded. Data is written in shards (safetensors + a JSON sidecar), so an
interrupted run resumes at the first missing shard. `Distill` holds the concatenation of all shards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specviz.core.prompts import encode_prompt
from specviz.models import kvcache
from specviz.train import answers

SHARD_SIZE = 64  # prompts per shard file


@dataclass
class Distill:
    """Flat distillation data. Sequence s spans tokens[starts[s]:starts[s+1]]; its response positions are
    rows resp[s]:resp[s+1] of top_ids / top_lp (row i = distribution of the i-th response token)."""

    tokens: torch.Tensor  # (N,) int32, prompts and responses back to back
    starts: torch.Tensor  # (S+1,) int64
    prompt_len: torch.Tensor  # (S,) int32
    resp: torch.Tensor  # (S+1,) int64
    top_ids: torch.Tensor  # (R, k) int32
    top_lp: torch.Tensor  # (R, k) float16, log p of top_ids
    greedy: torch.Tensor  # (S,) bool
    meta: list[dict]  # per sequence: category, prompt text

    def __len__(self) -> int:
        return len(self.meta)

    def sequence(self, s: int) -> tuple[torch.Tensor, int, slice]:
        """Token ids (L,) of sequence s, its prompt length and its rows in top_ids / top_lp."""
        return (
            self.tokens[self.starts[s] : self.starts[s + 1]].long(),
            int(self.prompt_len[s]),
            slice(int(self.resp[s]), int(self.resp[s + 1])),
        )

    def responses(self) -> list[list[int]]:
        return [
            self.tokens[self.starts[s] + self.prompt_len[s] : self.starts[s + 1]].tolist() for s in range(len(self))
        ]

    def subset(self, keep: list[int]) -> Distill:
        return _concat([self._one(s) for s in keep])

    def _one(self, s: int) -> dict:
        ids, p, rows = self.sequence(s)
        return {
            "tokens": ids.int(),
            "prompt_len": p,
            "top_ids": self.top_ids[rows],
            "top_lp": self.top_lp[rows],
            "greedy": bool(self.greedy[s]),
            "meta": self.meta[s],
        }


def _concat(seqs: list[dict]) -> Distill:
    lens = torch.tensor([len(q["tokens"]) for q in seqs], dtype=torch.long)
    rlens = torch.tensor([len(q["top_ids"]) for q in seqs], dtype=torch.long)
    zero = torch.zeros(1, dtype=torch.long)
    return Distill(
        tokens=torch.cat([q["tokens"] for q in seqs]),
        starts=torch.cat([zero, lens.cumsum(0)]),
        prompt_len=torch.tensor([q["prompt_len"] for q in seqs], dtype=torch.int32),
        resp=torch.cat([zero, rlens.cumsum(0)]),
        top_ids=torch.cat([q["top_ids"] for q in seqs]),
        top_lp=torch.cat([q["top_lp"] for q in seqs]),
        greedy=torch.tensor([q["greedy"] for q in seqs], dtype=torch.bool),
        meta=[q["meta"] for q in seqs],
    )


@torch.inference_mode()
def continue_batch(
    model,
    prompts: list[list[int]],
    max_new: int,
    top_k: int,
    eos: set[int],
    pad: int,
    temperature: float = 0.0,
    rng: torch.Generator | None = None,
) -> list[dict]:
    """Continue left-padded prompts with the target; greedy when temperature is 0. One dict per prompt."""
    B, width = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((B, width), pad, dtype=torch.long)
    mask = torch.zeros(B, width, dtype=torch.long)
    for b, p in enumerate(prompts):
        ids[b, width - len(p) :] = torch.tensor(p)
        mask[b, width - len(p) :] = 1
    cache, base, head = kvcache.new_cache(model.config), model.get_decoder(), model.get_output_embeddings()
    done = torch.zeros(B, dtype=torch.bool)
    out_tok, out_ids, out_lp = [], [], []
    x = ids
    for _ in range(max_new):
        pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, -x.shape[1] :]
        h = base(input_ids=x, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True).last_hidden_state
        logp = torch.log_softmax(head(h[:, -1]).float(), -1)  # (B, V)
        lp, top = logp.topk(top_k, -1)
        if temperature > 0:
            y = torch.multinomial(torch.softmax(logp / temperature, -1), 1, generator=rng)[:, 0]
        else:
            y = top[:, 0]
        before = done
        y = torch.where(before, torch.full_like(y, pad), y)
        out_tok.append(y)
        out_ids.append(top.int())
        out_lp.append(lp.half())
        done = before | torch.tensor([int(t) in eos for t in y.tolist()])
        if bool(done.all()):
            break
        x = y[:, None]
        mask = torch.cat([mask, (~before).long()[:, None]], 1)  # finished rows feed padding
    toks, tids, tlp = torch.stack(out_tok, 1), torch.stack(out_ids, 1), torch.stack(out_lp, 1)  # (B, T), (B, T, k)
    res = []
    for b, p in enumerate(prompts):
        n = len(toks[b])
        for i, t in enumerate(toks[b].tolist()):
            if t in eos:
                n = i + 1
                break
        res.append(
            {
                "tokens": torch.tensor(p + toks[b, :n].tolist(), dtype=torch.int32),
                "prompt_len": len(p),
                "top_ids": tids[b, :n].contiguous(),
                "top_lp": tlp[b, :n].contiguous(),
            }
        )
    return res


@torch.inference_mode()
def soft_labels(
    model, prompt_ids: list[list[int]], responses: list[list[int]], top_k: int, token_budget: int = 6144
) -> list[dict]:
    """The target's top-k (ids, log p) at every response position of each prompt + response, by teacher-forced
    forwards over right-padded batches: the rows `train.data.continue_batch` would have kept while writing them."""
    seqs = [p + r for p, r in zip(prompt_ids, responses)]
    base, head = model.get_decoder(), model.get_output_embeddings()
    out: list[dict | None] = [None] * len(seqs)
    for group in batches([len(s) for s in seqs], len(seqs), token_budget):
        width = max(len(seqs[i]) for i in group)
        x = torch.zeros(len(group), width, dtype=torch.long)
        for b, i in enumerate(group):
            x[b, : len(seqs[i])] = torch.tensor(seqs[i])
        h = base(input_ids=x).last_hidden_state  # right padding: never attended to by real tokens
        for b, i in enumerate(group):
            p, n = len(prompt_ids[i]), len(responses[i])
            logp = torch.log_softmax(head(h[b, p - 1 : p - 1 + n]).float(), -1)  # row j: p(. | x, y_<j)
            lp, top = logp.topk(top_k, -1)
            out[i] = {
                "tokens": torch.tensor(seqs[i], dtype=torch.int32),
                "prompt_len": p,
                "top_ids": top.int(),
                "top_lp": lp.half(),
            }
    return out


def batches(lengths: list[int], max_batch: int, token_budget: int) -> list[list[int]]:
    """Group indices of similar length (sorted) so that batch size * longest <= token_budget."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out, cur = [], []
    for i in order:
        if cur and (len(cur) + 1 > max_batch or (len(cur) + 1) * lengths[i] > token_budget):
            out.append(cur)
            cur = []
        cur.append(i)
    return out + ([cur] if cur else [])


def build_shards(
    model,
    tokenizer,
    items: list[tuple[str, str]],
    folder: Path,
    name: str,
    *,
    temperature: float,
    max_new: int,
    top_k: int,
    seed: int,
    shard_size: int = SHARD_SIZE,
    max_batch: int = 32,
    token_budget: int = 6144,
    progress=None,
    answers_dir: Path | None = None,
) -> Distill:
    """Continue every (category, prompt) with the target, `shard_size` prompts per shard file; reuse shards on disk
    that hold the same prompts (a shard written for another prompt count or seed is made again). A missing shard
    whose answers are kept in `answers_dir` (train.answers; the training commands pass --answers) is rebuilt by
    prefill alone, and a generated one has its answers written there (None: neither)."""
    folder.mkdir(parents=True, exist_ok=True)
    eos = {
        tokenizer.eos_token_id,
        *(
            [model.generation_config.eos_token_id]
            if isinstance(model.generation_config.eos_token_id, int)
            else model.generation_config.eos_token_id or []
        ),
    } - {None}
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    parts = []
    n_shards = (len(items) + shard_size - 1) // shard_size
    for k in range(n_shards):
        path = folder / f"{name}-{k:04d}.safetensors"
        chunk = items[k * shard_size : (k + 1) * shard_size]
        if path.exists() and [m["prompt"] for m in json.loads(path.with_suffix(".json").read_text())] != [
            t for _, t in chunk
        ]:
            path.unlink()
        if not path.exists():
            ids = [encode_prompt(tokenizer, text) for _, text in chunk]
            texts = [t for _, t in chunk]
            kept = answers.load(answers_dir / f"{name}-{k:04d}.npz", texts) if answers_dir else None
            greedy = [temperature == 0] * len(chunk)
            if kept is not None:  # the answers are known: one teacher-forced pass gives the soft labels
                got, greedy = soft_labels(model, ids, kept[0], top_k, token_budget), kept[1]
            else:
                rng = torch.Generator().manual_seed(seed * 100003 + k)
                got = [None] * len(chunk)
                for group in batches([len(x) for x in ids], max_batch, token_budget):
                    made = continue_batch(model, [ids[i] for i in group], max_new, top_k, eos, pad, temperature, rng)
                    for i, g in zip(group, made):
                        got[i] = g
                if answers_dir:
                    responses = [g["tokens"][g["prompt_len"] :].tolist() for g in got]
                    answers.save(answers_dir / f"{name}-{k:04d}.npz", texts, responses, greedy)
            seqs = [
                {**g, "greedy": gr, "meta": {"category": c, "prompt": t}} for g, gr, (c, t) in zip(got, greedy, chunk)
            ]
            _save(_concat(seqs), path)
        parts.append(load(path))
        if progress:
            progress(1)
    return merge(parts)


def _save(d: Distill, path: Path) -> None:
    tensors = {
        k: getattr(d, k).contiguous() for k in ("tokens", "starts", "prompt_len", "resp", "top_ids", "top_lp", "greedy")
    }
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp))
    path.with_suffix(".json").write_text(json.dumps(d.meta))
    tmp.rename(path)


def load(path: Path) -> Distill:
    t = load_file(str(path))
    return Distill(**t, meta=json.loads(path.with_suffix(".json").read_text()))


def merge(parts: list[Distill]) -> Distill:
    return _concat([p._one(s) for p in parts for s in range(len(p))])
