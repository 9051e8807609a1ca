import json
from pathlib import Path

import pytest

from servelab.atomic import atomic_path
from servelab.raw_result import read_raw
from servelab.serve.store import PointStore, identity_hash


def test_identity_hash_ignores_key_order_and_sees_every_value():
    a = {"engine": "vllm", "client": {"request_rate": 4, "num_prompts": 40}}
    b = {"client": {"num_prompts": 40, "request_rate": 4}, "engine": "vllm"}
    assert identity_hash(a) == identity_hash(b)
    assert identity_hash(a) != identity_hash({**a, "client": {"request_rate": 8, "num_prompts": 40}})


def test_save_moves_raw_files_in_and_is_all_or_nothing(tmp_path):
    store = PointStore(tmp_path / "store")
    raw = tmp_path / "bench.json"
    raw.write_text('{"ttfts": [0.1234567891]}')
    store.save("k1", {"x": 1}, {"bench.json": raw})
    assert store.has("k1") and store.load("k1") == {"x": 1}
    assert (store.path("k1") / "bench.json.gz").exists() and not raw.exists()
    assert store.raw("k1") == {"ttfts": [0.123457]}
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


RECORDED = Path(__file__).parents[1] / "data/recorded_gpu/week12_h100/store"


def test_the_compact_raw_store_is_over_5x_smaller_and_gives_the_same_rows(tmp_path):
    """A recorded H100 point's bench.json (vLLM 0.26): without its generated texts, its
    per-request times to the microsecond and gzipped, it is 14x smaller; its row (the whole
    run's and the held window's figures) is the same to 1e-4 (the send rate of a burst whose
    16 requests left within 4 ms moves most: 3e-5)."""
    from servelab.analysis.metrics import point_row

    point = max(RECORDED.glob("*/bench.json"), key=lambda p: p.stat().st_size)
    before = point.stat().st_size
    original = json.loads(point.read_text())
    store = PointStore(tmp_path / "store")
    copy = tmp_path / "bench.json"
    copy.write_text(point.read_text())
    record = json.loads((point.parent / "record.json").read_text())
    store.save("k", record, {"bench.json": copy})
    after = (store.path("k") / "bench.json.gz").stat().st_size
    assert before / after > 5, (before, after)
    print(f"raw store: {before} -> {after} bytes ({before / after:.1f}x)")
    old, new = point_row(record, original), point_row(record, store.raw("k"))
    assert old.keys() == new.keys() and new["raw_json"].endswith("bench.json.gz")
    for column, value in old.items():
        if isinstance(value, float) and column != "raw_json":
            assert new[column] == pytest.approx(value, rel=1e-4, abs=1e-6), column


def test_a_store_entry_without_its_raw_result_is_named(tmp_path):
    (tmp_path / "k").mkdir()
    with pytest.raises(FileNotFoundError, match="k: no bench.json.gz or bench.json"):
        read_raw(tmp_path / "k")
