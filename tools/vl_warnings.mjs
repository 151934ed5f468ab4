// Compile Vega-Lite specs with the site's pinned vega-lite and run them headless with the pinned
// vega, printing every warning either logs (the browser console shows the same ones).
// Usage: .venv/bin/node tools/vl_warnings.mjs spec.json [spec2.json ...]   (exit 1 on any warning)
// A spec file holds one Vega-Lite spec (`chart.to_json()`) or a JSON list of them.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const modules = join(here, "..", "site", "node_modules");
const require = createRequire(join(modules, "noop.js"));
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const vl = await load("vega-lite");
const vega = await load("vega");

function logger(sink, where) {
  const push = (level) => (...args) => { sink.push(`${where}: ${level}: ${args.join(" ")}`); return api; };
  let lvl = 0;
  const api = {
    level(l) { if (l === undefined) return lvl; lvl = l; return api; },
    error: push("error"), warn: push("warn"), info: () => api, debug: () => api,
  };
  return api;
}

let found = 0;
for (const file of process.argv.slice(2)) {
  let specs = JSON.parse(readFileSync(file, "utf8"));
  if (!Array.isArray(specs)) specs = [specs];
  for (const [i, spec] of specs.entries()) {
    const sink = [];
    const where = specs.length > 1 ? `${file}[${i}]` : file;
    try {
      const compiled = vl.compile(spec, { logger: logger(sink, where + " (vega-lite)") }).spec;
      const view = new vega.View(vega.parse(compiled), {
        renderer: "none", logger: logger(sink, where + " (vega)"), logLevel: vega.Warn,
      });
      await view.runAsync();
      view.finalize();
    } catch (err) {
      sink.push(`${where}: error: ${err.message}`);
    }
    for (const line of sink) console.log(line);
    found += sink.length;
  }
}
process.exit(found ? 1 : 0);
