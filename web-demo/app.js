// The page: talks to the Python worker (worker.js) and renders its answers.
//
// `window.tokensieve` is the page's small API, used by its own buttons and by the browser
// test (tests/test_web_demo.py): `ready` (a promise of the worker's info) and
// `call(method, args)` (a promise of tokensieve._tools.demo.handle's reply).

const worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
const $ = (id) => document.getElementById(id);
const pending = new Map();
let nextId = 1;
let resolveReady, rejectReady;
const ready = new Promise((resolve, reject) => { resolveReady = resolve; rejectReady = reject; });

worker.onmessage = ({ data }) => {
  if (data.type === "progress") setStatus("loading", data.text);
  else if (data.type === "ready") resolveReady(data.info);
  else if (data.type === "failed") rejectReady(new Error(data.error));
  else if (data.type === "reply") {
    const done = pending.get(data.id);
    pending.delete(data.id);
    if (done) done(data.reply);
  }
};
worker.onerror = (event) => rejectReady(new Error(event.message || "the worker failed to start"));

function call(method, args = {}) {
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    worker.postMessage({ id, method, args });
  });
}

window.tokensieve = { ready, call };

function setStatus(state, text) {
  $("status").dataset.state = state;
  $("status").className = "status " + state;
  $("status-text").textContent = text;
}

const fmt = (x, digits = 0) => Number(x).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const escapeText = (s) => s.replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t");

function stats(element, pairs) {
  element.replaceChildren(
    ...pairs.map(([name, value]) => {
      const box = document.createElement("div");
      const dt = document.createElement("dt");
      const dd = document.createElement("dd");
      dt.textContent = name;
      dd.textContent = value;
      box.append(dt, dd);
      return box;
    }),
  );
}

let examples = [];
let compiled = null; // {kind, text} of the grammar that compiled

function grammarArgs() {
  return { kind: $("kind").value, text: $("grammar").value };
}

function showCompileError(error) {
  const where = error.line != null ? `line ${error.line}, column ${error.column}: ` : "";
  const pointer = error.pointer ? ` (at ${error.pointer})` : "";
  const box = $("compile-status");
  box.className = "note bad";
  box.textContent = `✗ ${where}${error.message}${pointer}`;
  box.dataset.line = error.line ?? "";
  box.dataset.column = error.column ?? "";
  if (error.line != null) {
    // Put the caret where the error is.
    const lines = $("grammar").value.split("\n");
    let offset = 0;
    for (let i = 0; i < error.line - 1 && i < lines.length; i++) offset += lines[i].length + 1;
    offset += Math.max(0, (error.column ?? 1) - 1);
    $("grammar").setSelectionRange(offset, offset + 1);
  }
}

// Requests overlap (a kind change compiles, then the button does): only the latest answer of
// each kind is shown.
let compileSeq = 0;
let inspectSeq = 0;

async function compile() {
  const args = grammarArgs();
  const seq = ++compileSeq;
  const box = $("compile-status");
  box.className = "note";
  box.textContent = "Compiling…";
  box.dataset.line = box.dataset.column = "";
  const reply = await call("compile", args);
  if (seq !== compileSeq) return false;
  if (!reply.ok) {
    compiled = null;
    showCompileError(reply.error);
    setButtons();
    return false;
  }
  compiled = args;
  showPython(args.kind);
  box.className = "note ok";
  box.textContent = `✓ compiled in ${fmt(reply.result.compile_ms, 1)} ms`;
  setButtons();
  await inspect();
  return true;
}

const CONSTRUCTORS = {
  json_schema: "Grammar.json_schema(json.loads(SCHEMA), whitespace=r\" ?\")",
  regex: "Grammar.regex(PATTERN)",
  lark: "Grammar.lark(GRAMMAR)",
  gbnf: "Grammar.gbnf(GRAMMAR)",
};

function showPython(kind) {
  const name = kind === "json_schema" ? "SCHEMA" : kind === "regex" ? "PATTERN" : "GRAMMAR";
  $("python-code").textContent = [
    ...(kind === "json_schema" ? ["import json"] : []),
    "from tokensieve import Grammar, Matcher, Tokenizer",
    "",
    `${name} = """..."""  # the text above`,
    "tok = Tokenizer.default()  # the GPT-2 tokenizer bundled in the package",
    `grammar = ${CONSTRUCTORS[kind]}`,
    "m = Matcher(tok, grammar)",
    "for token in tok.encode(text):",
    "    mask = m.compute_bitmask()  # int32 words; what the µs column times",
    "    forced = m.compute_ff_bytes()",
    "    if not m.consume_token(token):",
    "        break",
  ].join("\n");
}

function setButtons() {
  $("sample").disabled = !compiled;
  $("bench").disabled = !compiled;
}

function cell(row, text, className) {
  const td = document.createElement("td");
  if (className) td.className = className;
  td.textContent = text;
  row.append(td);
  return td;
}

async function inspect() {
  if (!compiled) return;
  const seq = ++inspectSeq;
  const reply = await call("inspect", { ...compiled, input: $("input").value });
  if (seq !== inspectSeq) return;
  const body = $("positions").tBodies[0];
  if (!reply.ok) {
    $("inspect-summary").textContent = reply.error.message;
    body.replaceChildren();
    return;
  }
  const { positions, tokens, complete } = reply.result;
  const rows = positions.map((p, i) => {
    const tr = document.createElement("tr");
    if (p.accepted === false) tr.className = "refused";
    cell(tr, String(i), "num");
    const tokenCell = cell(tr, "");
    if (p.token_text != null) {
      const code = document.createElement("code");
      code.textContent = escapeText(p.token_text);
      tokenCell.append(code);
    } else tokenCell.textContent = p.accepting ? "(end: may stop here)" : "(end)";
    cell(tr, p.accepted == null ? "" : p.accepted ? "✓" : "✗", p.accepted == null ? "" : p.accepted ? "yes" : "no");
    cell(tr, fmt(p.allowed), "num");
    const sampleCell = cell(tr, p.sample.map((s) => JSON.stringify(s)).join(" "), "sample");
    sampleCell.title = sampleCell.textContent;
    const forcedCell = cell(tr, "");
    if (p.forced) {
      const code = document.createElement("code");
      code.textContent = escapeText(p.forced).replace(/ /g, "␣");
      code.title = JSON.stringify(p.forced);
      forcedCell.append(code);
    }
    cell(tr, fmt(p.mask_us), "num");
    return tr;
  });
  body.replaceChildren(...rows);
  renderStrip(positions, tokens.length);
  const refused = positions.find((p) => p.accepted === false);
  const summary = $("inspect-summary");
  summary.dataset.complete = String(complete);
  summary.className = refused ? "note bad" : complete ? "note ok" : "note";
  summary.textContent = refused
    ? `✗ refused at token ${positions.indexOf(refused)} (${JSON.stringify(refused.token_text)}, character ${refused.offset})`
    : complete
      ? `✓ all ${tokens.length} tokens accepted, and the text is complete`
      : `✓ all ${tokens.length} tokens accepted so far (the grammar needs more)`;
}

// The typed text as its tokens: accepted (green), refused (red), after the refusal (grey).
function renderStrip(positions, tokenCount) {
  const chips = [];
  positions.forEach((p, i) => {
    if (p.token_text == null) return;
    const chip = document.createElement("span");
    chip.textContent = escapeText(p.token_text);
    chip.title = `token ${i}: ${p.accepted ? "accepted" : "refused"}; ${fmt(p.allowed)} tokens were allowed here`;
    if (!p.accepted) chip.className = "refused";
    chips.push(chip);
  });
  const unread = tokenCount - chips.length;
  if (unread > 0) {
    const rest = document.createElement("span");
    rest.className = "unread";
    rest.textContent = `… ${unread} more token${unread === 1 ? "" : "s"} not checked`;
    chips.push(rest);
  }
  $("token-strip").replaceChildren(...chips);
}

async function sample() {
  if (!compiled) return;
  $("sample").disabled = true;
  const output = $("sample-text");
  output.textContent = "Sampling…";
  output.dataset.tokens = "";
  const reply = await call("sample", {
    ...compiled,
    model: $("model").value,
    seed: Number($("seed").value),
    temperature: Number($("temperature").value),
    max_tokens: Number($("max-tokens").value),
  });
  $("sample").disabled = false;
  if (!reply.ok) {
    output.textContent = reply.error.message;
    return;
  }
  const r = reply.result;
  output.replaceChildren(
    ...r.segments.map((segment) => {
      if (!segment.forced) return document.createTextNode(segment.text);
      const mark = document.createElement("mark");
      mark.className = "forced";
      mark.textContent = segment.text;
      return mark;
    }),
  );
  output.dataset.tokens = JSON.stringify(r.tokens);
  output.dataset.text = r.text;
  const total = r.model_calls + r.forced_tokens;
  stats($("sample-stats"), [
    ["tokens", fmt(total)],
    ["model calls", fmt(r.model_calls)],
    ["calls saved (forced)", `${fmt(r.forced_tokens)} (${fmt((100 * r.forced_tokens) / Math.max(total, 1))}%)`],
    ["mask µs p50", fmt(r.mask_us.p50)],
    ["mask µs avg", fmt(r.mask_us.avg)],
    ["stopped by", r.stop === "eos" ? "end of grammar (EOS)" : r.stop.replace(/_/g, " ")],
  ]);
}

async function bench() {
  $("bench").disabled = true;
  stats($("bench-stats"), [["running", "…"]]);
  const reply = await call("bench", { ...compiled, input: $("input").value, rounds: 5 });
  $("bench").disabled = false;
  if (!reply.ok) {
    stats($("bench-stats"), [["error", reply.error.message]]);
    return;
  }
  const r = reply.result;
  stats($("bench-stats"), [
    ["masks timed", fmt(r.mask_us.count)],
    ["µs / mask p50", fmt(r.mask_us.p50, 1)],
    ["µs / mask avg", fmt(r.mask_us.avg, 1)],
    ["µs / mask max", fmt(r.mask_us.max)],
    ["new matcher ms p50", fmt(r.matcher_new_ms.p50, 2)],
  ]);
  $("bench-stats").dataset.result = JSON.stringify(r);
}

function loadExample(index) {
  const example = examples[index];
  $("kind").value = example.kind;
  $("grammar").value = example.text;
  $("input").value = example.input;
  $("sample-text").replaceChildren();
  $("sample-stats").replaceChildren();
  $("bench-stats").replaceChildren();
  return compile();
}

let inspectTimer = 0;
$("input").addEventListener("input", () => {
  clearTimeout(inspectTimer);
  inspectTimer = setTimeout(inspect, 150);
});
$("grammar").addEventListener("input", () => {
  compiled = null;
  setButtons();
  $("compile-status").className = "note";
  $("compile-status").textContent = "Edited: press Compile (or Ctrl+Enter).";
});
$("grammar").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) compile();
});
$("kind").addEventListener("change", () => compile());
$("compile").addEventListener("click", () => compile());
$("sample").addEventListener("click", () => sample());
$("bench").addEventListener("click", () => bench());
$("example").addEventListener("change", (event) => loadExample(Number(event.target.value)));

ready.then(
  async (info) => {
    const reply = await call("examples");
    examples = reply.result.examples;
    $("example").replaceChildren(
      ...examples.map((example, i) => {
        const option = document.createElement("option");
        option.value = String(i);
        option.textContent = example.name;
        return option;
      }),
    );
    $("compile").disabled = false;
    await loadExample(0);
    setStatus(
      "ready",
      `Ready · tokensieve ${info.tokensieve} · Python ${info.python} · GPT-2 tokenizer (${fmt(info.vocab_size)} tokens)`,
    );
    $("footer").textContent =
      `Pyodide started in ${fmt(info.pyodide_ms)} ms; the package, the tokenizer and its trie in the core loaded in ` +
      `${fmt(info.package_ms)} ms (the trie ${fmt(info.trie_ms)} ms). ` +
      `Timer resolution: ${info.isolated ? "fine (cross-origin isolated page)" : "coarse (page not cross-origin isolated: µs figures are rounded)"}.`;
  },
  (error) => setStatus("failed", "Failed to start: " + error.message),
);
