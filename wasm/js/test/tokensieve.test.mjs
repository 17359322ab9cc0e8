// `node --test` tests of wasm/js/tokensieve.mjs against the Python package's answers.
//
// tests/test_js_host.py writes the cases (token byte strings, grammar IR or regex text, token
// sequences, and the masks, forced bytes and accepting flags the Python package computed
// under wasmtime) and runs this file with
//   TOKENSIEVE_JS_CASES=<cases.json> TOKENSIEVE_WASM=<tokensieve.wasm> node --test wasm/js/test/
// Everything here is built from scratch through the ABI: the tokenizer from byte strings, the
// grammar from IR bytes or from regex text (regexIR), the matcher and its forks.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { ABI_VERSION, loadCore, regexIR, TokensieveError } from "../tokensieve.mjs";

const casesPath = process.env.TOKENSIEVE_JS_CASES;
const wasmPath = process.env.TOKENSIEVE_WASM;
if (!casesPath || !wasmPath) {
  throw new Error("set TOKENSIEVE_JS_CASES and TOKENSIEVE_WASM (tests/test_js_host.py does), or run pytest tests/test_js_host.py");
}
const data = JSON.parse(readFileSync(casesPath, "utf8"));
const b64 = (text) => new Uint8Array(Buffer.from(text, "base64"));
const maskB64 = (mask) => Buffer.from(mask.buffer, mask.byteOffset, mask.byteLength).toString("base64");

const core = await loadCore(wasmPath);
const tokenizers = new Map();
function tokenizerFor(name) {
  if (!tokenizers.has(name)) {
    const spec = data.tokenizers[name];
    tokenizers.set(
      name,
      core.tokenizer(spec.tokens.map(b64), { eosIds: spec.eos, specialIds: spec.special, vocabSize: spec.vocab_size }),
    );
  }
  return tokenizers.get(name);
}

function grammarFor(c) {
  if (c.regex !== undefined) {
    const ir = regexIR(c.regex);
    assert.equal(Buffer.from(ir).toString("base64"), c.ir, "regexIR builds the bytes the Python front-end builds");
    return core.grammar(ir, c.limits);
  }
  return core.grammar(b64(c.ir), c.limits);
}

for (const c of data.cases) {
  test(`${c.name}: masks, forced bytes and accepting along the tokens`, () => {
    const tok = tokenizerFor(c.tokenizer);
    const m = core.matcher(tok, grammarFor(c));
    const masks = [maskB64(m.fillBitmask())];
    const forced = [Buffer.from(m.forcedBytes()).toString("base64")];
    const accepting = [m.isAccepting()];
    for (const t of c.tokens) {
      if (!m.consumeToken(t)) break;
      masks.push(maskB64(m.fillBitmask()));
      forced.push(Buffer.from(m.forcedBytes()).toString("base64"));
      accepting.push(m.isAccepting());
    }
    assert.equal(masks.length, c.masks.length, "accepted prefix length");
    masks.forEach((mask, i) => assert.equal(mask, c.masks[i], `mask ${i}`));
    assert.deepEqual(forced, c.forced);
    assert.deepEqual(accepting, c.accepting);
    assert.equal(m.tokenCount(), c.masks.length - 1);
    m.free();
  });

  test(`${c.name}: one call per step (consume and fill) gives the same masks`, () => {
    const m = core.matcher(tokenizerFor(c.tokenizer), grammarFor(c));
    const n = c.masks.length - 1;
    for (let i = 0; i < n; i++) {
      const view = m.consumeAndMask(c.tokens[i]);
      assert.ok(view, `token ${i} accepted`);
      assert.equal(maskB64(view), c.masks[i + 1], `mask ${i + 1}`);
    }
    if (c.refused !== null) assert.equal(m.consumeAndMask(c.refused), null, "the refused token leaves no mask");
  });

  test(`${c.name}: forks are independent; rollback returns to earlier masks`, () => {
    const m = core.matcher(tokenizerFor(c.tokenizer), grammarFor(c));
    const n = c.masks.length - 1;
    const half = n >> 1;
    assert.equal(m.consumeTokens(c.tokens.slice(0, half)), half);
    const fork = m.fork();
    assert.equal(fork.consumeTokens(c.tokens.slice(half, n)), n - half);
    assert.equal(maskB64(fork.fillBitmask()), c.masks[n], "the fork went ahead");
    assert.equal(maskB64(m.fillBitmask()), c.masks[half], "the original did not move");
    fork.rollback(n - half);
    assert.equal(maskB64(fork.fillBitmask()), c.masks[half], "rolled back to the fork point");
    m.rollback(half);
    assert.equal(maskB64(m.fillBitmask()), c.masks[0], "rolled back to the start");
    assert.equal(m.validateTokens(c.tokens.slice(0, n)), n);
    m.reset();
    assert.equal(m.tokenCount(), 0);
    fork.free();
    m.free();
  });
}

test("errors come back as TokensieveError with the core's fields", () => {
  const tok = tokenizerFor(data.cases[0].tokenizer);
  assert.throws(
    () => core.grammar(regexIR("ab(c")),
    (error) => error instanceof TokensieveError && error.statusName === "grammar_error" && error.position === 2,
  );
  const m = core.matcher(tok, core.grammar(regexIR("[0-9]+")));
  assert.throws(
    () => m.consumeToken(tok.vocabSize + 5),
    (error) => error instanceof TokensieveError && error.statusName === "invalid_token",
  );
  m.free();
  assert.throws(() => m.consumeToken(0), (error) => error.statusName === "invalid_handle", "a freed handle is a status, not a trap");
  assert.throws(() => core.grammar(new Uint8Array(8)), (error) => error.statusName === "invalid_argument");
});

test("a trap poisons the core; a new core works", async () => {
  const other = await loadCore(wasmPath);
  assert.throws(() => other.raw("ts_debug_trap"), (error) => error.trap === true);
  assert.throws(() => other.raw("ts_abi_version"), /poisoned/);
  assert.equal(core.raw("ts_abi_version"), ABI_VERSION);
});
