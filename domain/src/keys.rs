//! The key registry: every item kind of the table, with its key patterns. Areas build keys
//! only through these kinds (`keys::CONTACT.sk(&[id])`) and list through [`LISTS`], so two
//! kinds can never share a sort-key prefix in a partition without a test failing. (One did:
//! a contact's email claim `EMAIL#<address>` beside the email `EMAIL#<em id>` made the email
//! list read claims and answer 500.) `docs/data-model.md`'s table is generated from here.

pub use shared::keys::*;

pub const WORKSPACE: Kind = Kind::on("workspace", WORKSPACE_PK, "WORKSPACE", "`version` for optimistic updates").business();
pub const SLUG_CLAIM: Kind =
    Kind::on("slug claim", "SLUG#<slug>", "SLUG", "platform-wide uniqueness, written in the same transaction as the workspace").internal();
pub const POST: Kind = Kind::on("post", WORKSPACE_PK, "POST#<post id>", "GSI1 serves `?status=`, GSI2 the publisher's due query")
    .gsi1("WS#<ws>#POST#<status>", "POST#<post id>")
    .gsi2("DUE#POST", "<scheduled_at>#<ws>#<post id>")
    .business();
pub const POST_VARIANT: Kind = Kind::on(
    "post variant publication",
    WORKSPACE_PK,
    "PUBVARIANT#<post id>#<ch id>",
    "the publisher's claim (`claim_until`), attempts and outcome of one variant: the record that makes a variant publish once",
)
.business();
pub const CHANNEL: Kind =
    Kind::on("channel", WORKSPACE_PK, "CHANNEL#<ch id>", "`credentials` and `session` sealed (AES-GCM, bound to the channel); versioned")
        .business();
pub const CHANNEL_COUNT: Kind =
    Kind::on("channel count", WORKSPACE_PK, "CHCOUNT", "`channels`, updated in the create/delete transaction (cap 50)").internal();
pub const BOOKING_RESOURCE: Kind =
    Kind::on("booking resource", WORKSPACE_PK, "BRES#<res id>", "name, time zone, opening hours, exceptions, capacity; versioned")
        .business();
pub const BOOKING_SERVICE: Kind =
    Kind::on("booking service", WORKSPACE_PK, "BSVC#<svc id>", "duration, buffers, resources, notice/advance/interval rules; versioned")
        .business();
pub const BOOKING: Kind = Kind::on(
    "booking",
    WORKSPACE_PK,
    "BOOKING#<bk id>",
    "`cells`: the keys of the cells it holds, released with it; versioned; GSI1 serves `?status=`, GSI2 `order=soonest`",
)
.gsi1("WS#<ws>#BOOKING#<status>", "BOOKING#<bk id>")
.gsi2("WS#<ws>#BOOKINGSTART", "BKSTART#<start>#<bk id>")
.personal();
pub const CONTACT_BOOKING: Kind = Kind::on(
    "contact booking link",
    WORKSPACE_PK,
    "CTBOOKING#<ct id>#<start>#<bk id>",
    "`booking_id`; written with the booking: a contact's bookings in start order (the portal)",
)
.personal();
pub const BOOKING_HOLD: Kind =
    Kind::on("booking hold", WORKSPACE_PK, "BHOLD#<hold id>", "a reserved slot until `expires_at` (also the TTL)").internal();
pub const BOOKING_CELL: Kind = Kind::on(
    "booking cell",
    WORKSPACE_PK,
    "BCELL#<res id>#<UTC minute, YYYYMMDDTHHMM>#<unit, 2 digits>",
    "5 minutes of one capacity unit of a resource: `holder` (booking or hold id), `expires_at` for holds; written with its booking, conditionally: the no-overlap guarantee",
)
.internal();
pub const CONTACT: Kind =
    Kind::on("contact", WORKSPACE_PK, "CONTACT#<ct id>", "versioned").gsi1("WS#<ws>#CONTACT#<status>", "CONTACT#<ct id>").personal();
pub const CONTACT_EMAIL_CLAIM: Kind = Kind::on(
    "contact email claim",
    WORKSPACE_PK,
    "CLAIM#EMAIL#<lower-cased email>",
    "`contact_id`; the uniqueness guarantee, written with the contact",
)
.personal();
pub const CONTACT_SEARCH: Kind = Kind::on(
    "contact search entry",
    WORKSPACE_PK,
    "CSEARCH#<term>#<ct id>",
    "terms: email, \"first last\", last name (lower case); `q` is a prefix Query",
)
.personal();
pub const CONTACT_FORMER: Kind = Kind::on(
    "contact former identity",
    WORKSPACE_PK,
    "CFORMER#<ct id>#<field>#<sha256 of the lower-cased former value>",
    "an address, phone or name the contact had before a change (`field`, `value`): written with the change, so an erasure finds the person by every identity they had; a former address also by its value (GSI1), so an erasure by that address finds the contact",
)
.gsi1("WS#<ws>#CFORMERV#<sha256 of the lower-cased former address>", "CFORMER#<changed at>#<ct id>")
.personal();
pub const ACTIVITY: Kind =
    Kind::on("activity", WORKSPACE_PK, "ACT#<ct id>#<act id>", "the contact's timeline, listed newest first").personal();
pub const IMPORT_JOB: Kind =
    Kind::on("import job", WORKSPACE_PK, "IMPORT#<imp id>", "counts, status, `chunks`, `next_chunk` (progress)").business();
pub const IMPORT_ROWS: Kind =
    Kind::on("import rows", WORKSPACE_PK, "IMPROWS#<imp id>#<chunk, 5 digits>", "≤ 500 rows as JSON; 7 d TTL").personal();
pub const IMPORT_ERROR: Kind =
    Kind::on("import error", WORKSPACE_PK, "IMPERR#<imp id>#<row, 6 digits>#<n>", "row, field, message").personal();
pub const SCAN: Kind = Kind::on(
    "scan",
    WORKSPACE_PK,
    "SCAN#<scan id>",
    "url, host, status, score, grade, categories, findings, attempts; GSI1 lists a host's scans, GSI2 a status's",
)
.gsi1("WS#<ws>#SCANHOST#<host>", "SCAN#<scan id>")
.gsi2("WS#<ws>#SCANSTATUS#<status>", "SCAN#<scan id>")
.business();
pub const SCAN_HOST_SLOT: Kind = Kind::on(
    "scan host slot",
    "SCANHOST#<host>",
    "SLOT#<0..1>",
    "a scan running against this host (any workspace): scan id, `lease_until` (ms); TTL",
)
.internal();
pub const SCAN_URL_CLAIM: Kind =
    Kind::on("scan URL claim", WORKSPACE_PK, "SCANURL#<sha256 of the URL>", "the scan of this URL for 10 minutes (TTL)").internal();
pub const DEAL: Kind = Kind::on("deal", WORKSPACE_PK, "DEAL#<deal id>", "GSI2 lists a contact's deals (keys only, then BatchGetItem)")
    .gsi1("WS#<ws>#DEAL#<status>", "DEAL#<deal id>")
    .gsi2("WS#<ws>#DEALS#<ct id>", "DEAL#<deal id>")
    .personal();
pub const EMAIL: Kind = Kind::on(
    "email",
    WORKSPACE_PK,
    "EMAIL#<em id>",
    "without bodies, so lists stay small; `claim_token`/`claim_until` while the sender works on it; versioned; GSI2 while linked to a contact",
)
.gsi1("WS#<ws>#EMAIL#<status>", "EMAIL#<em id>")
.gsi2("WS#<ws>#EMAILS#<ct id>", "EMAIL#<em id>")
.personal();
pub const EMAIL_BODY: Kind = Kind::on("email bodies", WORKSPACE_PK, "EMAILBODY#<em id>", "`html`, `text` (≤ 256 KiB / 128 KiB)").personal();
pub const EMAIL_BATCH: Kind =
    Kind::on("email batch", WORKSPACE_PK, "EMAILBATCH#<eb id>", "accepted email ids in request order, rejected indexes with errors")
        .personal();
pub const EMAIL_SUPPRESSION: Kind = Kind::on(
    "email suppression",
    WORKSPACE_PK,
    "SUPPRESSION#<address>",
    "an address that bounced permanently or complained, contact or not; consulted on accept and before sending",
)
.personal();
pub const ERASED_SUPPRESSION: Kind = Kind::on(
    "erased address's suppression",
    WORKSPACE_PK,
    "HSUPPRESSION#<HMAC-SHA256 of the address, as the tombstone>",
    "`reason`: a suppression that outlives the erasure of its address, read with the tombstones when an email is accepted",
)
.internal();
pub const SENDING_DOMAIN: Kind = Kind::on(
    "sending domain",
    WORKSPACE_PK,
    "SENDDOMAIN#<dom id>",
    "name, status (`pending`/`verified`/`failed`, refreshed from SES), DKIM records; versioned",
)
.business();
pub const SENDING_DOMAIN_COUNT: Kind =
    Kind::on("sending domain count", WORKSPACE_PK, "DOMAINCOUNT", "`domains`, updated in the create/delete transaction (cap 50)")
        .internal();
pub const SENDING_DOMAIN_CLAIM: Kind = Kind::on(
    "sending domain claim",
    "SENDDOMAIN#<domain name>",
    "SENDDOMAIN",
    "`workspace_id`, `domain_id`: a domain belongs to one workspace; written with the domain",
)
.internal();
pub const EMAIL_TEMPLATE: Kind =
    Kind::on("email template", WORKSPACE_PK, "ETPL#<slug>", "base content, `variants` by locale, `required_variables`; versioned")
        .business();
pub const EMAIL_DUE: Kind = Kind::on(
    "email due entry",
    "DUE#EMAIL#<0..7>",
    "<due epoch ms, 13 digits>#<ws>#<em id>",
    "every email still to leave; `next_check` (epoch s) for the tick; deleted with the final state",
)
.internal();
pub const SES_MESSAGE: Kind =
    Kind::on("SES message look-up", "SESMSG#<provider message id>", "SESMSG", "workspace and email id, for SES notifications").internal();
pub const WEBHOOK_ENDPOINT: Kind = Kind::on(
    "webhook endpoint",
    WORKSPACE_PK,
    "WEBHOOK#<wh id>",
    "`secrets`: sealed, newest first, each with an expiry after rotation; `failing_since`, `enabled`, `disabled_reason`",
)
.business();
pub const WEBHOOK_COUNT: Kind = Kind::on(
    "endpoint count",
    WORKSPACE_PK,
    "WEBHOOKCOUNT",
    "`endpoints`, updated in the create/delete transaction: the cap of 20 holds under races",
)
.internal();
pub const WEBHOOK_DELIVERY: Kind = Kind::on(
    "webhook delivery",
    WORKSPACE_PK,
    "WHD#<wh id>#<whd id>",
    "attempts, `body` (the signed bytes), `job` (token of the one queue message that may work on it), `retries`; 30 d TTL",
)
.gsi1("WS#<ws>#WHD#<wh id>#<status>", "WHD#<wh id>#<whd id>")
.personal();
pub const FANOUT_MARKER: Kind = Kind::on(
    "webhook event",
    WORKSPACE_PK,
    "WHEVENT#<event id>",
    "one event's body (signed by every delivery of it) and the deliveries it created, so a re-sent event creates none twice (a replay's added; none when only a disabled endpoint was due it, kept for a replay); `withdrawn` and emptied by an erasure, never deleted early; TTL as deliveries, moved on by a replay",
)
.personal();

pub const WEBHOOK_REPLAY: Kind = Kind::on(
    "webhook replay",
    WORKSPACE_PK,
    "WHREPLAY#<wh id>#<whr id>",
    "a replay's window, status and progress; `cursor`: the last event record read; TTL 30 d",
)
.business();
pub const WEBHOOK_REPLAY_HOLD: Kind = Kind::on(
    "webhook replay hold",
    WORKSPACE_PK,
    "WHREPLAYHOLD#<wh id>",
    "`replay_id` of the endpoint's running replay (one at a time); deleted when it ends, else TTL 1 h",
)
.internal();
pub const CONSENT: Kind = Kind::on(
    "consent event",
    WORKSPACE_PK,
    "CONSENT#<lower-cased email>#<cons id>",
    "append-only ledger: purpose, granted, source, the text shown and its version; the current state is the newest per purpose",
)
.personal();
pub const ERASED_CONSENT: Kind = Kind::on(
    "erased address's consent event",
    WORKSPACE_PK,
    "HCONSENT#<HMAC-SHA256 of the address, as the tombstone>#<cons id>",
    "a ledger entry of an erased address without the address, contact, IP or user agent: the proof of what was granted or withdrawn stays",
)
.internal();
pub const EXPORT_JOB: Kind = Kind::on(
    "GDPR export",
    WORKSPACE_PK,
    "GDPREXPORT#<gx id>",
    "subject or workspace scope, status, progress per area; `resume`: the multipart upload, its parts and the position of the last part",
)
.personal();
pub const ERASURE: Kind = Kind::on(
    "GDPR erasure",
    WORKSPACE_PK,
    "GDPRERASURE#<ge id>",
    "the audit record: hashed subject, reason, requested by, per-area counts; the sealed subject only while it runs",
)
.business();
pub const TOMBSTONE: Kind = Kind::on(
    "erasure tombstone",
    WORKSPACE_PK,
    "TOMBSTONE#<HMAC-SHA256 of the address, keyed per workspace>",
    "an erased address may not be re-created or mailed without new consent",
)
.internal();
pub const PORTAL_LINK: Kind = Kind::on(
    "portal login link",
    "PORTALLINK#<sha256 of the link token>",
    "PORTALLINK",
    "workspace, contact, `return_url`, `expires_at` (15 min, also the TTL); deleted by its one exchange",
)
.gsi1("WS#<ws>#PLINKS#<ct id>", "PLINK#<link id>")
.personal();

pub const PORTAL_SIGN_IN: Kind = Kind::on(
    "portal sign-in attempt",
    "PORTALSIGNIN#<sha256 of the attempt token>",
    "PORTALSIGNIN",
    "workspace; when the address was a contact's: the contact, the hashes of the emailed code and of its link; guesses; `expires_at` (15 min, also the TTL); deleted by the right code",
)
.gsi1("WS#<ws>#PSIGNINS#<ct id>", "PSIGNIN#<attempt id>")
.personal();

pub const CONVERSATION: Kind = Kind::on(
    "helpdesk conversation",
    WORKSPACE_PK,
    "CONV#<conv id>",
    "versioned; GSI1 lists by last message (newest first), GSI2 by status in the same order (keys only)",
)
.gsi1("WS#<ws>#CONVS", "CLAST#<last message at>#<conv id>")
.gsi2("WS#<ws>#CONVSTATUS#<status>", "CLAST#<last message at>#<conv id>")
.personal();
pub const HELPDESK_MESSAGE: Kind =
    Kind::on("helpdesk message", WORKSPACE_PK, "HMSG#<conv id>#<hm id>", "inbound, reply (with its `email_id`) or note; oldest first")
        .personal();
pub const CONVERSATION_TOKEN: Kind = Kind::on(
    "helpdesk reply address",
    WORKSPACE_PK,
    "CONVTOKEN#<HMAC token>",
    "`conversation_id` of the reply address `mailbox+<token>@domain`",
)
.personal();
pub const MESSAGE_REF: Kind = Kind::on(
    "helpdesk Message-ID",
    WORKSPACE_PK,
    "MSGREF#<sha256 of a Message-ID>",
    "the conversation an email's Message-ID belongs to: threading and deduplication of inbound mail",
)
.personal();
pub const SNOOZE_DUE: Kind = Kind::on(
    "helpdesk snooze due entry",
    "DUE#SNOOZE#<0..3>",
    "<until epoch ms, 13 digits>#<ws>#<conv id>",
    "every snoozed conversation, for the minute tick that reopens it; written and removed with the snooze",
)
.internal();

/// Every kind the table holds, in the order docs/data-model.md lists them.
pub fn all() -> Vec<Kind> {
    let areas = [
        WORKSPACE,
        SLUG_CLAIM,
        POST,
        POST_VARIANT,
        CHANNEL,
        CHANNEL_COUNT,
        BOOKING_RESOURCE,
        BOOKING_SERVICE,
        BOOKING,
        CONTACT_BOOKING,
        BOOKING_HOLD,
        BOOKING_CELL,
        CONTACT,
        CONTACT_EMAIL_CLAIM,
        CONTACT_SEARCH,
        CONTACT_FORMER,
        ACTIVITY,
        IMPORT_JOB,
        IMPORT_ROWS,
        IMPORT_ERROR,
        DEAL,
        EMAIL,
        EMAIL_BODY,
        EMAIL_BATCH,
        EMAIL_TEMPLATE,
        EMAIL_SUPPRESSION,
        ERASED_SUPPRESSION,
        SENDING_DOMAIN,
        SENDING_DOMAIN_COUNT,
        SENDING_DOMAIN_CLAIM,
        EMAIL_DUE,
        SES_MESSAGE,
        WEBHOOK_ENDPOINT,
        WEBHOOK_COUNT,
        WEBHOOK_DELIVERY,
        FANOUT_MARKER,
        WEBHOOK_REPLAY,
        WEBHOOK_REPLAY_HOLD,
        CONSENT,
        ERASED_CONSENT,
        EXPORT_JOB,
        ERASURE,
        TOMBSTONE,
        PORTAL_LINK,
        PORTAL_SIGN_IN,
        CONVERSATION,
        HELPDESK_MESSAGE,
        CONVERSATION_TOKEN,
        MESSAGE_REF,
        SNOOZE_DUE,
        SCAN,
        SCAN_URL_CLAIM,
        SCAN_HOST_SLOT,
    ];
    SHARED_KINDS.iter().copied().chain(areas).collect()
}

/// A list query: the sort keys that begin with a prefix, within one partition of one index.
/// Every Query the areas run is one of these, so the test below can prove it reads one kind
/// only.
#[derive(Debug, Clone, Copy)]
pub struct List {
    pub kind: Kind,
    pub index: Index,
}

impl List {
    const fn of(kind: Kind, index: Index) -> Self {
        Self { kind, index }
    }
    fn pattern(&self) -> KeyPattern {
        self.kind.pattern(self.index).expect("a list's kind has a key on its index")
    }
    /// The partition to query: the index's partition key filled with `pk_parts`.
    pub fn pk(&self, pk_parts: &[&str]) -> String {
        self.pattern().pk(pk_parts)
    }
    /// The sort-key prefix, with the first `sk_parts` placeholders filled.
    pub fn prefix(&self, sk_parts: &[&str]) -> String {
        self.pattern().sk_prefix(sk_parts)
    }
    /// A query spec on this list's index.
    pub fn query(&self, pk_parts: &[&str], sk_parts: &[&str], after: Option<String>, limit: usize) -> shared::store::QuerySpec<'static> {
        self.query_partial(pk_parts, sk_parts, "", after, limit)
    }
    /// A query whose prefix also holds the start of the next placeholder's value (a search
    /// term's prefix: `CSEARCH#` + `lov` finds `CSEARCH#lovelace#ct_1`).
    pub fn query_partial(
        &self,
        pk_parts: &[&str],
        sk_parts: &[&str],
        partial: &str,
        after: Option<String>,
        limit: usize,
    ) -> shared::store::QuerySpec<'static> {
        let spec = shared::store::QuerySpec::new(self.pk(pk_parts), format!("{}{partial}", self.prefix(sk_parts)), after, limit);
        match self.index {
            Index::Table => spec,
            Index::Gsi1 => spec.on_gsi1(),
            Index::Gsi2 => spec.on_gsi2(),
        }
    }
}

pub const API_KEYS: List = List::of(API_KEY, Index::Table);
pub const CAPABILITY_CONFIRMATIONS: List = List::of(CAPABILITY_CONFIRMATION, Index::Table);
pub const APPROVAL_REQUESTS: List = List::of(APPROVAL_REQUEST, Index::Table);
pub const MEMBERS: List = List::of(MEMBER, Index::Table);
pub const MEMBERSHIPS: List = List::of(MEMBER, Index::Gsi1);
pub const POSTS: List = List::of(POST, Index::Table);
pub const POSTS_BY_STATUS: List = List::of(POST, Index::Gsi1);
pub const POST_VARIANTS: List = List::of(POST_VARIANT, Index::Table);
pub const CHANNELS: List = List::of(CHANNEL, Index::Table);
pub const BOOKING_RESOURCES: List = List::of(BOOKING_RESOURCE, Index::Table);
pub const BOOKING_SERVICES: List = List::of(BOOKING_SERVICE, Index::Table);
pub const BOOKINGS: List = List::of(BOOKING, Index::Table);
pub const BOOKINGS_BY_STATUS: List = List::of(BOOKING, Index::Gsi1);
pub const BOOKINGS_BY_START: List = List::of(BOOKING, Index::Gsi2);
pub const CONTACTS: List = List::of(CONTACT, Index::Table);
pub const CONTACTS_BY_STATUS: List = List::of(CONTACT, Index::Gsi1);
pub const CONTACT_SEARCHES: List = List::of(CONTACT_SEARCH, Index::Table);
pub const ACTIVITIES: List = List::of(ACTIVITY, Index::Table);
pub const IMPORT_ERRORS: List = List::of(IMPORT_ERROR, Index::Table);
pub const DEALS: List = List::of(DEAL, Index::Table);
pub const SCANS: List = List::of(SCAN, Index::Table);
pub const SCANS_BY_HOST: List = List::of(SCAN, Index::Gsi1);
pub const SCANS_BY_STATUS: List = List::of(SCAN, Index::Gsi2);
pub const DEALS_BY_STATUS: List = List::of(DEAL, Index::Gsi1);
pub const DEALS_OF_CONTACT: List = List::of(DEAL, Index::Gsi2);
pub const EMAILS: List = List::of(EMAIL, Index::Table);
pub const EMAILS_BY_STATUS: List = List::of(EMAIL, Index::Gsi1);
pub const EMAILS_OF_CONTACT: List = List::of(EMAIL, Index::Gsi2);
pub const EMAIL_TEMPLATES: List = List::of(EMAIL_TEMPLATE, Index::Table);
pub const EMAIL_SUPPRESSIONS: List = List::of(EMAIL_SUPPRESSION, Index::Table);
pub const SENDING_DOMAINS: List = List::of(SENDING_DOMAIN, Index::Table);
pub const EMAILS_DUE: List = List::of(EMAIL_DUE, Index::Table);
pub const WEBHOOK_ENDPOINTS: List = List::of(WEBHOOK_ENDPOINT, Index::Table);
pub const WEBHOOK_DELIVERIES: List = List::of(WEBHOOK_DELIVERY, Index::Table);
pub const WEBHOOK_DELIVERIES_BY_STATUS: List = List::of(WEBHOOK_DELIVERY, Index::Gsi1);
pub const DUE_POSTS: List = List::of(POST, Index::Gsi2);
pub const OUTBOX: List = List::of(OUTBOX_EVENT, Index::Table);
pub const OUTBOX_JOBS: List = List::of(OUTBOX_JOB, Index::Table);
pub const CONSENTS: List = List::of(CONSENT, Index::Table);
pub const ERASED_CONSENTS: List = List::of(ERASED_CONSENT, Index::Table);
pub const CONTACT_FORMERS: List = List::of(CONTACT_FORMER, Index::Table);
pub const CONTACTS_BY_FORMER_ADDRESS: List = List::of(CONTACT_FORMER, Index::Gsi1);
pub const EXPORT_JOBS: List = List::of(EXPORT_JOB, Index::Table);
pub const ERASURES: List = List::of(ERASURE, Index::Table);
pub const PORTAL_SESSIONS_OF_CONTACT: List = List::of(PORTAL_SESSION, Index::Gsi1);
pub const PORTAL_LINKS_OF_CONTACT: List = List::of(PORTAL_LINK, Index::Gsi1);
pub const PORTAL_SIGN_INS_OF_CONTACT: List = List::of(PORTAL_SIGN_IN, Index::Gsi1);
pub const CONVERSATIONS: List = List::of(CONVERSATION, Index::Gsi1);
pub const CONVERSATIONS_BY_STATUS: List = List::of(CONVERSATION, Index::Gsi2);
pub const HELPDESK_MESSAGES: List = List::of(HELPDESK_MESSAGE, Index::Table);

pub const LISTS: &[List] = &[
    API_KEYS,
    MEMBERS,
    MEMBERSHIPS,
    POSTS,
    POSTS_BY_STATUS,
    POST_VARIANTS,
    CHANNELS,
    BOOKING_RESOURCES,
    BOOKING_SERVICES,
    BOOKINGS,
    BOOKINGS_BY_STATUS,
    BOOKINGS_BY_START,
    CONTACTS,
    CONTACTS_BY_STATUS,
    CONTACT_SEARCHES,
    ACTIVITIES,
    IMPORT_ERRORS,
    DEALS,
    DEALS_BY_STATUS,
    DEALS_OF_CONTACT,
    EMAILS,
    EMAILS_BY_STATUS,
    EMAILS_OF_CONTACT,
    EMAIL_TEMPLATES,
    EMAIL_SUPPRESSIONS,
    SENDING_DOMAINS,
    EMAILS_DUE,
    WEBHOOK_ENDPOINTS,
    WEBHOOK_DELIVERIES,
    WEBHOOK_DELIVERIES_BY_STATUS,
    DUE_POSTS,
    OUTBOX,
    OUTBOX_JOBS,
    CONSENTS,
    ERASED_CONSENTS,
    CONTACT_FORMERS,
    CONTACTS_BY_FORMER_ADDRESS,
    EXPORT_JOBS,
    ERASURES,
    PORTAL_SESSIONS_OF_CONTACT,
    PORTAL_LINKS_OF_CONTACT,
    PORTAL_SIGN_INS_OF_CONTACT,
    CONVERSATIONS,
    CONVERSATIONS_BY_STATUS,
    HELPDESK_MESSAGES,
    CAPABILITY_CONFIRMATIONS,
    APPROVAL_REQUESTS,
    SCANS,
    SCANS_BY_HOST,
    SCANS_BY_STATUS,
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
        for l in LISTS {
            let p = l.kind.pattern(l.index).expect("list's kind has the index");
            let prefix = literal_prefix(p.sk);
            let matching: Vec<&str> = kinds
                .iter()
                .filter(|k| k.pattern(l.index).is_some_and(|q| same_partition(q.pk, p.pk) && may_start_with(q.sk, prefix)))
                .map(|k| k.name)
                .collect();
            assert_eq!(matching, vec![l.kind.name], "list on {:?} `{}` / `{prefix}…` reads {matching:?}", l.index, p.pk);
        }
    }

    #[test]
    fn the_old_email_collision_would_fail() {
        let claim = Kind::on("old claim", WORKSPACE_PK, "EMAIL#<address>", "");
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
