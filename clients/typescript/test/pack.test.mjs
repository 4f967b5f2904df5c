// What `npm pack` ships: exactly these files, and the contract byte for byte as published.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const here = new URL("..", import.meta.url).pathname;

test("the package holds the client, its types and the contract, nothing else", () => {
  const [pack] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: here, encoding: "utf8" }));
  const files = pack.files.map((f) => f.path).sort();
  assert.deepEqual(files, [
    "README.md",
    "dist/index.d.ts",
    "dist/index.js",
    "dist/types.d.ts",
    "dist/types.js",
    "openapi.json",
    "openapi.yaml",
    "package.json",
  ]);
  console.log(`package ${pack.filename}: ${pack.size} bytes packed, ${pack.unpackedSize} unpacked, ${pack.entryCount} files`);
  for (const f of ["openapi.json", "openapi.yaml"]) {
    assert.ok(readFileSync(new URL(`../${f}`, import.meta.url)).equals(readFileSync(new URL(`../../../openapi/${f}`, import.meta.url))), f);
  }
  const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  const contract = JSON.parse(readFileSync(new URL("../openapi.json", import.meta.url), "utf8"));
  assert.equal(manifest.version, contract.info.version, "the package version carries the API version");
  assert.deepEqual(manifest.dependencies ?? {}, {}, "no runtime dependencies");
  // `npm pack` and `npm publish` from a clean checkout build dist/ and copy the contract first.
  assert.equal(manifest.scripts.prepack, "npm run build", "prepack builds the package");
});
