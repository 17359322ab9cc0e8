"""The core instance's pattern cache (`core/src/pattern_cache.zig`): grammars rebuild the
patterns earlier grammars parsed from recipes instead of parsing them again. The masks must be
exactly those of grammars that parse every pattern themselves.

Reference: the same MaskBench schemas compiled in a fresh instance with the cache off
(`Core.debug_pattern_cache(False)`), their masks along every test instance's tokens. The cached
side compiles each schema a third time after two warm-up compiles (a text is remembered on its
second sight), in an instance of its own, and the test requires the cache to have supplied
patterns to those compiles: a run where it never answers proves nothing.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from conftest import load_shared_tokenizer, shared_path
from tokensieve import CoreOptions, CorePool, Grammar, Matcher
from tokensieve._errors import TokensieveError
from tokensieve._tools.maskbench import load_entries

SPLITS = ("Github_easy", "Github_medium", "Glaiveai2K", "Kubernetes", "JsonSchemaStore", "Snowplow")
SCHEMAS_PER_SPLIT = 8
TOKENS_PER_INSTANCE_MAX = 60


def _cases() -> list[tuple[str, object, list[list[int]]]]:
    tok = load_shared_tokenizer("llama3")
    data_dir = shared_path() / "data" / "jsonschemabench" / "maskbench"
    cases = []
    for split in SPLITS:
        for entry in load_entries(data_dir, [split])[:SCHEMAS_PER_SPLIT]:
            record = entry.record()
            texts = [json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False) for t in record["tests"]]
            cases.append((entry.id, record["schema"], [tok.encode(t)[:TOKENS_PER_INSTANCE_MAX] for t in texts]))
    return cases


def _masks(pool: CorePool, schema: object, instances: list[list[int]]) -> list[str] | str:
    """A digest of every mask along every instance (until a token is refused), or the error
    the schema fails with."""
    tok = load_shared_tokenizer("llama3")
    try:
        first = Matcher(tok, Grammar.json_schema(schema), pool=pool)
    except TokensieveError as err:
        return f"{type(err).__name__}: {err}"
    buf = np.zeros((1, (tok.vocab_size + 31) // 32), dtype=np.int32)
    digests = []
    for ids in instances:
        m = first.fork()
        for t in ids:
            m.fill_bitmask(buf)
            digests.append(hashlib.sha1(buf.tobytes()).hexdigest())
            if not m.consume_token(t):
                digests.append(f"refused {t}")
                break
    return digests


@pytest.fixture(scope="module")
def cases() -> list[tuple[str, object, list[list[int]]]]:
    return _cases()


def test_masks_with_the_pattern_cache_equal_masks_without(cases) -> None:
    plain = CorePool(CoreOptions(instances=1))
    plain.first().debug_pattern_cache(False)
    expected = {schema_id: _masks(plain, schema, instances) for schema_id, schema, instances in cases}
    assert plain.first().debug_pattern_cache(False) == 0, "the cache answered while switched off"

    cached = CorePool(CoreOptions(instances=1))
    core = cached.first()
    for _ in range(2):
        for _, schema, _ in cases:
            try:
                Grammar.json_schema(schema).core_handle(core)
            except TokensieveError:
                pass
    hits_before = core.debug_pattern_cache(True)
    got = {schema_id: _masks(cached, schema, instances) for schema_id, schema, instances in cases}
    hits = core.debug_pattern_cache(True) - hits_before
    assert hits >= len(cases), f"the cache supplied {hits} patterns to {len(cases)} compiles: it was not exercised"
    differing = [schema_id for schema_id in expected if got[schema_id] != expected[schema_id]]
    assert not differing, f"masks differ with the pattern cache on: {differing[:5]}"
    assert sum(isinstance(v, list) and len(v) > 0 for v in expected.values()) > len(cases) // 2
