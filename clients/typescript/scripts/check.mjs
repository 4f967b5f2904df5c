// The drift checks of `npm test`: src/types.ts and test/usage.ts must be what the current
// contract generates, and usage.ts must compile against the client (every operation typed).
import { execFileSync } from "node:child_process";

const here = new URL("..", import.meta.url).pathname;
const run = (cmd, args) => execFileSync(cmd, args, { cwd: here, stdio: "inherit" });

run("node", ["scripts/generate.mjs", "--check"]);
run("node", ["scripts/usage.mjs", "--check"]);
run("node_modules/.bin/tsc", ["-p", "tsconfig.check.json"]);
