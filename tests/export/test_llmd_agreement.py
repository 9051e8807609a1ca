"""servelab's llm-d validator (servelab/export/llmd_schema.py) against llm-d-benchmark's own
verdicts on an edge-case corpus (tests/data/llmd_corpus: each case a change to one of
servelab's reports, llm-d's verdict recorded by tests/export/llmd_check.py from its pydantic
models): both sides, what llm-d accepts and what it refuses."""
from pathlib import Path

import pytest
import yaml

from llmd_check import changed
from servelab.export import llmd_schema

CORPUS = Path(__file__).parents[1] / "data/llmd_corpus"
BASE = yaml.safe_load((CORPUS / "base.yaml").read_text())
CASES = yaml.safe_load((CORPUS / "cases.yaml").read_text())


def test_the_corpus_covers_both_sides():
    verdicts = [c["llmd"] for c in CASES]
    assert verdicts.count("accept") >= 15 and verdicts.count("refuse") >= 15


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_servelab_agrees_with_llm_d(case):
    problems = llmd_schema.errors(changed(BASE, case))
    assert ("refuse" if problems else "accept") == case["llmd"], problems
