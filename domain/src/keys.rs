//! The key registry: every item kind of the table, with its key patterns. Areas build keys
//! only through these kinds (`keys::CONTACT.sk(&id)`, whose parts are typed by the ids the
//! placeholders name) and list through [`LISTS`], so two kinds can never share a sort-key prefix in a partition without a test failing. (One did:
//! a contact's email claim `EMAIL#<address>` beside the email `EMAIL#<em id>` made the email
//! list read claims and answer 500.) `docs/data-model.md`'s table is generated from here.

// A kind's type spells the parts of each of its keys, in order; that listing is the point.
#![allow(clippy::type_complexity)]

pub use shared::keys::*;

use crate::ids::*;
use shared::ids::{EventId, WorkspaceId};

pub const WORKSPACE: Keys<WorkspaceId, ()> =
    Keys::on("workspace", WORKSPACE_PK, "WORKSPACE", "`version` for optimistic updates").business();
pub const SLUG_CLAIM: Keys<Text, ()> =
    Keys::on("slug claim", "SLUG#<slug>", "SLUG", "platform-wide uniqueness, written in the same transaction as the workspace").internal();
pub const POST: Keys<WorkspaceId, PostId, (WorkspaceId, Text), PostId, (), (Text, WorkspaceId, PostId)> =
    Keys::on("post", WORKSPACE_PK, "POST#<post id>", "GSI1 serves `?status=`, GSI2 the publisher's due query")
        .gsi1("WS#<ws>#POST#<status>", "POST#<post id>")
        .gsi2("DUE#POST", "<scheduled_at>#<ws>#<post id>")
        .business();
pub const POST_VARIANT: Keys<WorkspaceId, (PostId, ChannelId)> = Keys::on(
    "post variant publication",
    WORKSPACE_PK,
    "PUBVARIANT#<post id>#<ch id>",
    "the publisher's claim (`claim_until`), attempts and outcome of one variant: the record that makes a variant publish once",
)
.business();
pub const CHANNEL: Keys<WorkspaceId, ChannelId> =
    Keys::on("channel", WORKSPACE_PK, "CHANNEL#<ch id>", "`credentials` and `session` sealed (AES-GCM, bound to the channel); versioned")
        .business();
pub const CHANNEL_COUNT: Keys<WorkspaceId, ()> =
    Keys::on("channel count", WORKSPACE_PK, "CHCOUNT", "`channels`, updated in the create/delete transaction (cap 50)").internal();
pub const BOOKING_RESOURCE: Keys<WorkspaceId, ResourceId> =
    Keys::on("booking resource", WORKSPACE_PK, "BRES#<res id>", "name, time zone, opening hours, exceptions, capacity; versioned")
        .business();
pub const BOOKING_SERVICE: Keys<WorkspaceId, ServiceId> =
    Keys::on("booking service", WORKSPACE_PK, "BSVC#<svc id>", "duration, buffers, resources, notice/advance/interval rules; versioned")
        .business();
pub const BOOKING: Keys<WorkspaceId, BookingId, (WorkspaceId, Text), BookingId, WorkspaceId, (Text, BookingId)> = Keys::on(
    "booking",
    WORKSPACE_PK,
    "BOOKING#<bk id>",
    "`cells`: the keys of the cells it holds, released with it; versioned; GSI1 serves `?status=`, GSI2 `order=soonest`",
)
.gsi1("WS#<ws>#BOOKING#<status>", "BOOKING#<bk id>")
.gsi2("WS#<ws>#BOOKINGSTART", "BKSTART#<start>#<bk id>")
.personal();
pub const CONTACT_BOOKING: Keys<WorkspaceId, (ContactId, Text, BookingId)> = Keys::on(
    "contact booking link",
    WORKSPACE_PK,
    "CTBOOKING#<ct id>#<start>#<bk id>",
    "`booking_id`; written with the booking: a contact's bookings in start order (the portal)",
)
.personal();
pub const BOOKING_HOLD: Keys<WorkspaceId, HoldId> =
    Keys::on("booking hold", WORKSPACE_PK, "BHOLD#<hold id>", "a reserved slot until `expires_at` (also the TTL)").internal();
pub const BOOKING_CELL: Keys<WorkspaceId, (ResourceId, Text, Text)> = Keys::on(
    "booking cell",
    WORKSPACE_PK,
    "BCELL#<res id>#<UTC minute, YYYYMMDDTHHMM>#<unit, 2 digits>",
    "5 minutes of one capacity unit of a resource: `holder` (booking or hold id), `expires_at` for holds; written with its booking, conditionally: the no-overlap guarantee",
)
.internal();
pub const CONTACT: Keys<WorkspaceId, ContactId, (WorkspaceId, Text), ContactId> =
    Keys::on("contact", WORKSPACE_PK, "CONTACT#<ct id>", "versioned").gsi1("WS#<ws>#CONTACT#<status>", "CONTACT#<ct id>").personal();
pub const CONTACT_EMAIL_CLAIM: Keys<WorkspaceId, Text> = Keys::on(
    "contact email claim",
    WORKSPACE_PK,
    "CLAIM#EMAIL#<lower-cased email>",
    "`contact_id`; the uniqueness guarantee, written with the contact",
)
.personal();
pub const CONTACT_SEARCH: Keys<WorkspaceId, (Text, ContactId)> = Keys::on(
    "contact search entry",
    WORKSPACE_PK,
    "CSEARCH#<term>#<ct id>",
    "terms: email, \"first last\", last name (lower case); `q` is a prefix Query",
)
.personal();
pub const CONTACT_FORMER: Keys<WorkspaceId, (ContactId, Text, Text), (WorkspaceId, Text), (Text, ContactId)> = Keys::on(
    "contact former identity",
    WORKSPACE_PK,
    "CFORMER#<ct id>#<field>#<sha256 of the lower-cased former value>",
    "an address, phone or name the contact had before a change (`field`, `value`): written with the change, so an erasure finds the person by every identity they had; a former address also by its value (GSI1), so an erasure by that address finds the contact",
)
.gsi1("WS#<ws>#CFORMERV#<sha256 of the lower-cased former address>", "CFORMER#<changed at>#<ct id>")
.personal();
pub const ACTIVITY: Keys<WorkspaceId, (ContactId, ActivityId)> =
    Keys::on("activity", WORKSPACE_PK, "ACT#<ct id>#<act id>", "the contact's timeline, listed newest first").personal();
pub const IMPORT_JOB: Keys<WorkspaceId, ImportId> =
    Keys::on("import job", WORKSPACE_PK, "IMPORT#<imp id>", "counts, status, `chunks`, `next_chunk` (progress)").business();
pub const IMPORT_ROWS: Keys<WorkspaceId, (ImportId, Text)> =
    Keys::on("import rows", WORKSPACE_PK, "IMPROWS#<imp id>#<chunk, 5 digits>", "≤ 500 rows as JSON; 7 d TTL").personal();
pub const IMPORT_ERROR: Keys<WorkspaceId, (ImportId, Text, Text)> =
    Keys::on("import error", WORKSPACE_PK, "IMPERR#<imp id>#<row, 6 digits>#<n>", "row, field, message").personal();
pub const SCAN: Keys<WorkspaceId, ScanId, (WorkspaceId, Text), ScanId, (WorkspaceId, Text), ScanId> = Keys::on(
    "scan",
    WORKSPACE_PK,
    "SCAN#<scan id>",
    "url, host, status, score, grade, categories, findings, attempts; GSI1 lists a host's scans, GSI2 a status's",
)
.gsi1("WS#<ws>#SCANHOST#<host>", "SCAN#<scan id>")
.gsi2("WS#<ws>#SCANSTATUS#<status>", "SCAN#<scan id>")
.business();
pub const SCAN_HOST_SLOT: Keys<Text, Text> = Keys::on(
    "scan host slot",
    "SCANHOST#<host>",
    "SLOT#<0..1>",
    "a scan running against this host (any workspace): scan id, `lease_until` (ms); TTL",
)
.internal();
pub const SCAN_URL_CLAIM: Keys<WorkspaceId, Text> =
    Keys::on("scan URL claim", WORKSPACE_PK, "SCANURL#<sha256 of the URL>", "the scan of this URL for 10 minutes (TTL)").internal();
pub const DEAL: Keys<WorkspaceId, DealId, (WorkspaceId, Text), DealId, (WorkspaceId, ContactId), DealId> =
    Keys::on("deal", WORKSPACE_PK, "DEAL#<deal id>", "GSI2 lists a contact's deals (keys only, then BatchGetItem)")
        .gsi1("WS#<ws>#DEAL#<status>", "DEAL#<deal id>")
        .gsi2("WS#<ws>#DEALS#<ct id>", "DEAL#<deal id>")
        .personal();
pub const EMAIL: Keys<WorkspaceId, EmailId, (WorkspaceId, Text), EmailId, (WorkspaceId, ContactId), EmailId> = Keys::on(
    "email",
    WORKSPACE_PK,
    "EMAIL#<em id>",
    "without bodies, so lists stay small; `claim_token`/`claim_until` while the sender works on it; versioned; GSI2 while linked to a contact",
)
.gsi1("WS#<ws>#EMAIL#<status>", "EMAIL#<em id>")
.gsi2("WS#<ws>#EMAILS#<ct id>", "EMAIL#<em id>")
.personal();
pub const EMAIL_BODY: Keys<WorkspaceId, EmailId> =
    Keys::on("email bodies", WORKSPACE_PK, "EMAILBODY#<em id>", "`html`, `text` (≤ 256 KiB / 128 KiB)").personal();
pub const EMAIL_BATCH: Keys<WorkspaceId, EmailBatchId> =
    Keys::on("email batch", WORKSPACE_PK, "EMAILBATCH#<eb id>", "accepted email ids in request order, rejected indexes with errors")
        .personal();
pub const EMAIL_SUPPRESSION: Keys<WorkspaceId, Text> = Keys::on(
    "email suppression",
    WORKSPACE_PK,
    "SUPPRESSION#<address>",
    "an address that bounced permanently or complained, contact or not; consulted on accept and before sending",
)
.personal();
pub const ERASED_SUPPRESSION: Keys<WorkspaceId, Text> = Keys::on(
    "erased address's suppression",
    WORKSPACE_PK,
    "HSUPPRESSION#<HMAC-SHA256 of the address, as the tombstone>",
    "`reason`: a suppression that outlives the erasure of its address, read with the tombstones when an email is accepted",
)
.internal();
pub const SENDING_DOMAIN: Keys<WorkspaceId, DomainId> = Keys::on(
    "sending domain",
    WORKSPACE_PK,
    "SENDDOMAIN#<dom id>",
    "name, status (`pending`/`verified`/`failed`, refreshed from SES), DKIM records; versioned",
)
.business();
pub const SENDING_DOMAIN_COUNT: Keys<WorkspaceId, ()> =
    Keys::on("sending domain count", WORKSPACE_PK, "DOMAINCOUNT", "`domains`, updated in the create/delete transaction (cap 50)")
        .internal();
pub const SENDING_DOMAIN_CLAIM: Keys<Text, ()> = Keys::on(
    "sending domain claim",
    "SENDDOMAIN#<domain name>",
    "SENDDOMAIN",
    "`workspace_id`, `domain_id`: a domain belongs to one workspace; written with the domain",
)
.internal();
pub const EMAIL_TEMPLATE: Keys<WorkspaceId, Text> =
    Keys::on("email template", WORKSPACE_PK, "ETPL#<slug>", "base content, `variants` by locale, `required_variables`; versioned")
        .business();
pub const EMAIL_DUE: Keys<Text, (Text, WorkspaceId, EmailId)> = Keys::on(
    "email due entry",
    "DUE#EMAIL#<0..7>",
    "<due epoch ms, 13 digits>#<ws>#<em id>",
    "every email still to leave; `next_check` (epoch s) for the tick; deleted with the final state",
)
.internal();
pub const SES_MESSAGE: Keys<Text, ()> =
    Keys::on("SES message look-up", "SESMSG#<provider message id>", "SESMSG", "workspace and email id, for SES notifications").internal();
pub const WEBHOOK_ENDPOINT: Keys<WorkspaceId, EndpointId> = Keys::on(
    "webhook endpoint",
    WORKSPACE_PK,
    "WEBHOOK#<wh id>",
    "`secrets`: sealed, newest first, each with an expiry after rotation; `failing_since`, `enabled`, `disabled_reason`",
)
.business();
pub const WEBHOOK_COUNT: Keys<WorkspaceId, ()> = Keys::on(
    "endpoint count",
    WORKSPACE_PK,
    "WEBHOOKCOUNT",
    "`endpoints`, updated in the create/delete transaction: the cap of 20 holds under races",
)
.internal();
pub const WEBHOOK_DELIVERY: Keys<WorkspaceId, (EndpointId, DeliveryId), (WorkspaceId, EndpointId, Text), (EndpointId, DeliveryId)> =
    Keys::on(
        "webhook delivery",
        WORKSPACE_PK,
        "WHD#<wh id>#<whd id>",
        "attempts, `body` (the signed bytes), `job` (token of the one queue message that may work on it), `retries`; 30 d TTL",
    )
    .gsi1("WS#<ws>#WHD#<wh id>#<status>", "WHD#<wh id>#<whd id>")
    .personal();
pub const FANOUT_MARKER: Keys<WorkspaceId, EventId> = Keys::on(
    "webhook event",
    WORKSPACE_PK,
    "WHEVENT#<evt id>",
    "one event's body (signed by every delivery of it) and the deliveries it created, so a re-sent event creates none twice (a replay's added; none when only a disabled endpoint was due it, kept for a replay); `withdrawn` and emptied by an erasure, never deleted early; TTL as deliveries, moved on by a replay",
)
.personal();

pub const WEBHOOK_REPLAY: Keys<WorkspaceId, (EndpointId, ReplayId)> = Keys::on(
    "webhook replay",
    WORKSPACE_PK,
    "WHREPLAY#<wh id>#<whr id>",
    "a replay's window, status and progress; `cursor`: the last event record read; TTL 30 d",
)
.business();
pub const WEBHOOK_REPLAY_HOLD: Keys<WorkspaceId, EndpointId> = Keys::on(
    "webhook replay hold",
    WORKSPACE_PK,
    "WHREPLAYHOLD#<wh id>",
    "`replay_id` of the endpoint's running replay (one at a time); deleted when it ends, else TTL 1 h",
)
.internal();
pub const CONSENT: Keys<WorkspaceId, (Text, ConsentId)> = Keys::on(
    "consent event",
    WORKSPACE_PK,
    "CONSENT#<lower-cased email>#<cons id>",
    "append-only ledger: purpose, granted, source, the text shown and its version; the current state is the newest per purpose",
)
.personal();
pub const ERASED_CONSENT: Keys<WorkspaceId, (Text, ConsentId)> = Keys::on(
    "erased address's consent event",
    WORKSPACE_PK,
    "HCONSENT#<HMAC-SHA256 of the address, as the tombstone>#<cons id>",
    "a ledger entry of an erased address without the address, contact, IP or user agent: the proof of what was granted or withdrawn stays",
)
.internal();
pub const EXPORT_JOB: Keys<WorkspaceId, ExportId> = Keys::on(
    "GDPR export",
    WORKSPACE_PK,
    "GDPREXPORT#<gx id>",
    "subject or workspace scope, status, progress per area; `resume`: the multipart upload, its parts and the position of the last part",
)
.personal();
pub const ERASURE: Keys<WorkspaceId, ErasureId> = Keys::on(
    "GDPR erasure",
    WORKSPACE_PK,
    "GDPRERASURE#<ge id>",
    "the audit record: hashed subject, reason, requested by, per-area counts; the sealed subject only while it runs",
)
.business();
pub const TOMBSTONE: Keys<WorkspaceId, Text> = Keys::on(
    "erasure tombstone",
    WORKSPACE_PK,
    "TOMBSTONE#<HMAC-SHA256 of the address, keyed per workspace>",
    "an erased address may not be re-created or mailed without new consent",
)
.internal();
pub const PORTAL_LINK: Keys<Text, (), (WorkspaceId, ContactId), Text> = Keys::on(
    "portal login link",
    "PORTALLINK#<sha256 of the link token>",
    "PORTALLINK",
    "workspace, contact, `return_url`, `expires_at` (15 min, also the TTL); deleted by its one exchange",
)
.gsi1("WS#<ws>#PLINKS#<ct id>", "PLINK#<link id>")
.personal();

pub const PORTAL_SIGN_IN: Keys<Text, (), (WorkspaceId, ContactId), Text> = Keys::on(
    "portal sign-in attempt",
    "PORTALSIGNIN#<sha256 of the attempt token>",
    "PORTALSIGNIN",
    "workspace; when the address was a contact's: the contact, the hashes of the emailed code and of its link; guesses; `expires_at` (15 min, also the TTL); deleted by the right code",
)
.gsi1("WS#<ws>#PSIGNINS#<ct id>", "PSIGNIN#<attempt id>")
.personal();

pub const CONVERSATION: Keys<
    WorkspaceId,
    ConversationId,
    WorkspaceId,
    (Text, ConversationId),
    (WorkspaceId, Text),
    (Text, ConversationId),
> = Keys::on(
    "helpdesk conversation",
    WORKSPACE_PK,
    "CONV#<conv id>",
    "versioned; GSI1 lists by last message (newest first), GSI2 by status in the same order (keys only)",
)
.gsi1("WS#<ws>#CONVS", "CLAST#<last message at>#<conv id>")
.gsi2("WS#<ws>#CONVSTATUS#<status>", "CLAST#<last message at>#<conv id>")
.personal();
pub const HELPDESK_MESSAGE: Keys<WorkspaceId, (ConversationId, HelpdeskMessageId)> =
    Keys::on("helpdesk message", WORKSPACE_PK, "HMSG#<conv id>#<hm id>", "inbound, reply (with its `email_id`) or note; oldest first")
        .personal();
pub const CONVERSATION_TOKEN: Keys<WorkspaceId, Text> = Keys::on(
    "helpdesk reply address",
    WORKSPACE_PK,
    "CONVTOKEN#<HMAC token>",
    "`conversation_id` of the reply address `mailbox+<token>@domain`",
)
.personal();
pub const MESSAGE_REF: Keys<WorkspaceId, Text> = Keys::on(
    "helpdesk Message-ID",
    WORKSPACE_PK,
    "MSGREF#<sha256 of a Message-ID>",
    "the conversation an email's Message-ID belongs to: threading and deduplication of inbound mail",
)
.personal();
pub const SNOOZE_DUE: Keys<Text, (Text, WorkspaceId, ConversationId)> = Keys::on(
    "helpdesk snooze due entry",
    "DUE#SNOOZE#<0..3>",
    "<until epoch ms, 13 digits>#<ws>#<conv id>",
    "every snoozed conversation, for the minute tick that reopens it; written and removed with the snooze",
)
.internal();

/// Every kind the table holds, in the order docs/data-model.md lists them.
pub fn all() -> Vec<Kind> {
    let areas = [
        WORKSPACE.kind,
        SLUG_CLAIM.kind,
        POST.kind,
        POST_VARIANT.kind,
        CHANNEL.kind,
        CHANNEL_COUNT.kind,
        BOOKING_RESOURCE.kind,
        BOOKING_SERVICE.kind,
        BOOKING.kind,
        CONTACT_BOOKING.kind,
        BOOKING_HOLD.kind,
        BOOKING_CELL.kind,
        CONTACT.kind,
        CONTACT_EMAIL_CLAIM.kind,
        CONTACT_SEARCH.kind,
        CONTACT_FORMER.kind,
        ACTIVITY.kind,
        IMPORT_JOB.kind,
        IMPORT_ROWS.kind,
        IMPORT_ERROR.kind,
        DEAL.kind,
        EMAIL.kind,
        EMAIL_BODY.kind,
        EMAIL_BATCH.kind,
        EMAIL_TEMPLATE.kind,
        EMAIL_SUPPRESSION.kind,
        ERASED_SUPPRESSION.kind,
        SENDING_DOMAIN.kind,
        SENDING_DOMAIN_COUNT.kind,
        SENDING_DOMAIN_CLAIM.kind,
        EMAIL_DUE.kind,
        SES_MESSAGE.kind,
        WEBHOOK_ENDPOINT.kind,
        WEBHOOK_COUNT.kind,
        WEBHOOK_DELIVERY.kind,
        FANOUT_MARKER.kind,
        WEBHOOK_REPLAY.kind,
        WEBHOOK_REPLAY_HOLD.kind,
        CONSENT.kind,
        ERASED_CONSENT.kind,
        EXPORT_JOB.kind,
        ERASURE.kind,
        TOMBSTONE.kind,
        PORTAL_LINK.kind,
        PORTAL_SIGN_IN.kind,
        CONVERSATION.kind,
        HELPDESK_MESSAGE.kind,
        CONVERSATION_TOKEN.kind,
        MESSAGE_REF.kind,
        SNOOZE_DUE.kind,
        SCAN.kind,
        SCAN_URL_CLAIM.kind,
        SCAN_HOST_SLOT.kind,
    ];
    SHARED_KINDS.iter().copied().chain(areas).collect()
}

pub const API_KEYS: List<WorkspaceId, ApiKeyId> = List::table(API_KEY);
pub const CAPABILITY_CONFIRMATIONS: List<WorkspaceId, ConfirmationId> = List::table(CAPABILITY_CONFIRMATION);
pub const APPROVAL_REQUESTS: List<WorkspaceId, ApprovalRequestId> = List::table(APPROVAL_REQUEST);
pub const MEMBERS: List<WorkspaceId, Text> = List::table(MEMBER);
pub const MEMBERSHIPS: List<Text, WorkspaceId> = List::gsi1(MEMBER);
pub const POSTS: List<WorkspaceId, PostId> = List::table(POST);
pub const POSTS_BY_STATUS: List<(WorkspaceId, Text), PostId> = List::gsi1(POST);
pub const POST_VARIANTS: List<WorkspaceId, (PostId, ChannelId)> = List::table(POST_VARIANT);
pub const CHANNELS: List<WorkspaceId, ChannelId> = List::table(CHANNEL);
pub const BOOKING_RESOURCES: List<WorkspaceId, ResourceId> = List::table(BOOKING_RESOURCE);
pub const BOOKING_SERVICES: List<WorkspaceId, ServiceId> = List::table(BOOKING_SERVICE);
pub const BOOKINGS: List<WorkspaceId, BookingId> = List::table(BOOKING);
pub const BOOKINGS_BY_STATUS: List<(WorkspaceId, Text), BookingId> = List::gsi1(BOOKING);
pub const BOOKINGS_BY_START: List<WorkspaceId, (Text, BookingId)> = List::gsi2(BOOKING);
pub const CONTACTS: List<WorkspaceId, ContactId> = List::table(CONTACT);
pub const CONTACTS_BY_STATUS: List<(WorkspaceId, Text), ContactId> = List::gsi1(CONTACT);
pub const CONTACT_SEARCHES: List<WorkspaceId, (Text, ContactId)> = List::table(CONTACT_SEARCH);
pub const ACTIVITIES: List<WorkspaceId, (ContactId, ActivityId)> = List::table(ACTIVITY);
pub const IMPORT_ERRORS: List<WorkspaceId, (ImportId, Text, Text)> = List::table(IMPORT_ERROR);
pub const DEALS: List<WorkspaceId, DealId> = List::table(DEAL);
pub const SCANS: List<WorkspaceId, ScanId> = List::table(SCAN);
pub const SCANS_BY_HOST: List<(WorkspaceId, Text), ScanId> = List::gsi1(SCAN);
pub const SCANS_BY_STATUS: List<(WorkspaceId, Text), ScanId> = List::gsi2(SCAN);
pub const DEALS_BY_STATUS: List<(WorkspaceId, Text), DealId> = List::gsi1(DEAL);
pub const DEALS_OF_CONTACT: List<(WorkspaceId, ContactId), DealId> = List::gsi2(DEAL);
pub const EMAILS: List<WorkspaceId, EmailId> = List::table(EMAIL);
pub const EMAILS_BY_STATUS: List<(WorkspaceId, Text), EmailId> = List::gsi1(EMAIL);
pub const EMAILS_OF_CONTACT: List<(WorkspaceId, ContactId), EmailId> = List::gsi2(EMAIL);
pub const EMAIL_TEMPLATES: List<WorkspaceId, Text> = List::table(EMAIL_TEMPLATE);
pub const EMAIL_SUPPRESSIONS: List<WorkspaceId, Text> = List::table(EMAIL_SUPPRESSION);
pub const SENDING_DOMAINS: List<WorkspaceId, DomainId> = List::table(SENDING_DOMAIN);
pub const EMAILS_DUE: List<Text, (Text, WorkspaceId, EmailId)> = List::table(EMAIL_DUE);
pub const WEBHOOK_ENDPOINTS: List<WorkspaceId, EndpointId> = List::table(WEBHOOK_ENDPOINT);
pub const WEBHOOK_DELIVERIES: List<WorkspaceId, (EndpointId, DeliveryId)> = List::table(WEBHOOK_DELIVERY);
pub const WEBHOOK_DELIVERIES_BY_STATUS: List<(WorkspaceId, EndpointId, Text), (EndpointId, DeliveryId)> = List::gsi1(WEBHOOK_DELIVERY);
pub const DUE_POSTS: List<(), (Text, WorkspaceId, PostId)> = List::gsi2(POST);
pub const OUTBOX: List<Text, EventId> = List::table(OUTBOX_EVENT);
pub const OUTBOX_JOBS: List<Text, (Text, Text)> = List::table(OUTBOX_JOB);
pub const CONSENTS: List<WorkspaceId, (Text, ConsentId)> = List::table(CONSENT);
pub const ERASED_CONSENTS: List<WorkspaceId, (Text, ConsentId)> = List::table(ERASED_CONSENT);
pub const CONTACT_FORMERS: List<WorkspaceId, (ContactId, Text, Text)> = List::table(CONTACT_FORMER);
pub const CONTACTS_BY_FORMER_ADDRESS: List<(WorkspaceId, Text), (Text, ContactId)> = List::gsi1(CONTACT_FORMER);
pub const EXPORT_JOBS: List<WorkspaceId, ExportId> = List::table(EXPORT_JOB);
pub const ERASURES: List<WorkspaceId, ErasureId> = List::table(ERASURE);
pub const PORTAL_SESSIONS_OF_CONTACT: List<(WorkspaceId, ContactId), Text> = List::gsi1(PORTAL_SESSION);
pub const PORTAL_LINKS_OF_CONTACT: List<(WorkspaceId, ContactId), Text> = List::gsi1(PORTAL_LINK);
pub const PORTAL_SIGN_INS_OF_CONTACT: List<(WorkspaceId, ContactId), Text> = List::gsi1(PORTAL_SIGN_IN);
pub const CONVERSATIONS: List<WorkspaceId, (Text, ConversationId)> = List::gsi1(CONVERSATION);
pub const CONVERSATIONS_BY_STATUS: List<(WorkspaceId, Text), (Text, ConversationId)> = List::gsi2(CONVERSATION);
pub const HELPDESK_MESSAGES: List<WorkspaceId, (ConversationId, HelpdeskMessageId)> = List::table(HELPDESK_MESSAGE);

/// Every list, without its types (kind and index), for the tests below.
pub const LISTS: &[(Kind, Index)] = &[
    API_KEYS.erased(),
    MEMBERS.erased(),
    MEMBERSHIPS.erased(),
    POSTS.erased(),
    POSTS_BY_STATUS.erased(),
    POST_VARIANTS.erased(),
    CHANNELS.erased(),
    BOOKING_RESOURCES.erased(),
    BOOKING_SERVICES.erased(),
    BOOKINGS.erased(),
    BOOKINGS_BY_STATUS.erased(),
    BOOKINGS_BY_START.erased(),
    CONTACTS.erased(),
    CONTACTS_BY_STATUS.erased(),
    CONTACT_SEARCHES.erased(),
    ACTIVITIES.erased(),
    IMPORT_ERRORS.erased(),
    DEALS.erased(),
    DEALS_BY_STATUS.erased(),
    DEALS_OF_CONTACT.erased(),
    EMAILS.erased(),
    EMAILS_BY_STATUS.erased(),
    EMAILS_OF_CONTACT.erased(),
    EMAIL_TEMPLATES.erased(),
    EMAIL_SUPPRESSIONS.erased(),
    SENDING_DOMAINS.erased(),
    EMAILS_DUE.erased(),
    WEBHOOK_ENDPOINTS.erased(),
    WEBHOOK_DELIVERIES.erased(),
    WEBHOOK_DELIVERIES_BY_STATUS.erased(),
    DUE_POSTS.erased(),
    OUTBOX.erased(),
    OUTBOX_JOBS.erased(),
    CONSENTS.erased(),
    ERASED_CONSENTS.erased(),
    CONTACT_FORMERS.erased(),
    CONTACTS_BY_FORMER_ADDRESS.erased(),
    EXPORT_JOBS.erased(),
    ERASURES.erased(),
    PORTAL_SESSIONS_OF_CONTACT.erased(),
    PORTAL_LINKS_OF_CONTACT.erased(),
    PORTAL_SIGN_INS_OF_CONTACT.erased(),
    CONVERSATIONS.erased(),
    CONVERSATIONS_BY_STATUS.erased(),
    HELPDESK_MESSAGES.erased(),
    CAPABILITY_CONFIRMATIONS.erased(),
    APPROVAL_REQUESTS.erased(),
    SCANS.erased(),
    SCANS_BY_HOST.erased(),
    SCANS_BY_STATUS.erased(),
];

/// The table of docs/data-model.md (a test keeps the file equal to it).
pub fn markdown_table() -> String {
    let cell = |p: Option<KeyPattern>| p.map(|p| format!("`{}` / `{}`", p.pk, p.sk)).unwrap_or_default();
    let mut out = String::from("| item | pk | sk | gsi1 (pk / sk) | gsi2 (pk / sk) | data | notes |\n|---|---|---|---|---|---|---|\n");
    for k in all() {
        out.push_str(&format!(
            "| {} | `{}` | `{}` | {} | {} | {:?} | {} |\n",
            k.name,
            k.table.pk,
            k.table.sk,
            cell(k.gsi1),
            cell(k.gsi2),
            k.data,
            k.notes
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEXES: [Index; 3] = [Index::Table, Index::Gsi1, Index::Gsi2];

    /// Could a key of pattern `b` start with the literal text `a` (the literal prefix of
    /// another pattern)? Only if `b`'s own literal prefix starts with `a`, or is a prefix of
    /// `a` and a placeholder follows (then any text may follow).
    fn may_start_with(b: &str, a: &str) -> bool {
        let lb = literal_prefix(b);
        lb.starts_with(a) || (placeholders(b) > 0 && a.starts_with(lb))
    }

    /// Can two partition-key patterns produce the same partition? Equal patterns can; for
    /// different ones, only if one's literal text may begin the other.
    fn same_partition(a: &str, b: &str) -> bool {
        a == b || may_start_with(a, literal_prefix(b)) && may_start_with(b, literal_prefix(a))
    }

    #[test]
    fn no_sort_key_prefix_is_shared_within_a_partition() {
        let kinds = all();
        for index in INDEXES {
            for (i, a) in kinds.iter().enumerate() {
                for b in &kinds[i + 1..] {
                    let (Some(pa), Some(pb)) = (a.pattern(index), b.pattern(index)) else { continue };
                    if !same_partition(pa.pk, pb.pk) {
                        continue;
                    }
                    let (la, lb) = (literal_prefix(pa.sk), literal_prefix(pb.sk));
                    assert!(
                        !(lb.starts_with(la) || la.starts_with(lb)),
                        "{index:?}: `{}` ({}) and `{}` ({}) share partition `{}` and a sort-key prefix",
                        pa.sk,
                        a.name,
                        pb.sk,
                        b.name,
                        pa.pk
                    );
                }
            }
        }
    }

    #[test]
    fn every_list_reads_exactly_one_kind() {
        let kinds = all();
        for &(kind, index) in LISTS {
            let p = kind.pattern(index).expect("list's kind has the index");
            let prefix = literal_prefix(p.sk);
            let matching: Vec<&str> = kinds
                .iter()
                .filter(|k| k.pattern(index).is_some_and(|q| same_partition(q.pk, p.pk) && may_start_with(q.sk, prefix)))
                .map(|k| k.name)
                .collect();
            assert_eq!(matching, vec![kind.name], "list on {index:?} `{}` / `{prefix}…` reads {matching:?}", p.pk);
        }
    }

    #[test]
    fn the_old_email_collision_would_fail() {
        let claim: Keys<WorkspaceId, Text> = Keys::on("old claim", WORKSPACE_PK, "EMAIL#<address>", "");
        let (a, b) = (literal_prefix(claim.table.sk), literal_prefix(EMAIL.table.sk));
        assert!(a.starts_with(b) || b.starts_with(a), "the test's rule catches the EMAIL# pair");
        assert!(may_start_with(claim.table.sk, literal_prefix(EMAIL.table.sk)));
    }

    #[test]
    fn every_kind_says_whether_it_holds_personal_data() {
        let unclassified: Vec<&str> = all().iter().filter(|k| k.data == Data::Unclassified).map(|k| k.name).collect();
        assert!(unclassified.is_empty(), "classify these kinds (.personal(), .business() or .internal()): {unclassified:?}");
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = all().iter().map(|k| k.name).collect();
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len());
    }

    #[test]
    fn data_model_doc_matches_the_registry() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/data-model.md")).expect("docs/data-model.md");
        assert!(
            doc.contains(&markdown_table()),
            "docs/data-model.md's table differs from domain::keys; run `cargo run -p tools --bin openapi` (it rewrites the table) \
             or paste:\n{}",
            markdown_table()
        );
    }
}
