"""`tokensieve bench web --maskbench-every N` builds its cases from MaskBench before it starts
the browser (the browser's part runs in test_web_demo.py). The case builder once imported a
helper from a module that no longer had it, and the documented command failed at once.

The cases must be every Nth schema (in the benchmark's split order) that has valid instances,
with those instances in compact JSON: compared with the dataset files read here directly.
"""

from __future__ import annotations

import argparse
import gzip
import json

from bench import web
from conftest import shared_path
from tokensieve._tools.maskbench import SPLITS

EVERY = 700


def test_maskbench_cases_are_every_nth_schema_with_its_valid_instances() -> None:
    data = shared_path() / "data" / "jsonschemabench" / "maskbench"
    cases = web._cases(argparse.Namespace(maskbench_every=EVERY, data=str(data)))
    records = []
    for split in SPLITS:
        path = data / f"{split}.jsonl.gz"
        if path.exists():
            with gzip.open(path, "rt", encoding="utf-8") as f:
                records += [json.loads(line) for line in f]
    expected = [r for r in records[::EVERY] if any(t.get("valid") for t in r.get("tests", []))]
    assert len(expected) >= 10
    assert [c["id"] for c in cases] == [r["id"] for r in expected]
    for case, record in zip(cases, expected):
        assert case["kind"] == "json_schema"
        assert json.loads(case["text"]) == record["schema"]
        valid = [t["data"] for t in record["tests"] if t.get("valid")]
        assert case["inputs"] == [json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in valid]
