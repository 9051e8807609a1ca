"""Rounds' servers started together (servelab/serve/round_servers.py), with real vLLM servers
of the tiny model: one configuration that vLLM refuses at its start fails its own points with
vLLM's reason (data), and the other is measured in its rounds beside it."""
import copy
import json
import os

from snakemake.utils import validate

from conftest import REPO
from servelab.checks import cross_checks
from servelab.checks.session_plan import SessionPlan
from servelab.serve import rounds
from servelab.engines.environment import engine_cache_env
from servelab.serve.session_spec import SessionSpec


def test_a_configuration_refused_at_a_together_start_fails_alone(local_config, tiny_model, tmp_path, monkeypatch):
    config = copy.deepcopy(local_config)
    exp = config["experiments"]["study_tuning_cpu"]
    exp["rounds"] = {"seed": 0, "least": 2, "most": 2, "starts": "together"}
    exp["server"]["configs"] = {"baseline": {}, "too_long": {"max_model_len": 10 ** 6}}
    exp["client"]["args"].update(duration_s=1, num_prompts=12)
    config["run"] = ["study_tuning_cpu"]
    cross_checks.drop_nulled_sections(config)
    validate(config, str(REPO / "config/schema.yaml"))
    plan = SessionPlan(config)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    def spec(point):   # as the workflow's job makes it (workflow/scripts/serve_session.py)
        params = plan.params("study_tuning_cpu", point)
        env = {**engine_cache_env("vllm", str(tmp_path / "cache"), params["env"]), **params["env"]}
        return SessionSpec.from_params("study_tuning_cpu", point, params, model_path=str(tiny_model), dataset_path=None,
                                       store_dir=str(tmp_path / "store"), env={**os.environ, "PYTHONPATH": str(REPO), **env})

    specs = [spec("baseline"), spec("too_long")]
    rounds.run(specs[0], specs[1:], tmp_path / "view.json")
    records = [json.loads(p.read_text()) for p in (tmp_path / "store").glob("*/record.json")]
    failed = [r for r in records if r.get("failure")]
    measured = [r for r in records if not r.get("failure")]
    assert {r["server_point"] for r in failed} == {"too_long"} and len(measured) == 2, records
    assert failed[0]["failure"]["stage"] == "server start-up"
    assert "max_model_len" in failed[0]["failure"]["reason"], failed[0]["failure"]
    notes = [json.loads(p.read_text()) for p in (tmp_path / "store/sessions").glob("*/rounds.json")]
    assert sorted(n["started"] for n in notes) == ["together", "together"]
