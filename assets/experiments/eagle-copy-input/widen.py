"""Experiment (not shipped): train the EAGLE drafter with a third input block in fc, then measure it.

    python assets/experiments/eagle-copy-input/widen.py train {copy|copy10|copy30|prev} [train eagle flags...]
    python assets/experiments/eagle-copy-input/widen.py eval  {copy|copy10|copy30|prev|none} FOLDER

Variants (the block starts at zero, so step 0 is the drafter it warm-starts from):
- prev: g_t = fc([e(x_t), f_(t-1), e(x_(t-1))]): the previous token, what one attention layer needs to form an
  induction head (query from x_t, key from the slot whose previous token is x_t, value that slot's token);
- copy: g_t = fc([e(x_t), f_(t-1), a_n e(y_t)]): y_t the prompt-lookup proposal after x_<=t (specviz.lookup,
  n-grams up to 8, the most recent match), n its match length, a_n a learned gain (0 without a match);
- copy10, copy30: the same with a_n starting at 10 or 30, not 1: Adam's steps on the zero block then move its
  output 10x (30x) as fast (a per-block learning rate without a second optimiser group).
`train prev` patches specviz.train.eagle (its `_pass` and `train`) and runs its command; the copy variants are
now `python -m specviz.train eagle --copy-input --copy-gain G` (specviz.eagle.add_copy_input; the engine feeds
the input since this experiment), which `train copy*` runs. `eval` measures first-token agreement teacher-forced
on the 40 held-out Spec-Bench prompts along the target's fp32 greedy path, split by whether the lookup proposal
is right.
"""
import collections
import sys
from pathlib import Path

import torch
from torch import nn

import specviz.train.eagle as te
from specviz.eagle import lookup_tensors, previous_features

VARIANT = sys.argv[2] if len(sys.argv) > 2 else "copy"


def widened_pass(model, x, fin, copy=None):                      # the prev variant: [e(x_t), f_(t-1), e(x_(t-1))]
    e = model.get_input_embeddings()(x)
    g = model.eagle_fc(torch.cat([e, fin, previous_features(e)], -1))
    return model.model(inputs_embeds=g).last_hidden_state


def widen(model) -> None:
    old, H = model.eagle_fc, model.config.hidden_size
    if old.in_features == 2 * H:
        model.eagle_fc = nn.Linear(3 * H, H, bias=False)
        with torch.no_grad():
            model.eagle_fc.weight.zero_()
            model.eagle_fc.weight[:, :2 * H].copy_(old.weight)


def train(argv):
    if VARIANT.startswith("copy"):                                # the shipped trainer's own flag now
        te.main(argv + ["--copy-input", "--copy-gain", {"copy10": "10", "copy30": "30"}.get(VARIANT, "1")])
        return
    base_train, base_digest = te.train, te.digest_file

    def widened_train(model, *a, **k):
        widen(model)
        return base_train(model, *a, **k)
    te._pass, te.train = widened_pass, widened_train
    te.digest_file = lambda p: f"{base_digest(p)}-{VARIANT}"          # its own checkpoint name
    te.main(argv)


@torch.inference_mode()
def evaluate(folder: Path):
    from safetensors.torch import load_file
    from specviz.config import ModelConfig
    from specviz.eagle import build_eagle, copy_ngram
    from specviz.loading import load_eagle, load_pair
    from specviz.train import draft_eval
    pair = load_pair(ModelConfig(dtype="fp32", device="cpu"))
    data = draft_eval.heldout_data(pair, 40, Path("/tmp/specviz-eval-fp32"), 128)
    state = load_file(str(folder / "eagle.safetensors"))
    ids_v = state.pop("specviz.head_ids")
    if VARIANT == "prev":
        model = build_eagle(pair.target.model, init_layer=None)
        widen(model)
        model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
        run = widened_pass
    else:                                                         # none, copy*: the shipped loader and pass
        model = load_eagle(folder, pair.target.model, dtype=torch.float32).model
        run = lambda m, x, fin: te._pass(m, x, fin, lookup_tensors(x.tolist(), copy_ngram(m)) if copy_ngram(m) else None)  # noqa: E731
    W = pair.target.model.get_input_embeddings().weight[ids_v]
    rows = []
    for s in range(len(data)):
        ids, P, _ = data.sequence(s)
        pair.target.reset()
        pair.target.forward(ids.tolist(), rows=slice(0, 0))
        h = run(model, ids[None], previous_features(pair.target.last_hidden[None]))[0]
        d = ids_v[(h[P - 1:-1] @ W.T).argmax(-1)]
        y, n = lookup_tensors([ids.tolist()], 8)              # the lookup's token and match length per position
        for j, t in enumerate(range(P, len(ids))):
            rows.append((data.meta[s]["category"], int(d[j]) == int(ids[t]), int(n[0, t - 1]), int(y[0, t - 1]) == int(ids[t])))
    N = len(rows)
    share = lambda sel: sum(r[1] for r in sel) / max(1, len(sel))      # noqa: E731
    print(f"{folder} ({VARIANT}): {N} positions, agreement {share(rows):.3f}")
    for name, sel in (("lookup right", [r for r in rows if r[3]]), ("lookup wrong or none", [r for r in rows if not r[3]]),
                      ("lookup n >= 4", [r for r in rows if r[2] >= 4])):
        print(f"  {name}: {len(sel) / N:.3f} of positions, drafter right {share(sel):.3f}, lookup right {sum(r[3] for r in sel) / max(1, len(sel)):.3f}")
    by = collections.defaultdict(list)
    for r in rows:
        by[r[0]].append(r)
    print("  by category: " + ", ".join(f"{c} {share(v):.2f}" for c, v in sorted(by.items())))


if __name__ == "__main__":
    torch.set_num_threads(2)
    if sys.argv[1] == "train":
        train(sys.argv[3:])
    else:
        evaluate(Path(sys.argv[3]))
