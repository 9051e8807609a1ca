"""Build a tiny Llama with random weights and a locally trained tokenizer.

Everything is derived from a seed, so two builds with the same recipe give
byte-identical weights and tokenizer: the embedded default needs no hub.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["th", "sh", "ch", "qu"]
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]


def pseudo_words(count: int, rng: random.Random) -> list[str]:
    """`count` distinct pronounceable words, enough to give BPE many merges."""
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def corpus_lines(seed: int, n_words: int = 30000, n_lines: int = 20000) -> list[str]:
    """A deterministic corpus with a Zipf-like word distribution."""
    rng = random.Random(seed)
    vocab = pseudo_words(n_words, rng)
    rng.shuffle(vocab)
    cum_weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))
    return [" ".join(rng.choices(vocab, cum_weights=cum_weights, k=rng.randint(8, 40)))
            for _ in range(n_lines)]


def train_tokenizer(vocab_size: int, seed: int):
    """Byte-level BPE trained on the generated corpus; returns a HF fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_lines(seed), trainer=trainer)
    if tok.get_vocab_size() < vocab_size:
        raise RuntimeError(
            f"tokenizer training reached only {tok.get_vocab_size()} tokens, "
            f"fewer than vocab_size={vocab_size}; enlarge the corpus"
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=4096,
    )


def build(out_dir: str | Path, recipe: dict) -> Path:
    """Write config, safetensors weights and tokenizer for `recipe` into out_dir."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seed = int(recipe["seed"])
    tokenizer = train_tokenizer(int(recipe["vocab_size"]), seed)
    config = LlamaConfig(
        vocab_size=int(recipe["vocab_size"]),
        hidden_size=int(recipe["hidden_size"]),
        intermediate_size=int(recipe["intermediate_size"]),
        num_hidden_layers=int(recipe["num_layers"]),
        num_attention_heads=int(recipe["num_heads"]),
        num_key_value_heads=int(recipe["num_kv_heads"]),
        max_position_embeddings=int(recipe["max_position_embeddings"]),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        torch_dtype="bfloat16",
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "servelab_recipe.json").write_text(json.dumps(recipe, indent=2, sort_keys=True))
    return out
