import json

import pytest

from servelab.atomic import atomic_path
from servelab.serve.store import PointStore, identity_hash


def test_identity_hash_ignores_key_order_and_sees_every_value():
    a = {"engine": "vllm", "client": {"request_rate": 4, "num_prompts": 40}}
    b = {"client": {"num_prompts": 40, "request_rate": 4}, "engine": "vllm"}
    assert identity_hash(a) == identity_hash(b)
    assert identity_hash(a) != identity_hash({**a, "client": {"request_rate": 8, "num_prompts": 40}})


def test_save_moves_raw_files_in_and_is_all_or_nothing(tmp_path):
    store = PointStore(tmp_path / "store")
    raw = tmp_path / "bench.json"
    raw.write_text("{}")
    store.save("k1", {"x": 1}, {"bench.json": raw})
    assert store.has("k1") and store.load("k1") == {"x": 1}
    assert (store.path("k1") / "bench.json").exists() and not raw.exists()
    with pytest.raises(FileNotFoundError):
        store.save("k2", {"x": 2}, {"bench.json": tmp_path / "missing.json"})
    assert not store.has("k2")
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["k1"]


def test_atomic_path_leaves_nothing_behind_on_failure(tmp_path):
    out = tmp_path / "out.json"
    with pytest.raises(RuntimeError):
        with atomic_path(out) as tmp:
            tmp.write_text(json.dumps({"half": True}))
            raise RuntimeError("crash mid-write")
    assert list(tmp_path.iterdir()) == []
