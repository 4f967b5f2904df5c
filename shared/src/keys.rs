//! Item kinds and their keys. Every item of the table is of one [`Kind`], whose key patterns
//! (`"CONTACT#<ct id>"`) are the only place its keys are spelled: the builders fill the
//! placeholders, so the documented pattern and the stored key cannot drift apart.
//!
//! This module holds the kinds the shared mechanisms store (authentication look-ups, rate
//! buckets, idempotency records, the outbox); the areas' kinds and the registry of all of
//! them, with the tests that keep sort-key prefixes unambiguous, are in `domain::keys`.

/// One access path of a kind: a partition key and a sort key pattern. Text in `<...>` is a
/// placeholder; everything else is literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyPattern {
    pub pk: &'static str,
    pub sk: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    Table,
    Gsi1,
    Gsi2,
}

/// What a kind holds, for GDPR: every kind says (a test refuses an unclassified one), and
/// every `Personal` kind has an export and erasure rule in its area (`domain::privacy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Data {
    Unclassified,
    /// About a person (a contact, an address) or a copy of such data: exported for and erased
    /// with its subject.
    Personal,
    /// The workspace's own business data (posts, templates, settings): in a workspace export.
    Business,
    /// Bookkeeping (claims by id, counters, cells, buckets, look-ups): never exported.
    Internal,
}

#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// Singular, as in docs/data-model.md (`contact`, `email claim`).
    pub name: &'static str,
    pub table: KeyPattern,
    pub gsi1: Option<KeyPattern>,
    pub gsi2: Option<KeyPattern>,
    pub notes: &'static str,
    pub data: Data,
}

impl KeyPattern {
    pub fn pk(&self, parts: &[&str]) -> String {
        fill(self.pk, parts)
    }
    pub fn sk(&self, parts: &[&str]) -> String {
        fill(self.sk, parts)
    }
    /// The sort-key prefix of a list query: the pattern up to the placeholder after `parts`
    /// (`ACT#<ct id>#<act id>` with `["ct_1"]` is `ACT#ct_1#`).
    pub fn sk_prefix(&self, parts: &[&str]) -> String {
        debug_assert!(parts.len() < placeholders(self.sk).max(1), "a prefix leaves a placeholder open: {}", self.sk);
        let (mut out, rest) = fill_first(self.sk, parts, parts.len());
        out.push_str(literal_prefix(rest));
        out
    }
}

impl Kind {
    pub const fn on(name: &'static str, pk: &'static str, sk: &'static str, notes: &'static str) -> Self {
        Self { name, table: KeyPattern { pk, sk }, gsi1: None, gsi2: None, notes, data: Data::Unclassified }
    }
    pub const fn personal(mut self) -> Self {
        self.data = Data::Personal;
        self
    }
    pub const fn business(mut self) -> Self {
        self.data = Data::Business;
        self
    }
    pub const fn internal(mut self) -> Self {
        self.data = Data::Internal;
        self
    }
    pub const fn gsi1(mut self, pk: &'static str, sk: &'static str) -> Self {
        self.gsi1 = Some(KeyPattern { pk, sk });
        self
    }
    pub const fn gsi2(mut self, pk: &'static str, sk: &'static str) -> Self {
        self.gsi2 = Some(KeyPattern { pk, sk });
        self
    }
    pub fn pattern(&self, index: Index) -> Option<KeyPattern> {
        match index {
            Index::Table => Some(self.table),
            Index::Gsi1 => self.gsi1,
            Index::Gsi2 => self.gsi2,
        }
    }
    fn on_index(&self, index: Index) -> KeyPattern {
        self.pattern(index).unwrap_or_else(|| panic!("{} has no {index:?} key", self.name))
    }
    pub fn pk(&self, parts: &[&str]) -> String {
        self.table.pk(parts)
    }
    pub fn sk(&self, parts: &[&str]) -> String {
        self.table.sk(parts)
    }
    pub fn sk_prefix(&self, parts: &[&str]) -> String {
        self.table.sk_prefix(parts)
    }
    pub fn gsi1_pk(&self, parts: &[&str]) -> String {
        self.on_index(Index::Gsi1).pk(parts)
    }
    pub fn gsi1_sk(&self, parts: &[&str]) -> String {
        self.on_index(Index::Gsi1).sk(parts)
    }
    pub fn gsi2_pk(&self, parts: &[&str]) -> String {
        self.on_index(Index::Gsi2).pk(parts)
    }
    pub fn gsi2_sk(&self, parts: &[&str]) -> String {
        self.on_index(Index::Gsi2).sk(parts)
    }
}

/// The literal text before a pattern's first placeholder.
pub fn literal_prefix(pattern: &str) -> &str {
    pattern.split('<').next().unwrap_or_default()
}

/// How many placeholders a pattern has.
pub fn placeholders(pattern: &str) -> usize {
    pattern.matches('<').count()
}

/// Replace the placeholders in order. A missing part is a bug in the caller (panics in debug
/// builds, leaves the placeholder empty in release).
pub fn fill(pattern: &str, parts: &[&str]) -> String {
    debug_assert_eq!(placeholders(pattern), parts.len(), "parts for {pattern}");
    let (mut out, rest) = fill_first(pattern, parts, placeholders(pattern));
    out.push_str(rest);
    out
}

/// The pattern up to and including its `n`-th placeholder, filled from `parts` (missing ones
/// empty), and the rest of the pattern.
fn fill_first<'p>(pattern: &'p str, parts: &[&str], n: usize) -> (String, &'p str) {
    let mut out = String::with_capacity(pattern.len() + parts.iter().map(|p| p.len()).sum::<usize>());
    let mut rest = pattern;
    for i in 0..n {
        let Some(at) = rest.find('<') else { break };
        out.push_str(&rest[..at]);
        let part = parts.get(i).copied().unwrap_or_default();
        let (placeholder, after) = rest[at + 1..].split_once('>').unwrap_or((&rest[at + 1..], ""));
        debug_assert!(
            id_kind(placeholder).is_none_or(|kind| part.is_empty() || part.strip_prefix(kind).is_some_and(|r| r.starts_with('_'))),
            "{pattern}: <{placeholder}> given {part:?}, an id of another kind"
        );
        out.push_str(part);
        rest = after;
    }
    (out, rest)
}

/// The id prefix a placeholder names (`<ct id>`: `ct`): a key filled with an id of another
/// kind (`keys::CONTACT.sk(&[booking_id])`) fails every debug build that reaches it. Ids
/// without a prefix of their own (sessions, links, jobs, attempts) are not checked.
fn id_kind(placeholder: &str) -> Option<&str> {
    let word = placeholder.strip_suffix(" id")?;
    match word {
        "event" => Some("evt"),
        "session" | "link" | "job" | "attempt" => None,
        w if !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase()) => Some(w),
        _ => None,
    }
}

// ---------- the kinds the shared mechanisms store ----------

/// The workspace partition every area object lives in.
pub const WORKSPACE_PK: &str = "WS#<ws>";

pub fn ws_pk(workspace_id: &str) -> String {
    fill(WORKSPACE_PK, &[workspace_id])
}

pub const API_KEY: Kind = Kind::on(
    "API key (listing)",
    WORKSPACE_PK,
    "APIKEY#<key id>",
    "name, prefix, scopes, `hash`, `last_used_at` (lazy, ≤ 1 write/key/hour/container)",
)
.business();
pub const API_KEY_LOOKUP: Kind =
    Kind::on("API key (look-up)", "APIKEY#<sha256>", "APIKEY", "workspace, key id, scopes, `revoked`; authentication is one GetItem")
        .internal();
pub const MEMBER: Kind = Kind::on("member", WORKSPACE_PK, "MEMBER#<subject>", "role; GSI1 lists a subject's workspaces")
    .gsi1("MEMBERSHIP#<subject>", "<ws>")
    .business();
pub const RATE_BUCKET: Kind = Kind::on("rate-limit bucket", "RL#<ws or SUB#subject>#<class>", "RL", "GCRA `tat` (epoch ms)").internal();
pub const IDEMPOTENCY: Kind =
    Kind::on("idempotency record", WORKSPACE_PK, "IDEM#<sha256(key)>", "state, fingerprint, lease, stored response; 24 h TTL").personal();
pub const OUTBOX_EVENT: Kind =
    Kind::on("outbox event", "OUTBOX#<0..7>", "<event id>", "the event body; deleted by the consumer, re-sent by the sweep; 7 d TTL")
        .personal();
pub const OUTBOX_JOB: Kind = Kind::on(
    "outbox job",
    "OUTBOXJOB#<0..7>",
    "<queue>#<job id>",
    "a worker's job message (`queue`, `body`, `write_id`, `queued_at`, a sweep's `claimed_until`) until SQS has it: deleted after the hand-off, or sent and deleted by the sweep; 7 d TTL",
)
.internal();

pub const PORTAL_SESSION: Kind = Kind::on(
    "portal session",
    "PORTALSESSION#<sha256 of the session token>",
    "PORTALSESSION",
    "workspace, contact, `expires_at` (sliding, also the TTL), `hard_expires_at`; GSI1 lists a contact's sessions",
)
.gsi1("WS#<ws>#PSESSIONS#<ct id>", "PSESSION#<session id>")
.personal();
pub const CAPABILITY_CONFIRMATION: Kind = Kind::on(
    "capability confirmation",
    WORKSPACE_PK,
    "CAPCONF#<cc id>",
    "the approved request (capability, method, path, idempotency key, body hash, API key), `token_hash`, state issued/used, who approved and the preview they saw; 90 d TTL",
)
.personal();

pub const APPROVAL_LOOKUP: Kind = Kind::on(
    "approval look-up",
    WORKSPACE_PK,
    "APRKEY#<sha256 of key, method, path, Idempotency-Key and body hash>",
    "the approval request of one exact request of a restricted key, and once approved the confirmation it minted; expires with the request",
)
.internal();

pub const APPROVAL_REQUEST: Kind = Kind::on(
    "approval request",
    WORKSPACE_PK,
    "APPROVAL#<apr id>",
    "a restricted key's request (method, path, body hash, Idempotency-Key), the preview rendered when it was asked, the objects it depends on at their versions, state and who decided, the `approval.requested` event's body; 90 d TTL",
)
.personal();
pub const APPROVAL_DUE: Kind = Kind::on(
    "approval due entry",
    "DUE#APPROVAL#<0..7>",
    "<expiry epoch ms, 13 digits>#<ws>#<apr id>",
    "every approval request until it expires or is decided, for the sweep that announces `approval.expired`",
)
.internal();

/// The kinds of this crate, for the registry in `domain::keys`.
pub const SHARED_KINDS: &[Kind] = &[
    API_KEY,
    API_KEY_LOOKUP,
    MEMBER,
    RATE_BUCKET,
    IDEMPOTENCY,
    OUTBOX_EVENT,
    OUTBOX_JOB,
    PORTAL_SESSION,
    CAPABILITY_CONFIRMATION,
    APPROVAL_LOOKUP,
    APPROVAL_REQUEST,
    APPROVAL_DUE,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_and_prefix() {
        let k = Kind::on("x", WORKSPACE_PK, "ACT#<ct id>#<act id>", "");
        assert_eq!(k.pk(&["ws_1"]), "WS#ws_1");
        assert_eq!(k.sk(&["ct_1", "act_2"]), "ACT#ct_1#act_2");
        assert_eq!(k.sk_prefix(&[]), "ACT#");
        assert_eq!(k.sk_prefix(&["ct_1"]), "ACT#ct_1#");
        assert_eq!(fill("APIKEY", &[]), "APIKEY");
        assert_eq!(literal_prefix("<event id>"), "");
        assert_eq!(placeholders(RATE_BUCKET.table.pk), 2);
    }

    #[test]
    #[should_panic(expected = "<ct id> given \"bk_1\", an id of another kind")]
    fn a_key_of_one_kind_refuses_an_id_of_another() {
        Kind::on("x", WORKSPACE_PK, "CONTACT#<ct id>", "").sk(&["bk_1"]);
    }

    #[test]
    fn id_placeholders_name_their_prefix() {
        assert_eq!(
            (id_kind("ct id"), id_kind("event id"), id_kind("session id"), id_kind("status")),
            (Some("ct"), Some("evt"), None, None)
        );
        let k = Kind::on("x", WORKSPACE_PK, "ACT#<ct id>#<act id>", "");
        assert_eq!(k.sk(&["", "act_2"]), "ACT##act_2", "an erased id is empty");
        assert_eq!(k.sk_prefix(&[""]), "ACT##", "and so may a prefix's");
    }
}
