"""Verify one received delivery with the Standard Webhooks verifier libraries.

tests/src/receiver.rs runs this with the received headers and raw body (base64) as JSON on
stdin and the endpoint secret; it prints which libraries accept the delivery, so the test
proves that receivers using `standardwebhooks` or `svix` work with our deliveries unchanged.
"""

import base64
import json
import sys

import standardwebhooks
import svix.webhooks

given = json.load(sys.stdin)
body = base64.b64decode(given["body"])
headers = given["headers"]
verdicts = {}
for name, cls in [("standardwebhooks", standardwebhooks.Webhook), ("svix", svix.webhooks.Webhook)]:
    try:
        cls(given["secret"]).verify(body, headers)
        verdicts[name] = True
    except Exception as e:  # each library has its own error type; any refusal is a refusal
        verdicts[name] = False
        verdicts[name + "_error"] = str(e)
print(json.dumps(verdicts))
