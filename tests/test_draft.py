"""The draft trainer on tiny models, and the shipped default draft's files (when they exist)."""

import gzip
from pathlib import Path

import pytest
import torch
from helpers import distill_data
from tiny import tiny_llama

from specviz.core.assets import DEFAULT_DRAFT
from specviz.core.config import ModelConfig
from specviz.models.lm import LM
from specviz.models.loading import load_pair
from specviz.train import answers, corpus, selfprompts
from specviz.train import data as data_mod
from specviz.train.broad_prompts import broad
from specviz.train.card import write_card
from specviz.train.config import DraftTrainConfig
from specviz.train.data import Distill, build_shards, continue_batch
from specviz.train.draft import build_draft, context_head, distill_loss, head_ids, save_draft, train
from specviz.train.draft_eval import accepted, busy_text, coverage, matches
from specviz.train.prompts import compose, with_documents

SHIPPED = Path(DEFAULT_DRAFT)


def test_batched_generation_equals_single():
    m = tiny_llama(vocab=64, layers=2, hidden=32)
    prompts = [[1, 5, 9, 11], [1, 7], [1, 3, 4, 5, 6, 7, 8]]
    both = continue_batch(m, prompts, 8, 4, {2}, 0)
    for p, b in zip(prompts, both):
        one = continue_batch(m, [p], 8, 4, {2}, 0)[0]
        assert torch.equal(one["tokens"], b["tokens"])
        assert torch.allclose(one["top_lp"].float(), b["top_lp"].float(), atol=1e-2)


def test_distill_loss_is_cross_entropy_on_the_subset():
    torch.manual_seed(0)
    h, w = torch.randn(3, 8), torch.randn(5, 8)
    ids_v = torch.tensor([1, 4, 6, 7, 9])
    slot = torch.full((12,), -1)
    slot[ids_v] = torch.arange(5)
    top_ids = torch.tensor([[4, 2, 9], [1, 6, 11], [7, 9, 1]])  # 2 and 11 lie outside the subset
    top_lp = torch.log_softmax(torch.randn(3, 3), -1).half()
    got = distill_loss(h, w, slot, top_ids, top_lp)
    logq = torch.log_softmax(h @ w.T, -1)
    want = 0.0
    for i in range(3):
        keep = [(slot[t], float(top_lp[i, j].float().exp())) for j, t in enumerate(top_ids[i]) if slot[t] >= 0]
        z = sum(p for _, p in keep)
        want -= sum(p / z * logq[i, s] for s, p in keep)
    assert torch.allclose(got, want / 3, atol=1e-4)


def test_training_lowers_loss_and_resumes(tmp_path):
    m = tiny_llama(vocab=64, layers=3, hidden=32)
    data = distill_data(m)
    ids_v = head_ids(data.responses(), 32, {2})
    assert 2 in ids_v.tolist() and torch.equal(ids_v, ids_v.sort().values)
    cfg = DraftTrainConfig(steps=30, batch_tokens=100, checkpoint_every=15, lr=3e-3, warmup=3)
    ckpt = tmp_path / "d.ckpt"
    draft = build_draft(m, (0,))
    hist = train(draft, data, data, ids_v, cfg, ckpt)
    assert hist[0]["step"] == 0 and hist[-1]["loss"] < hist[1]["loss"]
    again = build_draft(m, (0,))
    hist2 = train(again, data, data, ids_v, cfg, ckpt)  # resumes at the end: no steps
    assert hist2 == hist
    for (n, p), (_, q) in zip(draft.named_parameters(), again.named_parameters()):
        assert torch.equal(p, q), n
    out = save_draft(draft, ids_v, tmp_path / "ship")
    assert out.exists() and (tmp_path / "ship" / "config.json").exists()


def test_step_times_taken_on_busy_cores_are_flagged_in_the_card():
    """A card whose step times were taken while other work shared the cores says so (its c and speedups are not the
    CPU's); an idle machine's card says nothing more."""
    assert busy_text({"target_ms": 14.0}) == ""
    text = busy_text({"target_ms": 1472.0, "busy_load": 4.2})
    assert "busy, load 4.2" in text and "not this CPU's own" in text


def test_accepted_lengths():
    m = [torch.tensor([True, True, False, True])]
    e1, a1 = accepted(m, 1)
    assert e1 == pytest.approx(3 / 4) and a1 == [pytest.approx(3 / 4)]
    e3, _ = accepted(m, 3)  # runs: 2, 1, 0, 1
    assert e3 == pytest.approx(4 / 4)


def test_prompts_are_distinct_and_seeded():
    a, b = compose(200, 0), compose(200, 0)
    assert a == b and len({t for _, t in a}) == 200
    docs = with_documents(["A text about rivers.", "Another text."], 5, 0)
    assert len(docs) == 5 and all(c.startswith("doc_") for c, _ in docs)


def test_broad_prompts_over_real_text(tmp_path):
    words, german, code = (
        ["harbour", "lantern", "orchard", "meadow"],
        ["Das ist ein kurzer Satz mit acht Wörtern hier."],
        ["def f(x):\n    return x"],
    )
    a = broad(60, 3, words, german, code)
    assert a == broad(60, 3, words, german, code) and len({t for _, t in a}) == 60
    assert {c for c, _ in a} == {"broad_words", "broad_german", "broad_code"}
    assert {c for c, _ in broad(20, 3, words, [], [])} == {"broad_words"}  # an empty source is skipped
    page = tmp_path / "man1" / "x.1.gz"
    page.parent.mkdir()
    page.write_bytes(
        gzip.compress(
            b".TH X 1\n.SH BESCHREIBUNG\nDas Programm \\fBx\\fP liest die Datei und schreibt das Ergebnis "
            b"in die Ausgabe.\nThe other field is used to store accounting information here.\n"
        )
    )
    assert corpus.german_sentences(tmp_path) == [
        "Das Programm x liest die Datei und schreibt das Ergebnis in die Ausgabe."
    ]
    assert corpus.german_sentences(tmp_path / "missing") == []
    assert all(src.startswith("def ") for src in corpus.stdlib_functions())


@pytest.mark.skipif(not (SHIPPED / "draft.safetensors").exists(), reason="no shipped draft yet")
def test_shipped_draft_loads_with_reduced_head():
    size = sum(f.stat().st_size for f in SHIPPED.iterdir() if f.is_file())
    assert size <= 30e6, f"shipped draft files take {size / 1e6:.1f} MB"
    pair = load_pair(ModelConfig(dtype="bf16", device="cpu"), progress=lambda s: None)
    assert pair.draft is not pair.target and pair.draft.head_ids is not None
    assert 256 <= len(pair.draft.head_ids) <= 49152
    assert pair.draft.config.hidden_size == pair.target.config.hidden_size
    out = pair.draft.forward([1, 9690, 198])
    outside = torch.ones(pair.draft.vocab_size, dtype=torch.bool)
    outside[pair.draft.support] = False  # the head ids and the three context tokens
    assert len(pair.draft.support) <= len(pair.draft.head_ids) + 3
    assert torch.isinf(out.logits[:, outside]).all() and torch.isfinite(out.logits[:, ~outside]).all()


class _WordTokenizer:
    """A chat tokenizer over the tiny models' 64 ids: id k is the word "wk", id 2 ends a turn."""

    chat_template = "tiny"
    eos_token_id, pad_token_id = 2, 0

    def apply_chat_template(self, turns, tokenize=False, add_generation_prompt=True):
        return "w1 w5 " + turns[0]["content"] + " w2 w7"

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [int(w[1:]) for w in text.split()]}

    def decode(self, ids, skip_special_tokens=False):
        return " ".join(f"w{i}" for i in ids if not (skip_special_tokens and i == 2))


class _Tok:
    """A word tokenizer for shards: "w5 w9" -> [5, 9]."""

    chat_template = None
    eos_token_id, pad_token_id = 2, 0

    def __call__(self, text):
        return {"input_ids": [int(w[1:]) for w in text.split()]}


def test_shards_are_reused_only_for_the_same_prompts(tmp_path):
    """A cached shard is reused when it holds the same prompts, and made again when it was written for others
    (e.g. a run with fewer composed prompts left a partial last shard)."""
    m = tiny_llama(vocab=64, layers=2, hidden=32)
    items = [("t", f"w1 w{5 + i}") for i in range(5)]
    kw = dict(max_new=3, top_k=2, seed=0, shard_size=2)
    few = build_shards(m, _Tok(), items[:3], tmp_path, "g", temperature=0.0, **kw)  # shards [0, 1] and [2]
    first = (tmp_path / "g-0000.safetensors").stat().st_mtime_ns
    more = build_shards(m, _Tok(), items, tmp_path, "g", temperature=0.0, **kw)  # [0, 1] reused, [2, 3] made again
    assert (tmp_path / "g-0000.safetensors").stat().st_mtime_ns == first
    assert [x["prompt"] for x in more.meta] == [t for _, t in items] and len(few) == 3
    assert torch.equal(more.subset([0, 1, 2]).tokens, few.tokens)


def test_target_written_prompts_are_finished_distinct_and_seeded():
    m, tok = tiny_llama(vocab=64, layers=2, hidden=32), _WordTokenizer()
    assert selfprompts.user_prefix(tok) == [1, 5]
    got = selfprompts.write_prompts(m, tok, 12, torch.Generator().manual_seed(0), max_new=40, batch=8)
    assert len(got) == 12 and len({t for _, t in got}) == 12 and {c for c, _ in got} == {"self"}
    assert all(len(t.split()) >= selfprompts.MIN_WORDS and "w2" not in t.split() for _, t in got)
    assert got == selfprompts.write_prompts(m, tok, 12, torch.Generator().manual_seed(0), max_new=40, batch=8)
    assert got != selfprompts.write_prompts(m, tok, 12, torch.Generator().manual_seed(1), max_new=40, batch=8)
    assert selfprompts.keep(" a b c d ", True) == "a b c d"
    assert selfprompts.keep("a b c d", False) is None and selfprompts.keep("a b", True) is None
    few = selfprompts.write_prompts(m, tok, 5, torch.Generator().manual_seed(0), max_new=1, batch=4, max_tries=2)
    assert few == []  # one token never makes a message: gives up
    tok.chat_template = None
    with pytest.raises(ValueError, match="chat template"):
        selfprompts.user_prefix(tok)


def test_held_out_matches_see_only_the_context_so_far():
    """The held-out evaluation runs each sequence in one forward; with a context vocabulary its row for position
    t + 1 must cover ids_<=t only, exactly what token-by-token decoding covers."""
    m = tiny_llama(vocab=64, layers=2, hidden=32)
    data = distill_data(m, n=6, new=10)
    draft = LM(tiny_llama(vocab=64, layers=1, hidden=32, seed=3), head_ids=torch.arange(0, 64, 4), context_vocab=True)
    got, _ = matches(draft, data)
    for s in range(len(data)):
        ids, P, _ = data.sequence(s)
        draft.reset()
        draft.forward(ids[: P - 1].tolist())
        step = [
            int(draft.forward([int(ids[t])]).logits[-1].argmax()) == int(ids[t + 1]) for t in range(P - 1, len(ids) - 1)
        ]
        assert got[s].tolist() == step
    x = torch.tensor([[7, 9, 7, 11]])  # the training loss's support: the same rule
    slot = torch.full((64,), -1)
    slot[torch.arange(0, 64, 4)] = torch.arange(16)
    w, sl, allow = context_head(
        x,
        torch.ones_like(x, dtype=torch.bool),
        torch.tensor([[0, 0], [0, 1], [0, 2]]),
        torch.randn(16, 32),
        slot,
        torch.randn(64, 32),
    )
    assert allow[:, 16:].tolist() == [[True, False, False], [True, True, False], [True, True, False]]


def test_coverage_counts_head_ids_and_the_context_before_each_token():
    tokens = torch.tensor([1, 7, 9, 4, 7, 30], dtype=torch.int32)  # prompt 1 7 9, answer 4 7 30
    data = Distill(
        tokens=tokens,
        starts=torch.tensor([0, 6]),
        prompt_len=torch.tensor([3], dtype=torch.int32),
        resp=torch.tensor([0, 3]),
        top_ids=torch.zeros(3, 1, dtype=torch.int32),
        top_lp=torch.zeros(3, 1, dtype=torch.float16),
        greedy=torch.tensor([True]),
        meta=[{}],
    )
    got = coverage(data, torch.tensor([1, 4]))
    assert got == {
        "size": 2,
        "head": 1 / 3,
        "head_and_context": 2 / 3,
    }  # 4 in the head, 7 in the context, 30 in neither


def test_a_shard_is_rebuilt_from_its_kept_answers_by_prefill_alone(tmp_path, monkeypatch):
    """Generated shards leave their answers as token ids (train.answers); with the shards gone, the same prompts
    are rebuilt from those ids by teacher-forced forwards, never by generation: the same tokens, the same top-1
    at every position, log-probs equal to fp16 rounding. Answers for other prompts are not used."""
    m = tiny_llama(vocab=64, layers=2, hidden=32)
    items = [("t", f"w1 w{5 + i} w{9 + i}") for i in range(6)]
    kw = dict(max_new=8, top_k=4, seed=0, shard_size=4, answers_dir=tmp_path / "answers")
    made = build_shards(m, _Tok(), items, tmp_path / "a", "g", temperature=0.0, **kw)
    kept = sorted(p.name for p in (tmp_path / "answers").iterdir())
    assert kept == ["g-0000.npz", "g-0001.npz"]
    monkeypatch.setattr(data_mod, "continue_batch", lambda *a, **k: pytest.fail("generated instead of prefilled"))
    again = build_shards(m, _Tok(), items, tmp_path / "b", "g", temperature=0.0, **kw)
    assert torch.equal(again.tokens, made.tokens) and torch.equal(again.resp, made.resp)
    assert torch.equal(again.top_ids[:, 0], made.top_ids[:, 0])
    assert (again.top_lp.float() - made.top_lp.float()).abs().max() < 1e-2
    assert answers.load(tmp_path / "answers" / "g-0000.npz", [t for _, t in items[1:5]]) is None
    responses, greedy = answers.load(tmp_path / "answers" / "g-0000.npz", [t for _, t in items[:4]])
    assert responses == made.responses()[:4] and greedy == [True] * 4
    assert (tmp_path / "answers" / "g-0000.npz").stat().st_size < 2_000  # a few bytes a token


def test_a_rewritten_card_keeps_the_sections_kept_by_hand(tmp_path):
    """The trainers rewrite README.md after every run; the history written below the generated sections stays."""
    path = tmp_path / "README.md"
    write_card(path, "# d\n\nintro\n\n## Recipe (seed 0)\nold recipe\n\n## Held-out metrics\n0.5\n")
    path.write_text(path.read_text() + "\n## Stage by stage\nstage 1 by hand\n\n## Head\nhead by hand\n")
    write_card(path, "# d\n\nnew intro\n\n## Recipe (seed 1)\nnew recipe\n\n## Held-out metrics\n0.6\n")
    text = path.read_text()
    assert "new recipe" in text and "0.6" in text and "old recipe" not in text and "0.5" not in text
    assert text.index("0.6") < text.index("stage 1 by hand") < text.index("head by hand")
    assert text.count("## Recipe") == 1 and text.endswith("head by hand\n")
