// Compile-time checks (tsconfig.check.json, `npm run check`): the contract's header
// declarations reach the generated types, so a client made by openapi-typescript sends
// Idempotency-Key as a typed parameter and reads Retry-After as a number.
import type { components, operations } from "../src/types.js";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const check = <T extends true>(): T | undefined => undefined;

type CreateHeaders = NonNullable<operations["create_contact"]["parameters"]["header"]>;
check<Equal<CreateHeaders["Idempotency-Key"], string | undefined>>();
type Limited = operations["create_contact"]["responses"][429]["headers"];
check<Equal<Limited["Retry-After"], number>>();
type Created = operations["create_contact"]["responses"][201]["headers"];
// (openapi-typescript types a declared response header as present; it is there on replays.)
check<Equal<Created["Idempotent-Replayed"], "true">>();

// Open enums (`x-extensible-enum`, scripts/generate.mjs): a value a later version adds
// type-checks, the known ones are still named, and a closed enum stays closed.
const later: components["schemas"]["BookingStatus"] = "waitlisted";
const known: components["schemas"]["BookingStatus"] = "confirmed";
void [later, known];
check<Equal<Extract<components["schemas"]["BookingStatus"], "no_show">, "no_show">>();
// A closed enum (the import's delimiters) is exactly its values.
check<Equal<components["schemas"]["Delimiter"], "comma" | "semicolon" | "tab">>();
