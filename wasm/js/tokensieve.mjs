// tokensieve's core from plain JavaScript: an ES module over the ABI (wasm/ABI.md), no Pyodide.
//
// Runs in Node (>= 18) and in browsers. It is a second host beside the Python package, and the
// proof that ABI.md is enough to write one: everything here comes from that page.
//
//   import { loadCore, regexIR } from "./tokensieve.mjs";
//   const core = await loadCore(new URL("tokensieve.wasm", import.meta.url));   // or a path, bytes
//   const tok = core.tokenizer(tokenByteStrings, { eosIds: [50256], specialIds: [50256] });
//   const grammar = core.grammar(regexIR("[0-9]{1,3}"));                        // or IR bytes
//   const m = core.matcher(tok, grammar);
//   const mask = m.fillBitmask();          // Uint32Array, bit t%32 of word t>>5 = token t allowed
//   m.consumeToken(token); m.rollback(1); const copy = m.fork(); m.forcedBytes();
//
// Shape:
// - One `Core` is one instance with its linear memory; its objects (tokenizers, grammars,
//   matchers) hold handles into it. Calls are synchronous; one instance serves one thread.
// - Inputs go into memory the core allocated (`ts_alloc`), one scratch buffer reused by all
//   calls; outputs come back in buffers the core allocated too. `memory.buffer` is detached
//   when memory grows, so every access takes a fresh view after the call.
// - A negative status becomes a `TokensieveError` whose fields are read from the core
//   (`ts_error_*`), never parsed from the message. A trap (`WebAssembly.RuntimeError`) poisons
//   the core: later calls throw without entering it, as ABI.md asks.
// - `fillBitmask(out)` writes into the caller's array; `maskView()` is the zero-copy path: a
//   view of the core's own mask buffer, valid until the next call on the core.

export const ABI_VERSION = 9;
const IR_MAGIC = 0x31475354;
const FORCED_CAPACITY = 1024; // the core computes at most this many forced bytes per call
const utf8 = new TextEncoder();
const utf8Decode = new TextDecoder();

export class TokensieveError extends Error {
  /** @param {string} message @param {object} fields status, statusName, position, lexeme, limit */
  constructor(message, fields = {}) {
    super(message);
    this.name = "TokensieveError";
    Object.assign(this, fields);
  }
}

/** A regular expression as grammar IR bytes: `S → L` with one regex lexeme (ABI.md, "Grammar IR"). */
export function regexIR(pattern, { dotAll = false, ignoreCase = false } = {}) {
  const text = utf8.encode(pattern);
  const padded = (text.length + 3) & ~3;
  const words = new Uint32Array(6 + 3 + padded / 4 + 3);
  let i = 0;
  // magic, lexeme_count, nonterminal_count, rule_count, start, flags
  words.set([IR_MAGIC, 1, 1, 1, 0, 0], 0);
  i = 6;
  // lexeme 0: kind 0 (regex), flags, n bytes, then the bytes padded to whole words
  words[i++] = 0;
  words[i++] = (dotAll ? 4 : 0) | (ignoreCase ? 8 : 0);
  words[i++] = text.length;
  new Uint8Array(words.buffer, i * 4, text.length).set(text);
  i += padded / 4;
  // rule 0: lhs 0, one symbol: lexeme 0
  words.set([0, 1, 0], i);
  return new Uint8Array(words.buffer);
}

async function moduleBytes(source) {
  if (source instanceof WebAssembly.Module) return source;
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return source;
  if (typeof Response !== "undefined" && source instanceof Response) return new Uint8Array(await source.arrayBuffer());
  const isNode = typeof process !== "undefined" && process.versions?.node;
  const text = String(source);
  if (isNode && (!/^[a-z]+:/i.test(text) || text.startsWith("file:"))) {
    const { readFile } = await import("node:fs/promises");
    return readFile(text.startsWith("file:") ? new URL(text) : text);
  }
  const response = await fetch(source);
  if (!response.ok) throw new TokensieveError(`cannot fetch the core from ${text}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

/**
 * Load the core: `source` is a path or URL (Node: a file path or file: URL), bytes, a
 * `Response` or a compiled `WebAssembly.Module`. Resolves to a `Core`.
 */
export async function loadCore(source) {
  const bytes = await moduleBytes(source);
  const module = bytes instanceof WebAssembly.Module ? bytes : await WebAssembly.compile(bytes);
  if (WebAssembly.Module.imports(module).length) {
    throw new TokensieveError("the module has imports; the tokensieve core is freestanding (no imports)");
  }
  const instance = await WebAssembly.instantiate(module, {});
  return new Core(instance);
}

export class Core {
  constructor(instance) {
    this.exports = instance.exports;
    this.memory = instance.exports.memory;
    this.poisoned = null;
    const version = this.exports.ts_abi_version();
    if (version !== ABI_VERSION) {
      throw new TokensieveError(`the core speaks ABI version ${version}; this binding speaks ${ABI_VERSION}`);
    }
    this.manifest = JSON.parse(this.readText(this.exports.ts_manifest_ptr(), this.exports.ts_manifest_len()));
    this.statusName = new Map(Object.entries(this.manifest.status).map(([name, code]) => [code, name]));
    this.limitName = new Map(Object.entries(this.manifest.limit_kind).map(([name, code]) => [code, name]));
    this.out = this.alloc(16); // out-values (handles, lengths)
    this.scratchPtr = 0;
    this.scratchSize = 0;
    this.forcedPtr = this.alloc(FORCED_CAPACITY);
    this.maskBuffers = new Map(); // words -> ptr
  }

  // -- raw calls ---------------------------------------------------------------------------

  /** Call export `name`; a trap poisons the core. Returns the raw i32. */
  raw(name, ...args) {
    if (this.poisoned) throw new TokensieveError(`the core is poisoned by an earlier trap (${this.poisoned}); load a new one`);
    try {
      return this.exports[name](...args);
    } catch (error) {
      this.poisoned = `${name}: ${error}`;
      throw new TokensieveError(`the core trapped in ${name} (${error}); it is now unusable`, { trap: true });
    }
  }

  /** Call export `name` and throw on a negative status; returns the non-negative answer. */
  call(name, ...args) {
    const status = this.raw(name, ...args);
    if (status < 0) this.fail(status, name);
    return status;
  }

  fail(status, what) {
    const e = this.exports;
    const message = this.readText(e.ts_error_message_ptr(), e.ts_error_message_len());
    const statusName = this.statusName.get(status) ?? "internal";
    const position = e.ts_error_position();
    const lexeme = e.ts_error_lexeme();
    const limit = this.limitName.get(e.ts_error_limit()) ?? null;
    throw new TokensieveError(`${what}: ${message}`, {
      status,
      statusName,
      position: position >= 0 ? position : null,
      lexeme: lexeme >= 0 ? lexeme : null,
      limit: statusName === "limit_exceeded" ? limit : null,
    });
  }

  /** Call an export whose last argument is an out-pointer to an i32; returns that value. */
  callOut(name, ...args) {
    this.call(name, ...args, this.out);
    return this.i32(this.out);
  }

  // -- memory ------------------------------------------------------------------------------

  bytes(ptr, length) {
    return new Uint8Array(this.memory.buffer, ptr >>> 0, length);
  }

  i32(ptr) {
    return new DataView(this.memory.buffer).getInt32(ptr >>> 0, true);
  }

  readText(ptr, length) {
    return utf8Decode.decode(this.bytes(ptr, length).slice());
  }

  alloc(size) {
    const ptr = this.raw("ts_alloc", size) >>> 0;
    if (ptr === 0) throw new TokensieveError(`the core is out of memory (allocating ${size} bytes)`, { statusName: "out_of_memory" });
    return ptr;
  }

  free(ptr, size) {
    if (!this.poisoned) this.call("ts_free", ptr, size);
  }

  /** Copy `data` (bytes) into the reusable scratch buffer; returns its pointer. */
  put(data) {
    if (data.byteLength > this.scratchSize) {
      if (this.scratchPtr) this.free(this.scratchPtr, this.scratchSize);
      this.scratchPtr = 0;
      const size = Math.max(256, 2 ** Math.ceil(Math.log2(data.byteLength)));
      this.scratchPtr = this.alloc(size);
      this.scratchSize = size;
    }
    const view = data instanceof Uint8Array ? data : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    this.bytes(this.scratchPtr, view.length).set(view);
    return this.scratchPtr;
  }

  putIds(ids) {
    return this.put(Uint32Array.from(ids));
  }

  maskBuffer(words) {
    let ptr = this.maskBuffers.get(words);
    if (ptr === undefined) {
      ptr = this.alloc(4 * words);
      this.maskBuffers.set(words, ptr);
    }
    return ptr;
  }

  /** Copy `data` into a fresh core buffer (for inputs that outlive the scratch buffer's next use). */
  withBuffer(data, use) {
    const size = Math.max(data.byteLength, 1);
    const ptr = this.alloc(size);
    try {
      this.bytes(ptr, data.byteLength).set(data instanceof Uint8Array ? data : new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      return use(ptr);
    } finally {
      this.free(ptr, size);
    }
  }

  // -- objects -----------------------------------------------------------------------------

  /**
   * A tokenizer from token byte strings (`tokens[i]` is id i's bytes, a Uint8Array or string).
   * Options: `eosIds` (ids that end the output), `specialIds` (never matched by grammar text;
   * EOS ids usually are special too), `vocabSize` (mask width; ids past `tokens.length` are
   * unused and never allowed).
   */
  tokenizer(tokens, { eosIds = [], specialIds = [], vocabSize = tokens.length } = {}) {
    if (vocabSize < tokens.length) throw new TokensieveError(`vocabSize ${vocabSize} is below the ${tokens.length} tokens`);
    const parts = tokens.map((t) => (typeof t === "string" ? utf8.encode(t) : t));
    const offsets = new Uint32Array(vocabSize + 1);
    let total = 0;
    for (let i = 0; i < parts.length; i++) {
      total += parts[i].length;
      offsets[i + 1] = total;
    }
    offsets.fill(total, parts.length + 1);
    const blob = new Uint8Array(total);
    parts.forEach((part, i) => blob.set(part, offsets[i]));
    const kinds = new Uint8Array(vocabSize).fill(2, parts.length);
    for (const id of specialIds) kinds[id] = 1;
    const eos = Uint32Array.from(eosIds);
    const handle = this.withBuffer(blob, (blobPtr) =>
      this.withBuffer(new Uint8Array(offsets.buffer), (offsetsPtr) =>
        this.withBuffer(kinds, (kindsPtr) =>
          this.withBuffer(new Uint8Array(eos.buffer), (eosPtr) =>
            this.callOut("ts_tokenizer_new", blobPtr, blob.length, offsetsPtr, kindsPtr, vocabSize, eosPtr, eos.length),
          ),
        ),
      ),
    );
    return new Tokenizer(this, handle, vocabSize, [...eosIds]);
  }

  /**
   * A grammar from IR bytes (ABI.md, "Grammar IR"; `regexIR(pattern)` builds the simplest)
   * and optional limit values in the manifest's `limit_field` order (0 keeps a default).
   */
  grammar(ir, limits = []) {
    const bytes = ir instanceof Uint8Array ? ir : new Uint8Array(ir.buffer ?? ir, ir.byteOffset ?? 0, ir.byteLength);
    if (bytes.length % 4) throw new TokensieveError("grammar IR must be whole u32 words");
    const limitWords = Uint32Array.from(limits);
    const handle = this.withBuffer(bytes, (irPtr) =>
      this.withBuffer(new Uint8Array(limitWords.buffer), (limitsPtr) =>
        this.callOut("ts_grammar_new_ir", irPtr, bytes.length / 4, limitsPtr, limitWords.length),
      ),
    );
    return new Grammar(this, handle);
  }

  /** A matcher at the start of `grammar` over `tokenizer`. */
  matcher(tokenizer, grammar) {
    const handle = this.callOut("ts_matcher_new", tokenizer.handle, grammar.handle);
    return new Matcher(this, handle, tokenizer);
  }

  liveKiB() {
    return this.call("ts_debug_live_kib");
  }
}

class Handle {
  constructor(core, handle, freeExport) {
    this.core = core;
    this.handle = handle;
    this.freeExport = freeExport;
  }

  /** Release the core object (tokenizers and grammars stay alive while matchers use them). */
  free() {
    if (this.handle && !this.core.poisoned) this.core.call(this.freeExport, this.handle);
    this.handle = 0;
  }
}

export class Tokenizer extends Handle {
  constructor(core, handle, vocabSize, eosIds) {
    super(core, handle, "ts_tokenizer_free");
    this.vocabSize = vocabSize;
    this.maskWords = Math.ceil(vocabSize / 32);
    this.eosIds = eosIds;
  }

  nodeCount() {
    return this.core.call("ts_tokenizer_node_count", this.handle);
  }
}

export class Grammar extends Handle {
  constructor(core, handle) {
    super(core, handle, "ts_grammar_free");
  }
}

export class Matcher extends Handle {
  constructor(core, handle, tokenizer) {
    super(core, handle, "ts_matcher_free");
    this.tokenizer = tokenizer;
    this.words = tokenizer.maskWords;
  }

  /** Compute the mask into the core's buffer; returns a view of it, valid until the next call. */
  maskView() {
    const core = this.core;
    const ptr = core.maskBuffer(this.words);
    core.call("ts_matcher_fill_bitmask", this.handle, ptr, this.words);
    return new Uint32Array(core.memory.buffer, ptr, this.words);
  }

  /** The allowed tokens as a bitmask, copied into `out` (a new Uint32Array by default). */
  fillBitmask(out = new Uint32Array(this.words)) {
    out.set(this.maskView());
    return out;
  }

  /** The allowed token ids (a convenience over the mask). */
  allowedTokens() {
    const mask = this.maskView();
    const ids = [];
    for (let w = 0; w < mask.length; w++) {
      for (let bits = mask[w]; bits; bits &= bits - 1) ids.push(w * 32 + (31 - Math.clz32(bits & -bits)));
    }
    return ids;
  }

  /** Consume one token; false (state unchanged) when the grammar refuses it. */
  consumeToken(token) {
    return this.core.call("ts_matcher_consume_token", this.handle, token) === 1;
  }

  /** Consume all of `ids` or none; returns the length of the valid prefix. */
  consumeTokens(ids) {
    const core = this.core;
    return core.call("ts_matcher_consume_tokens", this.handle, core.putIds(ids), ids.length);
  }

  /** The length of the prefix of `ids` the grammar accepts; the state does not change. */
  validateTokens(ids) {
    const core = this.core;
    return core.call("ts_matcher_validate_tokens", this.handle, core.putIds(ids), ids.length);
  }

  /** Consume `token` and compute the next mask in one call: the view, or null when refused. */
  consumeAndMask(token) {
    const core = this.core;
    const ptr = core.maskBuffer(this.words);
    if (core.call("ts_matcher_consume_and_fill", this.handle, token, ptr, this.words) !== 1) return null;
    return new Uint32Array(core.memory.buffer, ptr, this.words);
  }

  /** Undo the last `count` tokens (EOS counts as one); clears a failed state. */
  rollback(count) {
    this.core.call("ts_matcher_rollback", this.handle, count);
  }

  reset() {
    this.core.call("ts_matcher_reset", this.handle);
  }

  /** An independent copy at the same position (in the same core). */
  fork() {
    return new Matcher(this.core, this.core.callOut("ts_matcher_fork", this.handle), this.tokenizer);
  }

  tokenCount() {
    return this.core.call("ts_matcher_token_count", this.handle);
  }

  isAccepting() {
    return this.core.call("ts_matcher_is_accepting", this.handle) === 1;
  }

  isStopped() {
    return this.core.call("ts_matcher_is_stopped", this.handle) === 1;
  }

  /** The bytes the grammar forces next (a copy; empty when there is a choice). */
  forcedBytes() {
    const core = this.core;
    const n = core.call("ts_matcher_compute_ff_bytes", this.handle, core.forcedPtr, FORCED_CAPACITY);
    return core.bytes(core.forcedPtr, n).slice();
  }
}
