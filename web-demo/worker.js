// The page's Python: Pyodide and the tokensieve package, in a module Web Worker.
//
// Why a worker: browsers refuse synchronous `new WebAssembly.Module` of large modules on the
// main thread, and the package compiles its core synchronously (pyodide_backend.py); a
// worker also keeps the page responsive while a grammar compiles or a sample runs.
//
// Protocol (postMessage):
//   worker → page  {type: "progress", text}            while starting
//                  {type: "ready", info}                once, when requests can be served
//                  {type: "failed", error}              starting failed
//                  {type: "reply", id, reply}           reply = tokensieve._tools.demo.handle's JSON,
//                                                       parsed: {ok, result} or {ok: false, error}
//   page → worker  {id, method, args}                   methods of tokensieve._tools.demo.handle, and
//                                                       "put_file" {path, base64} into Pyodide's FS
//
// Everything is served by `tokensieve web` from one folder: ./pyodide/ (the pinned npm
// package) and ./wheels/ (the package's pure wheel). Nothing comes from the network.

import { loadPyodide } from "./pyodide/pyodide.mjs";

const say = (message) => self.postMessage(message);

async function start() {
  const t0 = performance.now();
  say({ type: "progress", text: "Starting Python (Pyodide)…" });
  const pyodide = await loadPyodide({ indexURL: new URL("./pyodide/", import.meta.url).href });
  const pyodideMs = performance.now() - t0;

  say({ type: "progress", text: "Installing the tokensieve wheel…" });
  const name = (await (await fetch("./wheels/latest.txt")).text()).trim();
  const response = await fetch("./wheels/" + name);
  if (!response.ok) throw new Error(`cannot fetch the wheel ${name}: HTTP ${response.status}`);
  const wheel = await response.arrayBuffer();
  const sitePackages = pyodide.runPython("import sysconfig; sysconfig.get_paths()['purelib']");
  pyodide.unpackArchive(wheel, "zip", { extractDir: sitePackages });

  say({ type: "progress", text: "Loading the GPT-2 tokenizer and the WebAssembly core…" });
  const demo = pyodide.pyimport("tokensieve._tools.demo");
  const t1 = performance.now();
  const info = JSON.parse(
    pyodide.runPython(`
import json, sys, tokensieve
from tokensieve._tools import demo as _demo
import time
tok = _demo.tokenizer()
_start = time.perf_counter()
tokensieve.Matcher(tok, tokensieve.Grammar.regex("x"))   # builds the token trie in the core now
json.dumps({"tokensieve": tokensieve.__version__, "python": sys.version.split()[0],
            "vocab_size": tok.vocab_size, "wheel": ${JSON.stringify(name)},
            "trie_ms": (time.perf_counter() - _start) * 1e3})
`),
  );
  info.pyodide_ms = pyodideMs;
  info.package_ms = performance.now() - t1;
  info.isolated = self.crossOriginIsolated === true;
  return { pyodide, handle: demo.handle, info };
}

const started = start();
started.then(
  ({ info }) => say({ type: "ready", info }),
  (error) => say({ type: "failed", error: String(error && (error.stack || error.message || error)) }),
);

self.onmessage = async ({ data }) => {
  const { id, method, args } = data;
  let reply;
  try {
    const { handle, pyodide } = await started;
    if (method === "put_file") {
      // A file for Python (benchmarks: another tokenizer): {path, base64}.
      const bytes = Uint8Array.from(atob(args.base64), (c) => c.charCodeAt(0));
      pyodide.FS.mkdirTree(args.path.slice(0, args.path.lastIndexOf("/")) || "/");
      pyodide.FS.writeFile(args.path, bytes);
      reply = { ok: true, result: { bytes: bytes.length } };
    } else {
      reply = JSON.parse(handle(method, JSON.stringify(args ?? {})));
    }
  } catch (error) {
    reply = { ok: false, error: { message: String(error && (error.message || error)), line: null, column: null } };
  }
  say({ type: "reply", id, reply });
};
