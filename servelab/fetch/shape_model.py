"""A model by shape: an architecture's real config.json and a tokenizer of the same
vocabulary size, no weights. Served with `--load-format dummy` (random weights made on
the device), it runs the real kernels at the real sizes: valid for speed and memory,
not for accuracy. No hub access and no gated-model token are needed.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]


def byte_level_bpe(vocab_size: int):
    """A byte-level BPE tokenizer with exactly `vocab_size` tokens, built by construction:
    3 specials, the 256 byte symbols, then merges of every byte pair and of byte triples
    in a fixed order until the size is reached (training on text could not reach a
    128k or 200k vocabulary here)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + alphabet)}
    if vocab_size < len(vocab):
        raise ValueError(f"vocab_size {vocab_size} is below the {len(vocab)} tokens a byte-level BPE needs")
    merges: list[tuple[str, str]] = []

    def add(left: str, right: str) -> bool:
        if len(vocab) >= vocab_size:
            return False
        vocab[left + right] = len(vocab)
        merges.append((left, right))
        return True

    pairs = [a + b for a in alphabet for b in alphabet]
    for pair in pairs:
        if not add(pair[0], pair[1]):
            break
    for pair in pairs:               # triples: a known pair, then one more byte
        if len(vocab) >= vocab_size:
            break
        for c in alphabet:
            if not add(pair, c):
                break
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", model_max_length=1 << 20)


def build(out_dir: str | Path, shape: dict) -> Path:
    """Write config.json (the shape's config, with this tokenizer's special token ids)
    and the tokenizer into out_dir."""
    import transformers

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = dict(shape["config"])
    tokenizer = byte_level_bpe(int(config["vocab_size"]))
    config.update(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    config.setdefault("torch_dtype", "bfloat16")
    # as save_pretrained writes it: without it, transformers 5 takes a local tokenizer for a
    # Mistral one of the broken regex and warns "incorrect tokenization" in every server log
    config.setdefault("transformers_version", transformers.__version__)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    tokenizer.save_pretrained(out)
    (out / "servelab_shape.json").write_text(json.dumps(shape, indent=2, sort_keys=True))
    return out
