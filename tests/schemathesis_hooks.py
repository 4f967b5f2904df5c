"""schemathesis's positive-data check, with the rules a schema cannot state.

`tests/tests/contract_fuzz.rs` loads this file (`SCHEMATHESIS_HOOKS`) and runs
`positive_data_within_stated_rules` in place of schemathesis's `positive_data_acceptance`: data
the contract allows must be accepted, except where a refusal names one of the rules below. Each
is a rule the contract documents in words but no JSON Schema can express (the object named must
exist, two fields exclude each other, the deployment's outbound policy). docs/api.md lists
the same rules for client authors; a refusal for any other reason fails the run.
"""

import json
import re

import schemathesis
from schemathesis.specs.openapi.checks import is_unexpected_http_status_case

# A 400's `details[].field` (indices and the key of a map dropped: `resource_ids[0]` ->
# `resource_ids`, `metadata.x` -> `metadata`; "" for any field; `x.` for every field under
# `x`) and words of its message: why the data was refused although the schema allows it.
UNSTATED = {
    # Text: no control characters but newline, carriage return and tab (a pattern on every
    # text field would hide the field's own rule in the contract).
    ("", "control characters"): "text without control characters (a subject: without line breaks too)",
    # JSON Schema counts 44.0 as an integer; the API reads integers written without a fraction.
    ("", "invalid type: floating point"): "integers without a fraction (44, not 44.0)",
    # Addresses: the common form, not every RFC 5322 address (`format: email` admits quoted
    # local parts and IP literals), with a display name where `from` allows one.
    ("email", "must be a valid email address"): "an address in the common form",
    ("", "must be an email address"): "an address in the common form",
    ("from", "must be `addr@domain`"): "an address in the common form, with an optional display name",
    ("from", "must be an address such as"): "an address in the common form, with an optional display name",
    ("portal_origins", "must be an https origin"): "an https origin (scheme, host, port; no path)",
    ("currency", "ISO 4217"): "a currency ISO 4217 lists",
    ("default_currency", "ISO 4217"): "a currency ISO 4217 lists",
    ("locale", "language tag"): "a BCP 47 language tag",
    ("ip_address", "IPv4 or IPv6"): "an IPv4 or IPv6 address (one JSON Schema format cannot say either)",
    ("handle", "must be a handle"): "a handle of the channel's network",
    # The object must exist in the workspace (a schema cannot know what is stored).
    ("channel_ids", "no such channel"): "names a channel of the workspace",
    ("contact_id", "no such contact"): "names a contact of the workspace",
    ("resource_ids", "no such resource"): "names a resource of the workspace",
    ("service_id", "no such service"): "names a service of the workspace",
    ("mailbox", "is not at a verified sending domain"): "an address at a verified sending domain of the workspace",
    ("from", "is not at a verified sending domain"): "an address at a verified sending domain of the workspace",
    ("resource_id", "is not a resource of this service"): "a resource the service offers",
    ("code", "the code is wrong"): "the erasure code sent to the customer, unused and unexpired",
    # Fields that exclude or require each other.
    # A GDPR subject (`SubjectRef`: answers fill both) and the consents' query; the consent body
    # states it (`oneOf`).
    ("", "give exactly one of email or contact_id"): "exactly one of email and contact_id",
    ("lost_reason", "is required when a deal is lost"): "a lost deal needs its reason",
    ("to", "at least one recipient is required"): "at least one recipient, or a contact",
    ("channel_id", "must be one of the post's channel_ids"): "a variant is for one of the post's channels",
    ("csv", "the header has no email column"): "a CSV whose header row names an email column",
    ("csv", "needs a header row"): "a CSV whose header row names an email column",
    ("html", "html or text (or both) is required"): "a body: html, text or both",
    ("subject", "comes from the template"): "subject, html and text come from the template when one is named",
    ("html", "comes from the template"): "subject, html and text come from the template when one is named",
    ("text", "comes from the template"): "subject, html and text come from the template when one is named",
    ("snoozed_until", "required with status snoozed"): "a snoozed conversation has a time to reopen",
    ("consent", "required with resubscribe"): "resubscribe needs the new consent",
    ("consent", "only with resubscribe"): "consent is given only with resubscribe",
    ("text_shown", "must not be empty"): "a recorded consent choice carries the wording shown",
    ("text_version", "must not be empty"): "a recorded consent choice carries the wording's version",
    ("subject", "give a subject, or scope: workspace"): "a person or the whole workspace, not both",
    ("credentials.", "unknown field"): "the credentials of the channel's type",
    ("hold_id", "no such hold, or it has expired"): "a live hold of the workspace",
    ("", "the key must be a language tag"): "a template's variants are keyed by BCP 47 language tags",
    ("", "only X-... headers"): "custom headers are X-... and the list and threading headers",
    ("scheduled_at", "at most 30 days ahead"): "at most 30 days ahead",
    # Files: what a file is (its bytes), what it is called, what it adds up to.
    ("content", "must be base64"): "an attachment's content is base64 (JSON Schema does not check contentEncoding)",
    ("content", "the file is empty"): "an attachment is not empty",
    ("content", "programs and scripts are not sent"): "an attachment's bytes are not a program",
    ("content_type", "the bytes are"): "an attachment's declared type agrees with its bytes",
    ("content_type", "must be a media type"): "an attachment's type is a media type, not multipart or message",
    ("filename", "without path separators"): "a file name without path separators, control or direction characters, not ending in a dot or space",
    ("filename", "files of this kind"): "no file names mail providers refuse (programs, scripts, disk images)",
    ("content_id", "is used by another file"): "inline ids are unique within an email",
    ("upload_id", "no such upload"): "names an upload of the workspace, written and within its day",
    ("upload_id", "must be an upload id"): "names an upload of the workspace, written and within its day",
    ("attachments", "the limit for a whole message"): "a message, its files encoded, within SES's limit",
    ("emails", "one request may carry"): "one request's files within one message's limit",
    # A replay's window: kept events only, in time order.
    ("since", "days ago: events are kept"): "a replay reaches back as far as events are kept (30 days)",
    ("since", "must not be in the future"): "a replay's window starts in the past",
    ("until", "must not be before since"): "a replay's window ends after it starts",
    ("variables", "apply to templates only"): "variables only with a template",
    ("locale", "applies to templates only"): "a locale only with a template",
    # One message type per purpose: a conversation starts inbound or with a reply; staff add
    # replies and notes (inbound messages arrive by email).
    ("type", "a conversation starts with an inbound message or a reply"): "a first message is inbound or a reply",
    ("type", "reply or note"): "staff add replies and notes",
    ("subject", "is required (or use template_slug)"): "a subject, or a template that has one",
    # One input creates and changes a service: a new one needs these.
    ("resource_ids", "is required"): "a new service names its resources",
    ("name", "is required"): "a new service has a name",
    ("duration_minutes", "is required"): "a new service has a duration",
    ("delimiter", "applies only to csv"): "a delimiter only with csv",
    ("stage", "can change only while the deal is open"): "a closed deal's stage is frozen",
    # Opening hours: intervals in order and apart.
    ("", "end must be after start"): "an interval ends after it starts",
    ("", "intervals overlap"): "a day's intervals do not overlap",
    ("", "at most 12 intervals a day"): "at most 12 intervals a day",
    ("duration_minutes", "with its buffers at most"): "a service with its buffers is at most 3 hours",
    # A credential makes keys no stronger than itself.
    ("scopes", "cannot exceed the scopes of the calling credential"): "a key's scopes are within its maker's",
    ("requires_confirmation", "must require at least"): "a key needs at least its maker's confirmations",
    # What DynamoDB stores: a number's magnitude and digits (a schema bounds neither the
    # smallest magnitude nor the count of digits).
    ("custom_fields.", "numbers must be between"): "numbers of 1e-130 to 9.99e125 in magnitude (or 0), at most 38 digits",
    # The world and the deployment's policy.
    ("url", ""): "a URL the outbound policy allows: https, a public host that resolves",
    ("credentials", "resolve"): "a server address the outbound policy allows",
    ("return_url", ""): "an https URL on one of the workspace's portal_origins",
    ("logo_url", ""): "a URL the outbound policy allows: https, a public host",
    ("accent_color", "contrast"): "a colour with a contrast of 4.5:1 against white",
    ("timezone", "must be an IANA time zone"): "an IANA time zone name",
    ("snoozed_until", "must be in the future"): "a time in the future",
    ("scheduled_at", "must be in the future"): "a time in the future",
}

# The workspace's credentials, the portal session and the seeded ids are not the fuzzer's to
# choose; a token it makes up was never issued (the contract documents 428 for that).
ALLOWED = {401, 403, 404, 409, 428, 429}

CONFIRMATION_TOKEN = re.compile(r"^cct_[0-7][0-9A-HJKMNP-TV-Z]{25}[0-9A-Za-z]{43}$")


def _field(name):
    base = re.sub(r"\[\d+\]", "", name or "")
    return base.split(".")[0] if base.startswith("metadata") else base.split(".")[-1]


@schemathesis.check
def positive_data_within_stated_rules(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or is_unexpected_http_status_case(case):
        return None
    status = response.status_code
    if status < 400 or status >= 500 or status in ALLOWED:
        return None
    headers = {k.lower(): v for k, v in (case.headers or {}).items()}
    token = headers.get("x-capability-confirmation")
    if token is not None and not CONFIRMATION_TOKEN.match(str(token)):
        # The generator sent a header value outside the contract's pattern: not positive data.
        return None
    try:
        error = json.loads(response.text)["error"]
    except (ValueError, KeyError, TypeError):
        raise AssertionError(f"valid data refused with {status}, outside the error envelope")
    if status == 422 and error.get("code") == "IDEMPOTENCY_KEY_REUSED" and "idempotency-key" in headers:
        # A key names one request: the fuzzer draws keys from a small space, so another of its
        # requests meets a key already used (the contract's IdempotencyKey says so).
        return None
    if error.get("code") == "INVALID_CURSOR" and "cursor" in (case.query or {}):
        # A cursor is opaque: only a next_cursor of the same list with the same filters.
        return None
    details = error.get("details") or []
    def stated_elsewhere(d):
        field, message = d.get("field") or "", d.get("message") or ""
        return any(
            m in message and (f == "" or f == _field(field) or (f.endswith(".") and field.startswith(f)))
            for (f, m) in UNSTATED
        )

    unstated = [d for d in details if stated_elsewhere(d)]
    if status == 400 and error.get("code") == "VALIDATION_ERROR" and details and len(unstated) == len(details):
        return None
    raise AssertionError(
        f"valid data refused with {status} {error.get('code')}: {error.get('message')} "
        "(tighten the schema, or, if no schema can state the rule, add it to tests/schemathesis_hooks.py and docs/api.md)"
    )
