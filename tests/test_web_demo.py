"""The web demo in a real browser: `tokensieve web` serves it, headless Chromium drives it.

Checks against oracles outside the page: the sampled text validates under `jsonschema`; the
masks the page computes (Pyodide, Chromium's WebAssembly engine) equal the masks wasmtime
computes in this process for the same prefixes; compile errors land on the line and column
Python's `json` and the regex front-end name.

Needs Debian's `chromium` (`apt-get install -y chromium`; Playwright's own browser download
does not work offline) and the Python package `playwright` (in the `test` extra). When either
is missing the test FAILS: CI must not skip the browser quietly.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import PYBIND_DIR

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
READY_TIMEOUT_MS = 240_000
STEP_TIMEOUT_MS = 120_000

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z][a-z]{1,10}$"},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "email": {"type": "string", "pattern": "^[a-z]{2,8}@example\\.(com|org)$"},
        "role": {"enum": ["admin", "editor", "viewer"]},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "email", "role", "active"],
    "additionalProperties": False,
}
INPUT = '{"name": "Ada", "age": 36, "email": "ada@example.org", "role": "admin", "active": true}'


def _chromium() -> str:
    explicit = os.environ.get("TOKENSIEVE_CHROMIUM")
    for candidate in ([explicit] if explicit else []) + [shutil.which(n) for n in CHROMIUM_CANDIDATES]:
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.fail(
        "no Chromium found (tried $TOKENSIEVE_CHROMIUM, chromium, chromium-browser, google-chrome). "
        "Install Debian's package: `apt-get install -y chromium` (.ci/run does this when it runs as "
        "root). This test never skips.",
        pytrace=False,
    )


@pytest.fixture(scope="module")
def demo_url(pyodide_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start `tokensieve web --port 0` on a fresh site folder; yield its URL."""
    site = tmp_path_factory.mktemp("site")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PYBIND_DIR), os.environ.get("PYTHONPATH", "")]))
    env["TOKENSIEVE_PYODIDE_DIR"] = str(pyodide_dist)
    server = subprocess.Popen(
        [sys.executable, "-m", "tokensieve", "web", "--port", "0", "--out", str(site)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        seen = []
        for line in server.stdout:  # building the core or installing Pyodide may print first
            seen.append(line)
            if "http://" in line:
                break
        else:
            server.kill()
            pytest.fail(f"`tokensieve web` did not start: {''.join(seen)}{server.stderr.read() if server.stderr else ''}")
        yield line.strip().rsplit(" ", 1)[-1]
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture(scope="module")
def page(demo_url: str) -> Iterator[object]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the Python package `playwright` is missing: pip install -e '.[test]'", pytrace=False)
    executable = _chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            started = time.perf_counter()
            page.goto(demo_url)
            page.wait_for_selector('#status[data-state="ready"], #status[data-state="failed"]', timeout=READY_TIMEOUT_MS)
            assert page.get_attribute("#status", "data-state") == "ready", page.inner_text("#status")
            page.ready_s = time.perf_counter() - started  # type: ignore[attr-defined]
            page.errors = errors  # type: ignore[attr-defined]
            yield page
        finally:
            browser.close()


def _compile(page: object, kind: str, text: str) -> None:
    # The text first: a change of kind compiles at once, so it compiles this text too (twice
    # under -n auto, the other order showed an error placed in a text that was not this one).
    page.fill("#grammar", text)  # type: ignore[attr-defined]
    page.select_option("#kind", kind)  # type: ignore[attr-defined]
    page.click("#compile")  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "!['Compiling…', ''].includes(document.getElementById('compile-status').textContent)"
        " && !document.getElementById('compile-status').textContent.startsWith('Edited')",
        timeout=STEP_TIMEOUT_MS,
    )


def _popcount(mask_b64: str) -> int:
    return sum(bin(byte).count("1") for byte in base64.b64decode(mask_b64))


def test_page_samples_valid_json_and_its_masks_equal_wasmtime(page, tmp_path):
    import jsonschema
    from tokensieve._tools import demo as _demo

    schema_text = json.dumps(SCHEMA, indent=2)
    _compile(page, "json_schema", schema_text)
    assert page.inner_text("#compile-status").startswith("✓"), page.inner_text("#compile-status")

    # Typed text: the page's per-position allowed counts equal wasmtime's mask popcounts.
    grammar = _demo.compile_grammar("json_schema", schema_text)
    tokens = _demo.tokenizer().encode(INPUT)
    page.fill("#input", INPUT)
    page.wait_for_function(
        f"document.getElementById('inspect-summary').textContent.includes('all {len(tokens)} tokens accepted, and the text is complete')",
        timeout=STEP_TIMEOUT_MS,
    )
    rows = page.eval_on_selector_all(
        "#positions tbody tr", "rows => rows.map(r => r.children[3].textContent.replace(/,/g, ''))"
    )
    wasmtime_masks = _demo.masks_along(grammar, tokens)
    assert [int(n) for n in rows] == [_popcount(m) for m in wasmtime_masks]

    # Sample twice (two models), validate, and compare every mask along the sample.
    for model, seed in (("unigram", 3), ("random", 11)):
        page.select_option("#model", model)
        page.fill("#seed", str(seed))
        page.fill("#max-tokens", "200")
        page.evaluate("document.getElementById('sample-text').dataset.tokens = ''")
        page.click("#sample")
        page.wait_for_function("document.getElementById('sample-text').dataset.tokens", timeout=STEP_TIMEOUT_MS)
        text = page.get_attribute("#sample-text", "data-text")
        shown = page.inner_text("#sample-text")
        sampled = json.loads(page.get_attribute("#sample-text", "data-tokens"))
        assert shown == text
        assert "end of grammar" in page.inner_text("#sample-stats")
        jsonschema.validate(json.loads(text), SCHEMA)
        assert page.locator("#sample-text mark.forced").count() > 0  # keys are forced
        page_masks = page.evaluate(
            "args => tokensieve.call('masks', args)", {"kind": "json_schema", "text": schema_text, "tokens": sampled}
        )
        assert page_masks["ok"], page_masks
        assert page_masks["result"] == _demo.masks_along(grammar, sampled)
    page.screenshot(path=str(tmp_path / "web_demo.png"), full_page=True)
    assert (tmp_path / "web_demo.png").stat().st_size > 10_000
    assert page.errors == []


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("json_schema", '{\n  "type": "object",\n  "properties": {"a": {"type": }}\n}'),
        ("regex", "(Alice|Bob) on 20[0-9]{2}-(0[1-9]|1[0-2]"),
        ("gbnf", 'root ::= "a" item\nitem ::= "b" | missing\n'),
    ],
)
def test_page_shows_compile_errors_with_line_and_column(page, kind, text):
    from tokensieve._tools import demo as _demo

    _compile(page, kind, text)
    status = page.locator("#compile-status")
    assert status.inner_text().startswith("✗")
    if kind == "json_schema":
        with pytest.raises(json.JSONDecodeError) as caught:
            json.loads(text)
        expected = (caught.value.lineno, caught.value.colno)
    else:
        with pytest.raises(Exception) as caught:
            _demo.compile_grammar(kind, text)
        expected = (caught.value.line, caught.value.column)
    assert expected[0] is not None
    shown = (int(status.get_attribute("data-line")), int(status.get_attribute("data-column")))
    assert shown == expected, (status.inner_text(), page.input_value("#kind"), page.input_value("#grammar"))
    assert f"line {expected[0]}, column {expected[1]}" in status.inner_text()


def test_plain_js_host_in_the_browser_equals_wasmtime(page):
    """wasm/js/tokensieve.mjs in Chromium (no Pyodide): a tokenizer from byte strings, a regex
    grammar from its text, masks along a text, a fork and a rollback — equal to wasmtime's."""
    from tokensieve import Grammar, Matcher, Tokenizer

    tokens = [bytes([b]) for b in range(32, 127)] + [b"20", b"2026", b"-0", b"-1", b":3", b"<eos>"]
    eos = len(tokens) - 1
    pattern = r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9] ([01][0-9]|2[0-3]):[0-5][0-9]"
    text = "2026-11-25 08:30"
    tok = Tokenizer.from_token_bytes(tokens, eos_token_ids=[eos])
    ids = tok.encode(text)
    m = Matcher(tok, Grammar.regex(pattern))
    want = [base64.b64encode(m.compute_bitmask().tobytes()).decode()]
    for t in ids:
        assert m.consume_token(t)
        want.append(base64.b64encode(m.compute_bitmask().tobytes()).decode())
    got = page.evaluate(
        """async ({tokens, eos, pattern, ids}) => {
            const ts = await import("./js/tokensieve.mjs");
            const core = await ts.loadCore("./js/tokensieve.wasm");
            const tok = core.tokenizer(tokens.map((t) => Uint8Array.from(atob(t), (c) => c.charCodeAt(0))),
                                       {eosIds: [eos], specialIds: [eos]});
            const m = core.matcher(tok, core.grammar(ts.regexIR(pattern)));
            const b64 = (mask) => btoa(String.fromCharCode(...new Uint8Array(mask.buffer, mask.byteOffset, mask.byteLength)));
            const masks = [b64(m.fillBitmask())];
            for (const t of ids) { if (!m.consumeToken(t)) break; masks.push(b64(m.fillBitmask())); }
            const fork = m.fork();
            fork.rollback(ids.length);
            return {masks, forkedBack: b64(fork.fillBitmask()), accepting: m.isAccepting()};
        }""",
        {"tokens": [base64.b64encode(t).decode() for t in tokens], "eos": eos, "pattern": pattern, "ids": ids},
    )
    assert got["masks"] == want
    assert got["forkedBack"] == want[0]
    assert got["accepting"] is True


def test_page_places_schema_errors_named_by_pointer(page):
    """A schema that is JSON but invalid is reported by JSON pointer; the page also gives the
    line and column of the value the pointer names (found here by plain text search)."""
    text = '{\n  "type": "object",\n  "properties": {\n    "when": {"type": "date"}\n  }\n}'
    _compile(page, "json_schema", text)
    status = page.locator("#compile-status")
    assert status.inner_text().startswith("✗")
    offset = text.index('"date"')
    line = text.count("\n", 0, offset) + 1
    column = offset - text.rfind("\n", 0, offset)
    assert (int(status.get_attribute("data-line")), int(status.get_attribute("data-column"))) == (line, column)
    assert "/properties/when/type" in status.inner_text()
