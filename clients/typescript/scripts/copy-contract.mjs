// The package ships the contract byte for byte as published in ../../openapi.
import { copyFileSync } from "node:fs";
for (const f of ["openapi.json", "openapi.yaml"]) copyFileSync(new URL(`../../../openapi/${f}`, import.meta.url), new URL(`../${f}`, import.meta.url));
