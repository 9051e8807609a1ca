"""`servelab import` against inputs made to hang, exhaust, crash or fool it
(tests/export/hostile_inputs.py): each refused in one line naming the file and what is wrong,
exit 1, no traceback, nothing written; or imported with import's own verdict: figures no run
can produce are never valid, whatever the file says of itself. The time and memory each
takes, in a process of its own: `servelab bench import_hostile`."""
import math
import tempfile
from pathlib import Path

import pandas as pd
import pytest

import hostile_inputs
from servelab import cli
from servelab.export import import_table
from servelab.export.importers import import_file


def test_every_hostile_input_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus = hostile_inputs.refused(tmp_path / "in")
    assert len(corpus) >= 35
    for case, (argv, why) in corpus.items():
        assert cli.main(["import", *argv]) == 1, case
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err, (case, err)
        assert "Traceback" not in err and "did not foresee" not in err, (case, err)
        named = next((argv[i + 1] for i, a in enumerate(argv) if a == case.split()[0]), None) \
            if case.startswith("--") else argv[0]
        assert named in err, (case, err)   # the file, or the --out / --beside at fault
        assert not (tmp_path / "in/table.csv").exists(), case
    assert not list(tmp_path.rglob(".table.csv*")) and not list(tmp_path.rglob(".*.tmp*"))


with tempfile.TemporaryDirectory() as made:   # the cases' names, for the test ids
    IMPOSSIBLE = list(hostile_inputs.impossible(Path(made)))


@pytest.mark.parametrize("case", IMPOSSIBLE)
def test_impossible_figures_import_as_invalid_whatever_the_file_says(case, tmp_path):
    path, why = hostile_inputs.impossible(tmp_path)[case]
    row = import_file(path)
    assert row["valid"] is False and row["import_valid"] is False, (case, row["invalid_reason"])
    assert why in row["invalid_reason"], (case, row["invalid_reason"])


def test_the_exporters_word_is_kept_beside_imports_own_and_never_in_place_of_it(tmp_path):
    cases = hostile_inputs.impossible(tmp_path)
    said_valid = import_file(cases["30 failed of 32, said valid"][0])
    assert (said_valid["exported_valid"], said_valid["import_valid"], said_valid["valid"]) == (True, False, False)
    report = hostile_inputs.report()   # possible figures, but its exporter judged it invalid
    report["results"]["observability"]["servelab_point"].update(valid=False, invalid_reason="no steady state")
    said_invalid = import_file(hostile_inputs.put(tmp_path, "said-invalid.yaml", report))
    assert (said_invalid["exported_valid"], said_invalid["import_valid"], said_invalid["valid"]) == \
        (False, True, False)
    assert said_invalid["invalid_reason"] == "as exported: no steady state"
    fine = import_file(hostile_inputs.put(tmp_path, "fine.yaml", hostile_inputs.report()))
    assert (fine["exported_valid"], fine["import_valid"], fine["valid"]) == (True, True, True)


def test_text_a_spreadsheet_would_run_is_made_inert(tmp_path):
    data = hostile_inputs.vllm()
    data["model_id"] = '=HYPERLINK("http://evil","x")\x00\u202eexe.txt'
    data["backend"] = "@SUM(1+1)"
    table = import_table.run([hostile_inputs.put(tmp_path, "evil.json", data)], tmp_path / "t.csv")["table"]
    assert table["model"][0] == "'=HYPERLINK(\"http://evil\",\"x\")\\u0000\\u202eexe.txt"
    assert table["engine"][0] == "'@SUM(1+1)"
    text = (tmp_path / "t.csv").read_text()
    assert "\x00" not in text and "\u202e" not in text
    assert math.isclose(table["ttft_p99_ms"][0], data["p99_ttft_ms"])   # the figures untouched


def test_runs_of_one_configuration_in_a_folder_are_its_load_points(tmp_path):
    """Another tool's runs saved in one folder are one configuration, several load points;
    two runs at the same load in one folder stay apart, each named by its file."""
    for rate in (1.0, 4.0, 8.0):
        hostile_inputs.put(tmp_path / "box-a", f"rate{rate:g}.json", {**hostile_inputs.vllm(), "request_rate": rate})
    files = sorted((tmp_path / "box-a").glob("*.json"))
    table = import_table.run(files, tmp_path / "t.csv")["table"]
    assert set(table["server_point"]) == {"imported:box-a"} and sorted(table["request_rate"]) == [1, 4, 8]
    assert table["point_key"].is_unique
    named = import_table.run(files, tmp_path / "n.csv", name="h100")["table"]
    assert set(named["server_point"]) == {"h100"}
    hostile_inputs.put(tmp_path / "box-a", "again.json", {**hostile_inputs.vllm(), "request_rate": 4.0})
    table = import_table.run(sorted((tmp_path / "box-a").glob("*.json")), tmp_path / "t.csv")["table"]
    assert sorted(table["server_point"]) == ["imported:again", "imported:box-a", "imported:box-a",
                                            "imported:rate4"]
    assert isinstance(pd.read_csv(tmp_path / "t.csv"), pd.DataFrame)
