"""Snakemake's between-workflow cache serves models and workloads to a second clone."""
import hashlib

from conftest import make_workdir, snakemake

TARGETS = ["resources/models/tiny_llama", "resources/datasets/tiny_sharegpt.json"]


def test_second_clone_takes_model_and_dataset_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SNAKEMAKE_OUTPUT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    first = make_workdir(tmp_path / "clone1")
    second = make_workdir(tmp_path / "clone2")
    snakemake(first, "--profile", "profiles/local", *TARGETS, "--cache")
    assert (first / "logs/models/tiny_llama.log").exists()  # built here
    proc = snakemake(second, "--profile", "profiles/local", *TARGETS, "--cache")
    out = proc.stdout + proc.stderr
    assert "resources/models/tiny_llama/model.safetensors from cache" in out
    assert "resources/datasets/tiny_sharegpt.json from cache" in out
    # not built again: the files are the cache's, and the build said nothing
    weights = second / "resources/models/tiny_llama/model.safetensors"
    assert weights.is_symlink() and str(weights.resolve()).startswith(str(tmp_path / "cache"))
    assert (second / "logs/models/tiny_llama.log").read_text() == ""
    for rel in ("resources/models/tiny_llama/model.safetensors", "resources/datasets/tiny_sharegpt.json"):
        assert (hashlib.sha256((first / rel).read_bytes()).digest()
                == hashlib.sha256((second / rel).read_bytes()).digest())
