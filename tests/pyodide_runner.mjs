// Runs one Python job inside Pyodide under Node, offline, and prints one JSON line.
//
//   node tests/pyodide_runner.mjs <job.json>
//
// job.json = {
//   "files":    {"<absolute path in the Pyodide FS>": "<base64 content>", ...},
//   "sys_path": ["/lib/tokensieve_src", ...],   // prepended to sys.path
//   "code":     "<python source; sets RESULT>"
// }
//
// Prints {"ok": true, "result": <json.dumps(RESULT)>} and exits 0, or
// {"ok": false, "error": "<Python traceback or JS error>"} and exits 1.
// Python's own stdout and stderr go to this process's stderr, so stdout carries
// only that one line. Pyodide comes from web-demo/node_modules/pyodide (pinned in
// web-demo/package.json) or from $TOKENSIEVE_PYODIDE_DIR; nothing is fetched, so
// `loadPackage` (numpy etc.) is not available.

import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pyodideDir = resolve(
  process.env.TOKENSIEVE_PYODIDE_DIR ?? join(here, "..", "web-demo", "node_modules", "pyodide"),
);

function finish(payload, exitCode) {
  process.stdout.write(JSON.stringify(payload) + "\n", () => process.exit(exitCode));
}

function errorText(error) {
  // A PythonError's message is the full Python traceback.
  return error && (error.message || error.stack) ? String(error.message || error.stack) : String(error);
}

async function main() {
  const jobPath = process.argv[2];
  if (!jobPath) {
    throw new Error("usage: node tests/pyodide_runner.mjs <job.json>");
  }
  const job = JSON.parse(readFileSync(jobPath, "utf8"));

  let loadPyodide;
  try {
    ({ loadPyodide } = await import(pathToFileURL(join(pyodideDir, "pyodide.mjs")).href));
  } catch (error) {
    throw new Error(
      `cannot load Pyodide from ${pyodideDir} (${errorText(error)}); run \`npm ci\` in web-demo/ ` +
        "or set TOKENSIEVE_PYODIDE_DIR to an unpacked npm `pyodide` package",
    );
  }
  const pyodide = await loadPyodide({ indexURL: pyodideDir + "/" });
  const toStderr = { batched: (text) => process.stderr.write(text + "\n") };
  pyodide.setStdout(toStderr);
  pyodide.setStderr(toStderr);

  for (const [path, base64] of Object.entries(job.files ?? {})) {
    const buffer = Buffer.from(base64, "base64");
    // Pyodide's FS wants a plain Uint8Array, not a Node Buffer.
    const bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    pyodide.FS.mkdirTree(dirname(path));
    pyodide.FS.writeFile(path, bytes);
  }

  const globals = pyodide.toPy({});
  globals.set("__job_sys_path__", JSON.stringify(job.sys_path ?? []));
  pyodide.runPython(
    "import json, sys\n" +
      "sys.path[0:0] = json.loads(__job_sys_path__)\n" +
      "del __job_sys_path__\n" +
      "RESULT = None\n",
    { globals },
  );
  try {
    await pyodide.runPythonAsync(job.code ?? "", { globals, filename: "<job>" });
  } catch (error) {
    return finish({ ok: false, error: errorText(error) }, 1);
  }
  let resultJson;
  try {
    resultJson = pyodide.runPython("import json as __json\n__json.dumps(RESULT)", { globals });
  } catch (error) {
    return finish({ ok: false, error: "RESULT is not JSON-serializable:\n" + errorText(error) }, 1);
  }
  process.stdout.write('{"ok": true, "result": ' + resultJson + "}\n", () => process.exit(0));
}

main().catch((error) => finish({ ok: false, error: errorText(error) }, 1));
