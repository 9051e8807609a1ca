"""The trace generator, its stated reuse, validation and the crop (servelab.fetch.trace)."""
import json
import re

import pytest

from servelab.fetch import trace

REPO_TRACE = "resources/traces/tiny_trace.jsonl"


def test_the_generator_repeats_each_turns_conversation_so_far_and_states_its_reuse():
    rows = trace.generate(sessions=3, turns=3, new_blocks=2, block_tokens=16, output_length=8,
                          session_gap_ms=100, think_ms=1000, seed=1)
    assert [r["timestamp"] for r in rows] == sorted(r["timestamp"] for r in rows)
    by_session = {}
    for r in rows:
        by_session.setdefault(r["session"], []).append(r)
    for turns in by_session.values():
        turns.sort(key=lambda r: r["turn"])
        for before, after in zip(turns, turns[1:]):
            assert after["hash_ids"][:len(before["hash_ids"])] == before["hash_ids"]
            assert after["input_length"] == before["input_length"] + 2 * 16
    assert trace.stated_reuse(rows) == pytest.approx((3 - 1) / (3 + 1))
    # independent requests reuse nothing
    assert trace.stated_reuse([{"hash_ids": [1, 2]}, {"hash_ids": [3, 4]}]) == 0


def test_the_shipped_trace_is_what_the_generator_makes(tmp_path):
    trace.main([str(tmp_path / "t.jsonl")])
    assert (tmp_path / "t.jsonl").read_text() == open(REPO_TRACE).read()
    assert trace.stated_reuse(trace.read(REPO_TRACE)) == 0.5


@pytest.mark.parametrize("mutate, named", [
    (lambda rows: rows[1].pop("hash_ids"), "line 2 lacks field(s) ['hash_ids']"),
    (lambda rows: rows[2].update(timestamp=0), "line 3: timestamps not sorted"),
    (lambda rows: rows[0].update(input_length=0), "line 1: input_length must be a positive integer"),
])
def test_a_bad_trace_is_refused_naming_line_and_field(tmp_path, mutate, named):
    rows = trace.generate(sessions=2, turns=2, new_blocks=1, block_tokens=8, output_length=4,
                          session_gap_ms=500, think_ms=1000, seed=0)
    mutate(rows)
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=re.escape(named)):
        trace.read(path)


def test_the_crop_keeps_the_window_and_starts_it_at_zero():
    rows = [{"timestamp": t, "input_length": 8, "output_length": 4, "hash_ids": [t]} for t in (0, 900, 1500, 2500)]
    assert [r["timestamp"] for r in trace.crop(rows, [0.5, 2])] == [0, 600]
    with pytest.raises(ValueError, match="no request"):
        trace.crop(rows, [10, 20])
