"""The pair behind longpair-*.{md,json}: a tokenizer that makes long prompts (a byte-level BPE of 320 ids trained on
the shipped Spec-Bench questions), a random 4-layer Llama target with 1,024 positions, and a perturbed copy of it as
the draft. `python longpair_pair.py OUT` writes OUT/target and OUT/draft."""

import json
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

QUESTIONS = Path(__file__).resolve().parents[2] / "spec_bench_questions.jsonl"


def main(out: Path) -> None:
    texts = [json.loads(line)["turns"][0] for line in QUESTIONS.open()]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<s>", "</s>", "<pad>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = (
        "{% for m in messages %}<s>{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}A:{% endif %}"
    )
    lens = sorted(len(fast(t)["input_ids"]) for t in texts)
    print(f"prompt tokens: median {lens[len(lens) // 2]}, max {lens[-1]}, over 1024: {sum(n > 1024 for n in lens)}")
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=1024, bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
    )  # fmt: skip
    target, draft = LlamaForCausalLM(cfg), LlamaForCausalLM(cfg)
    draft.load_state_dict(target.state_dict())
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a perturbed copy: it agrees with the target often and not always
        for prm in draft.parameters():
            prm.add_(0.2 * prm.std() * torch.randn(prm.shape, generator=g))
    for name, m in (("target", target), ("draft", draft)):
        m.save_pretrained(out / name)
        fast.save_pretrained(out / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
