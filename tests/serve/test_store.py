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


def test_a_session_spec_is_built_from_its_rule_params_and_what_the_job_knows():
    """workflow/scripts/serve_session.py: every params key that is a spec field is taken, a
    host's `guests` list is not, and what only the job knows is given by name."""
    from servelab.serve.session_spec import SessionSpec

    params = {"engine": "vllm", "kind": "serve", "tool": None, "model_identity": "tiny@abc",
              "dataset_identity": "d@1", "dataset_name": "sharegpt", "server_knobs": {"max_num_seqs": 4},
              "client_points": [{"request_rate": 4, "num_prompts": 8}], "startup_timeout_s": 600,
              "env": {"A": "1"}, "identity_env": {}, "topology": None, "monitors": {"metrics": {}},
              "measurement": {"repeats": 3}, "load_search": None, "guests": [{"experiment": "other"}]}
    spec = SessionSpec.from_params("week01", "base", params, model_path="/m", dataset_path=None,
                                   eval_include_path=None, store_dir="results/week01/store",
                                   env={"A": "1", "VLLM_CACHE_ROOT": "/c"}, config_hash="h", workflow_dir="/w")
    assert (spec.experiment, spec.server_point, spec.model_path, spec.store_dir) == \
        ("week01", "base", "/m", "results/week01/store")
    assert spec.server_knobs == {"max_num_seqs": 4} and spec.setting("repeats") == 3
    assert spec.env == {"A": "1", "VLLM_CACHE_ROOT": "/c"} and spec.startup_timeout_s == 600
    assert not hasattr(spec, "guests")
