"""The suite's closing account of where its time went (tests/conftest.py), read from what
servelab notes in SERVELAB_START_LOG: engine starts, their time to health, measuring."""
from conftest import time_accounts

from servelab.serve.server import START_LOG, note_event


def test_starts_pair_with_their_health_and_sessions_add_their_measuring(tmp_path, monkeypatch):
    log = tmp_path / "starts.tsv"
    monkeypatch.setenv(START_LOG, str(log))

    def noted(test: str, event: str) -> None:
        monkeypatch.setenv("PYTEST_CURRENT_TEST", test)
        note_event(event)

    noted("tests/a.py::t1 (call)", "start\t100\t-m servelab.engines.vllm.cli serve")
    noted("tests/a.py::t1 (call)", "healthy\t100\t24.50")
    noted("tests/a.py::t1 (call)", "measured\t7\t3.25")
    noted("tests/a.py::t2 (call)", "start\t100\t-m servelab.engines.vllm.cli serve")  # a reused pid
    noted("tests/a.py::t2 (call)", "start\t101\t-m servelab.engines.vllm.offline latency")   # never healthy
    noted("tests/a.py::t2 (call)", "healthy\t100\t30.00")
    noted("tests/a.py::t2 (call)", "measured\t8\t1.75")
    noted("tests/b.py::t (call)", "start\t200\ttests/helpers/standin_server.py --port 1")   # no engine
    accounts = time_accounts(str(log))
    assert set(accounts) == {"tests/a.py"}
    starts = accounts["tests/a.py"]["starts"]
    assert starts[:2] == [24.5, 30.0] and len(starts) == 3 and starts[2] != starts[2]   # nan
    assert accounts["tests/a.py"]["measuring"] == 5.0


def test_no_log_is_no_account(tmp_path):
    assert time_accounts(str(tmp_path / "missing.tsv")) == {}
