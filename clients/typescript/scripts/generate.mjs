// Writes src/types.ts from the contract with openapi-typescript, as its CLI would, except for
// the enums the contract marks `x-extensible-enum` (they may gain values within version 1,
// docs/api.md "Changes to version 1"): their type is the known values plus `(string & {})`, so
// editors still offer the known ones while an answer with a value this version does not know
// type-checks, and code that switches over them needs its default branch.
import { readFileSync, writeFileSync } from "node:fs";
import openapiTS, { COMMENT_HEADER, astToString, tsIntersection, tsLiteral, tsUnion, STRING } from "openapi-typescript";
import ts from "typescript";

const contract = new URL("../../../openapi/openapi.json", import.meta.url);
const ast = await openapiTS(contract, {
  transform(schema) {
    if (schema["x-extensible-enum"] === true && Array.isArray(schema.enum)) {
      const later = tsIntersection([STRING, ts.factory.createTypeLiteralNode([])]);
      return tsUnion([...schema.enum.map((v) => tsLiteral(v)), later]);
    }
    return undefined;
  },
});
const out = new URL("../src/types.ts", import.meta.url);
const text = COMMENT_HEADER + astToString(ast);
// `--check` (npm run check): fail when the committed file is not what the contract generates.
if (process.argv.includes("--check")) {
  if (readFileSync(out, "utf8") !== text) {
    console.error("src/types.ts is stale: run `make generate`");
    process.exit(1);
  }
} else {
  writeFileSync(out, text);
}
