// Build an Allure 3 report like `allure generate`, then hand the config's quality-gate rules to
// Allure's own validator and its results to the report, as `allure run` does after a test
// command. `allure generate` never validates, so without this the report's "Quality Gates" tab
// stays empty. pytest-toolbench's allurerc.mjs holds one rule per gate verdict the harness
// computed (see allure_gates.py), so the tab shows exactly the verdicts of the run.
//
// Usage: node allure_build.mjs ALLURE_PACKAGE_DIR CONFIG RESULTS_DIR OUTPUT_DIR
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// Allure's validator calls Iterator.prototype.toArray (Node >= 22); Node 20 lacks it.
const iteratorProto = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
if (typeof iteratorProto.toArray !== "function") {
  Object.defineProperty(iteratorProto, "toArray", {
    value: function toArray() { return [...this]; }, configurable: true, writable: true,
  });
}

const [allureDir, configPath, resultsDir, output] = process.argv.slice(2);
// Resolve Allure's core from the installed `allure` package (project-local or global).
const requireFromAllure = createRequire(join(allureDir, "package.json"));
const core = await import(pathToFileURL(requireFromAllure.resolve("@allurereport/core")).href);

const config = await core.readConfig(resultsDir, configPath, { output });
const report = new core.AllureReport(config);
await report.start();
await report.readDirectory(resultsDir);
let failed = 0;
if (report.hasQualityGate) {
  const trs = await report.store.allTestResults({ includeRetries: false });
  const { results } = await report.validate({ trs, state: new core.QualityGateState() });
  failed = results.filter((r) => !r.success).length;
  // A rule of pytest-toolbench's names its run's model environment (allure_gates.py), so each
  // model's verdicts show under that model's environment.
  report.realtimeDispatcher.sendQualityGateResults(results.map((r) => (
    r.expected?.environment ? { ...r, environment: r.expected.environment } : r)));
  console.log(`quality gate: ${results.length - failed}/${results.length} rules passed`);
}
await report.done();
