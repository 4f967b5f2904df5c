"""Validate JSON values against JSON Schemas (draft 2020-12) with the `jsonschema` library.

tests/tests/webhooks.rs runs this with `[{"name", "schema", "instance"}, ...]` on stdin; it
prints `{"name": [errors...]}` for every value that does not match (empty when all do), so the
catalog's schemas are checked by a validator nobody here wrote.
"""

import json
import sys

from jsonschema import Draft202012Validator

failures = {}
for case in json.load(sys.stdin):
    validator = Draft202012Validator(case["schema"])
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(case["instance"])]
    if errors:
        failures[case["name"]] = errors[:5]
print(json.dumps(failures))
