"""The local model is real (loads in transformers) and deterministic from its seed."""
import hashlib

from servelab.fetch import tiny_model


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_recipe_gives_identical_files_and_a_working_model(tmp_path, local_config):
    recipe = local_config["models"]["tiny_llama"]["tiny"]
    a = tiny_model.build(tmp_path / "a", recipe)
    b = tiny_model.build(tmp_path / "b", recipe)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert digest(a / name) == digest(b / name), name

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a)
    assert len(tok) >= 10000
    ids = tok("bafe ki romu").input_ids
    assert tok.decode(ids) == "bafe ki romu"
    model = AutoModelForCausalLM.from_pretrained(a)
    assert model.config.vocab_size == recipe["vocab_size"]
    out = model.generate(torch.tensor([ids]), max_new_tokens=4, do_sample=False)
    assert out.shape[1] == len(ids) + 4


def test_another_seed_gives_other_weights(tmp_path, local_config):
    recipe = local_config["models"]["tiny_llama"]["tiny"]
    a = tiny_model.build(tmp_path / "a", recipe)
    c = tiny_model.build(tmp_path / "c", {**recipe, "seed": 1})
    assert digest(a / "model.safetensors") != digest(c / "model.safetensors")
