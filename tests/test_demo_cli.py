"""`tokensieve demo` prints realistic samples: real calendar dates and 24-hour times from the
regex example, schema-valid JSON from the extraction example (checked with `datetime` and
`jsonschema`, not with the package)."""

from __future__ import annotations

import datetime
import json
import re

import jsonschema

from tokensieve._tools import demo as _demo
from tokensieve._tools.cli import main


def test_demo_prints_valid_dates_times_and_schema_valid_json(capsys):
    assert main(["demo", "--samples", "4", "--seed", "5"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert len(lines) == 8
    texts = [re.sub(r"^\[\d+\] ", "", line).replace("[", "").replace("]", "") for line in lines]
    for sentence in texts[:4]:
        found = re.search(r" on (\d{4}-\d{2}-\d{2}) at (\d{2}:\d{2})\.$", sentence)
        assert found, sentence
        datetime.date.fromisoformat(found.group(1))
        datetime.time.fromisoformat(found.group(2))
    # The JSON lines mark forced runs with brackets too, so check the same seeds' samples.
    for seed in range(5, 9):
        result = _demo.sample(_demo.compile_grammar("json_schema", json.dumps(_demo.EVENT_SCHEMA)), seed=seed, max_tokens=200)
        value = json.loads(result["text"])
        jsonschema.validate(value, _demo.EVENT_SCHEMA)
        datetime.date.fromisoformat(value["date"])
        datetime.time.fromisoformat(value["start"])


def test_every_example_accepts_its_own_input():
    for example in _demo.EXAMPLES:
        grammar = _demo.compile_grammar(example["kind"], example["text"])
        assert _demo.inspect(grammar, example["input"])["complete"], example["key"]


def test_bench_cases_times_one_mask_per_token_and_reports_bad_grammars():
    tok = _demo.tokenizer()
    cases = [{"kind": e["kind"], "text": e["text"], "inputs": [e["input"]]} for e in _demo.EXAMPLES]
    cases.append({"kind": "regex", "text": "ab(c", "inputs": ["abc"]})
    result = _demo.bench_cases(cases)
    assert result["mask_us"]["count"] == sum(len(tok.encode(e["input"])) for e in _demo.EXAMPLES)
    assert result["failed"] == 1 and result["per_case"][-1]["error"].startswith("compile")
    assert result["compile_ms"]["count"] == len(_demo.EXAMPLES)


def test_toy_model_samples_the_prior_restricted_to_the_mask():
    """Rejection sampling (unigram) and k-th set bit (random) against the distribution written
    out directly: softmax of the allowed tokens' logits, and uniform."""
    import array
    import math
    from collections import Counter

    tok = _demo.tokenizer()
    def mask_of(allowed):
        mask = array.array("i", bytes(4 * ((tok.vocab_size + 31) // 32)))
        for t in allowed:
            word = mask[t >> 5] & 0xFFFFFFFF | (1 << (t & 31))
            mask[t >> 5] = word - (1 << 32) if word >= 1 << 31 else word
        return mask

    # Bytes, the most frequent merges (rejection mostly hits), a rare merge, EOS; then a set so
    # rare under the prior that 64 draws always miss (the listing fallback).
    runs = [
        ([5, 256, 257, 258, 300, 301, 1000, 20000, 50256], "unigram", 1.0, 5_000),
        ([5, 256, 257, 258, 300, 301, 1000, 20000, 50256], "unigram", 0.5, 5_000),
        ([5, 256, 257, 258, 300, 301, 1000, 20000, 50256], "random", 1.0, 5_000),
        ([7, 30000, 50256], "unigram", 1.0, 1_000),
    ]
    for allowed, kind, temperature, draws in runs:
        mask = mask_of(allowed)
        model = _demo.ToyModel(tok, kind, seed=7)
        counts = Counter(model.pick(mask, temperature) for _ in range(draws))
        assert set(counts) <= set(allowed)
        if kind == "random":
            expected = {t: 1 / len(allowed) for t in allowed}
        else:
            logits = {t: -math.log(20000.0 if t < 256 else t - 255.0) for t in allowed}
            z = sum(math.exp(v / temperature) for v in logits.values())
            expected = {t: math.exp(v / temperature) / z for t, v in logits.items()}
        for t, p in expected.items():
            sd = math.sqrt(p * (1 - p) / draws)
            assert abs(counts[t] / draws - p) < 5 * sd + 1e-4, (kind, temperature, t, counts[t] / draws, p)
    empty = mask_of([])
    assert _demo.ToyModel(tok, "unigram", seed=0).pick(empty, 1.0) is None
