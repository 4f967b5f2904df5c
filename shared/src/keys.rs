//! Item kinds and their keys. Every item of the table is of one [`Kind`], whose key patterns
//! (`"CONTACT#<ct id>"`) are the only place its keys are spelled: the builders fill the
//! placeholders, so the documented pattern and the stored key cannot drift apart, and each
//! placeholder takes one type ([`Part`]), so a key filled with the wrong kind of id does not compile.
//!
//! This module holds the kinds the shared mechanisms store (authentication look-ups, rate
//! buckets, idempotency records, the outbox); the areas' kinds and the registry of all of
//! them, with the tests that keep sort-key prefixes unambiguous, are in `domain::keys`.

use std::marker::PhantomData;

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

impl Kind {
    pub fn pattern(&self, index: Index) -> Option<KeyPattern> {
        match index {
            Index::Table => Some(self.table),
            Index::Gsi1 => self.gsi1,
            Index::Gsi2 => self.gsi2,
        }
    }
    /// The key on an index the caller's types say the kind has ([`Keys`], [`List`]): a kind
    /// without it is a bug, so it panics.
    fn key(&self, index: Index) -> KeyPattern {
        self.pattern(index).unwrap_or_else(|| panic!("{} has no {index:?} key", self.name))
    }
}

// ---------- typed parts: a key takes the kinds of id its pattern names ----------

pub use crate::ids::Part;

/// A placeholder that is not an id: a status, a slug, a hash, a padded number.
pub enum Text {}

impl Part for Text {
    const PLACEHOLDER: &'static str = "";
    type Arg<'a> = &'a str;
    fn text<'a>(arg: Self::Arg<'a>) -> &'a str {
        arg
    }
}

/// No key on this index.
pub enum Absent {}

/// The parts of one pattern, in order: `()`, one [`Part`], or a tuple of two or three.
pub trait Parts {
    const PLACEHOLDERS: &'static [&'static str];
    type Args<'a>;
    fn texts<'a>(args: Self::Args<'a>) -> [&'a str; 3];
}

impl Parts for () {
    const PLACEHOLDERS: &'static [&'static str] = &[];
    type Args<'a> = ();
    fn texts<'a>(_: ()) -> [&'a str; 3] {
        ["", "", ""]
    }
}

impl<P: Part> Parts for P {
    const PLACEHOLDERS: &'static [&'static str] = &[P::PLACEHOLDER];
    type Args<'a> = P::Arg<'a>;
    fn texts<'a>(a: P::Arg<'a>) -> [&'a str; 3] {
        [P::text(a), "", ""]
    }
}

impl<A: Part, B: Part> Parts for (A, B) {
    const PLACEHOLDERS: &'static [&'static str] = &[A::PLACEHOLDER, B::PLACEHOLDER];
    type Args<'a> = (A::Arg<'a>, B::Arg<'a>);
    fn texts<'a>((a, b): Self::Args<'a>) -> [&'a str; 3] {
        [A::text(a), B::text(b), ""]
    }
}

impl<A: Part, B: Part, C: Part> Parts for (A, B, C) {
    const PLACEHOLDERS: &'static [&'static str] = &[A::PLACEHOLDER, B::PLACEHOLDER, C::PLACEHOLDER];
    type Args<'a> = (A::Arg<'a>, B::Arg<'a>, C::Arg<'a>);
    fn texts<'a>((a, b, c): Self::Args<'a>) -> [&'a str; 3] {
        [A::text(a), B::text(b), C::text(c)]
    }
}

/// Parts of which the first can begin a prefix (`ACT#<ct id>#` of `ACT#<ct id>#<act id>`).
pub trait First {
    type Part: Part;
}
impl<A: Part, B: Part> First for (A, B) {
    type Part = A;
}
impl<A: Part, B: Part, C: Part> First for (A, B, C) {
    type Part = A;
}

/// The parts' types, carried without a value (and without owning one: `fn() -> _` keeps the
/// kinds `Send`, `Sync` and `Copy` whatever the parts are).
type Signature<Pk, Sk, G1pk, G1sk, G2pk, G2sk> = fn() -> (Pk, Sk, G1pk, G1sk, G2pk, G2sk);

/// An item kind with the types of its keys' parts: the table's partition and sort key, and
/// each index's (`Absent` where the kind has none).
pub struct Keys<Pk, Sk, G1pk = Absent, G1sk = Absent, G2pk = Absent, G2sk = Absent> {
    pub kind: Kind,
    parts: PhantomData<Signature<Pk, Sk, G1pk, G1sk, G2pk, G2sk>>,
}

impl<Pk, Sk, G1pk, G1sk, G2pk, G2sk> Clone for Keys<Pk, Sk, G1pk, G1sk, G2pk, G2sk> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Pk, Sk, G1pk, G1sk, G2pk, G2sk> Copy for Keys<Pk, Sk, G1pk, G1sk, G2pk, G2sk> {}

impl<Pk, Sk, G1pk, G1sk, G2pk, G2sk> std::ops::Deref for Keys<Pk, Sk, G1pk, G1sk, G2pk, G2sk> {
    type Target = Kind;
    fn deref(&self) -> &Kind {
        &self.kind
    }
}

impl<Pk: Parts, Sk: Parts> Keys<Pk, Sk> {
    /// A kind on the table. Fails to compile when `Pk` or `Sk` do not match the patterns.
    pub const fn on(name: &'static str, pk: &'static str, sk: &'static str, notes: &'static str) -> Self {
        fits::<Pk>(pk);
        fits::<Sk>(sk);
        Keys {
            kind: Kind { name, table: KeyPattern { pk, sk }, gsi1: None, gsi2: None, notes, data: Data::Unclassified },
            parts: PhantomData,
        }
    }
}

impl<Pk, Sk, G2pk, G2sk> Keys<Pk, Sk, Absent, Absent, G2pk, G2sk> {
    pub const fn gsi1<P: Parts, S: Parts>(self, pk: &'static str, sk: &'static str) -> Keys<Pk, Sk, P, S, G2pk, G2sk> {
        fits::<P>(pk);
        fits::<S>(sk);
        let mut kind = self.kind;
        kind.gsi1 = Some(KeyPattern { pk, sk });
        Keys { kind, parts: PhantomData }
    }
}

impl<Pk, Sk, G1pk, G1sk> Keys<Pk, Sk, G1pk, G1sk, Absent, Absent> {
    pub const fn gsi2<P: Parts, S: Parts>(self, pk: &'static str, sk: &'static str) -> Keys<Pk, Sk, G1pk, G1sk, P, S> {
        fits::<P>(pk);
        fits::<S>(sk);
        let mut kind = self.kind;
        kind.gsi2 = Some(KeyPattern { pk, sk });
        Keys { kind, parts: PhantomData }
    }
}

impl<Pk, Sk, G1pk, G1sk, G2pk, G2sk> Keys<Pk, Sk, G1pk, G1sk, G2pk, G2sk> {
    pub const fn personal(mut self) -> Self {
        self.kind.data = Data::Personal;
        self
    }
    pub const fn business(mut self) -> Self {
        self.kind.data = Data::Business;
        self
    }
    pub const fn internal(mut self) -> Self {
        self.kind.data = Data::Internal;
        self
    }
}

impl<Pk: Parts, Sk: Parts, G1pk, G1sk, G2pk, G2sk> Keys<Pk, Sk, G1pk, G1sk, G2pk, G2sk> {
    pub fn pk(&self, parts: Pk::Args<'_>) -> String {
        fill::<Pk>(self.kind.table.pk, parts)
    }
    pub fn sk(&self, parts: Sk::Args<'_>) -> String {
        fill::<Sk>(self.kind.table.sk, parts)
    }
    /// The literal start of every sort key of this kind (`CONTACT#`).
    pub fn sk_prefix(&self) -> &'static str {
        literal_prefix(self.kind.table.sk)
    }
    /// The sort-key prefix of the keys whose first part is `first` (`ACT#<ct id>#<act id>`
    /// with a contact's id is `ACT#ct_1#`).
    pub fn sk_prefix_of(&self, first: <Sk::Part as Part>::Arg<'_>) -> String
    where
        Sk: First,
    {
        prefix::<Sk::Part>(self.kind.table.sk, first)
    }
}

impl<Pk, Sk, G1pk: Parts, G1sk: Parts, G2pk, G2sk> Keys<Pk, Sk, G1pk, G1sk, G2pk, G2sk> {
    pub fn gsi1_pk(&self, parts: G1pk::Args<'_>) -> String {
        fill::<G1pk>(self.kind.key(Index::Gsi1).pk, parts)
    }
    pub fn gsi1_sk(&self, parts: G1sk::Args<'_>) -> String {
        fill::<G1sk>(self.kind.key(Index::Gsi1).sk, parts)
    }
}

impl<Pk, Sk, G1pk, G1sk, G2pk: Parts, G2sk: Parts> Keys<Pk, Sk, G1pk, G1sk, G2pk, G2sk> {
    pub fn gsi2_pk(&self, parts: G2pk::Args<'_>) -> String {
        fill::<G2pk>(self.kind.key(Index::Gsi2).pk, parts)
    }
    pub fn gsi2_sk(&self, parts: G2sk::Args<'_>) -> String {
        fill::<G2sk>(self.kind.key(Index::Gsi2).sk, parts)
    }
}

/// A list query: the sort keys that begin with a prefix, within one partition of one index.
/// Every Query the areas run is one of these, so a test in `domain::keys` can prove each reads
/// one kind only. Its queries (`query`, `query_within`, `query_partial`) are in `store`.
pub struct List<Pk, Sk> {
    pub kind: Kind,
    pub index: Index,
    parts: PhantomData<fn() -> (Pk, Sk)>,
}

impl<Pk, Sk> Clone for List<Pk, Sk> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Pk, Sk> Copy for List<Pk, Sk> {}

impl<Pk, Sk> List<Pk, Sk> {
    pub const fn table<A, B, C, D>(k: Keys<Pk, Sk, A, B, C, D>) -> Self {
        List { kind: k.kind, index: Index::Table, parts: PhantomData }
    }
    pub const fn gsi1<A, B, C, D>(k: Keys<A, B, Pk, Sk, C, D>) -> Self
    where
        Pk: Parts,
    {
        List { kind: k.kind, index: Index::Gsi1, parts: PhantomData }
    }
    pub const fn gsi2<A, B, C, D>(k: Keys<A, B, C, D, Pk, Sk>) -> Self
    where
        Pk: Parts,
    {
        List { kind: k.kind, index: Index::Gsi2, parts: PhantomData }
    }
    /// The same list for queries of whole partitions, whatever its sort keys' parts (a rule
    /// that reads every item of a contact's partition).
    pub const fn whole(self) -> List<Pk, Absent> {
        List { kind: self.kind, index: self.index, parts: PhantomData }
    }
    /// The list without its types, for the registry's tests.
    pub const fn erased(&self) -> (Kind, Index) {
        (self.kind, self.index)
    }
    fn pattern(&self) -> KeyPattern {
        self.kind.key(self.index)
    }
}

impl<Pk: Parts, Sk> List<Pk, Sk> {
    /// The partition to query.
    pub fn pk(&self, parts: Pk::Args<'_>) -> String {
        fill::<Pk>(self.pattern().pk, parts)
    }
    /// The literal start of the list's sort keys.
    pub fn prefix(&self) -> &'static str {
        literal_prefix(self.pattern().sk)
    }
    /// The sort-key prefix of the items whose first part is `first`.
    pub fn prefix_of(&self, first: <Sk::Part as Part>::Arg<'_>) -> String
    where
        Sk: First,
    {
        prefix::<Sk::Part>(self.pattern().sk, first)
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

fn fill<P: Parts>(pattern: &str, parts: P::Args<'_>) -> String {
    let texts = P::texts(parts);
    let (mut out, rest) = fill_first(pattern, &texts, P::PLACEHOLDERS.len());
    out.push_str(rest);
    out
}

fn prefix<P: Parts>(pattern: &str, parts: P::Args<'_>) -> String {
    let texts = P::texts(parts);
    let (mut out, rest) = fill_first(pattern, &texts, P::PLACEHOLDERS.len());
    out.push_str(literal_prefix(rest));
    out
}

/// The pattern up to and including its first `n` placeholders, filled from `parts`, and the
/// rest of the pattern.
fn fill_first<'p>(pattern: &'p str, parts: &[&str], n: usize) -> (String, &'p str) {
    let mut out = String::with_capacity(pattern.len() + parts.iter().map(|p| p.len()).sum::<usize>());
    let mut rest = pattern;
    for part in parts.iter().take(n) {
        let Some(at) = rest.find('<') else { break };
        out.push_str(&rest[..at]);
        out.push_str(part);
        rest = rest[at + 1..].split_once('>').map_or("", |(_, after)| after);
    }
    (out, rest)
}

// ---------- the compile-time check that a kind's parts fit its patterns ----------

/// Panics (at compile time, where a kind is declared) unless `pattern` has exactly `P`'s
/// placeholders: an id type's own (`<ct id>` for `ContactId`), or any non-id text for [`Text`].
const fn fits<P: Parts>(pattern: &str) {
    let want = P::PLACEHOLDERS;
    let b = pattern.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        if b[i] == b'<' {
            let start = i + 1;
            while i < b.len() && b[i] != b'>' {
                i += 1;
            }
            assert!(n < want.len(), "a key pattern has more placeholders than its kind's parts");
            let placeholder = pattern.split_at(i).0.split_at(start).1;
            assert!(fills(want[n], placeholder), "a kind's part does not fill its key pattern's placeholder");
            n += 1;
        }
        i += 1;
    }
    assert!(n == want.len(), "a key pattern has fewer placeholders than its kind's parts");
}

/// Whether a part declared as `want` (an id type's placeholder, or `""` for text) fills `placeholder`.
const fn fills(want: &str, placeholder: &str) -> bool {
    if want.is_empty() { !is_id(placeholder) } else { eq(want.as_bytes(), placeholder.as_bytes()) }
}

/// `<ct id>`, `<ws>`: a placeholder only an id type fills. Ids without a type of their own
/// (sessions, links, jobs, attempts: random, never named by a request) are text.
const fn is_id(placeholder: &str) -> bool {
    let p = placeholder.as_bytes();
    if eq(p, b"ws") {
        return true;
    }
    let untyped: [&[u8]; 4] = [b"session id", b"link id", b"job id", b"attempt id"];
    let mut u = 0;
    while u < untyped.len() {
        if eq(p, untyped[u]) {
            return false;
        }
        u += 1;
    }
    // one lower-case word and " id"
    if p.len() < 4 || !eq(p.split_at(p.len() - 3).1, b" id") {
        return false;
    }
    let mut i = 0;
    while i < p.len() - 3 {
        if !p[i].is_ascii_lowercase() {
            return false;
        }
        i += 1;
    }
    true
}

const fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

// ---------- the kinds the shared mechanisms store ----------

use crate::ids::{ApiKeyId, ApprovalRequestId, ConfirmationId, ContactId, EventId, WorkspaceId};

/// The workspace partition every area object lives in.
pub const WORKSPACE_PK: &str = "WS#<ws>";

pub fn ws_pk(workspace_id: &WorkspaceId) -> String {
    fill::<WorkspaceId>(WORKSPACE_PK, workspace_id)
}

pub const API_KEY: Keys<WorkspaceId, ApiKeyId> = Keys::on(
    "API key (listing)",
    WORKSPACE_PK,
    "APIKEY#<key id>",
    "name, prefix, scopes, `hash`, `last_used_at` (lazy, ≤ 1 write/key/hour/container)",
)
.business();
pub const API_KEY_LOOKUP: Keys<Text, ()> =
    Keys::on("API key (look-up)", "APIKEY#<sha256>", "APIKEY", "workspace, key id, scopes, `revoked`; authentication is one GetItem")
        .internal();
pub const MEMBER: Keys<WorkspaceId, Text, Text, WorkspaceId> =
    Keys::on("member", WORKSPACE_PK, "MEMBER#<subject>", "role; GSI1 lists a subject's workspaces")
        .gsi1("MEMBERSHIP#<subject>", "<ws>")
        .business();
pub const RATE_BUCKET: Keys<(Text, Text), ()> =
    Keys::on("rate-limit bucket", "RL#<ws or SUB#subject>#<class>", "RL", "GCRA `tat` (epoch ms)").internal();
pub const IDEMPOTENCY: Keys<WorkspaceId, Text> =
    Keys::on("idempotency record", WORKSPACE_PK, "IDEM#<sha256(key)>", "state, fingerprint, lease, stored response; 24 h TTL").personal();
pub const OUTBOX_EVENT: Keys<Text, EventId> =
    Keys::on("outbox event", "OUTBOX#<0..7>", "<evt id>", "the event body; deleted by the consumer, re-sent by the sweep; 7 d TTL")
        .personal();
pub const OUTBOX_JOB: Keys<Text, (Text, Text)> = Keys::on(
    "outbox job",
    "OUTBOXJOB#<0..7>",
    "<queue>#<job id>",
    "a worker's job message (`queue`, `body`, `write_id`, `queued_at`, a sweep's `claimed_until`) until SQS has it: deleted after the hand-off, or sent and deleted by the sweep; 7 d TTL",
)
.internal();

pub const PORTAL_SESSION: Keys<Text, (), (WorkspaceId, ContactId), Text> = Keys::on(
    "portal session",
    "PORTALSESSION#<sha256 of the session token>",
    "PORTALSESSION",
    "workspace, contact, `expires_at` (sliding, also the TTL), `hard_expires_at`; GSI1 lists a contact's sessions",
)
.gsi1("WS#<ws>#PSESSIONS#<ct id>", "PSESSION#<session id>")
.personal();
pub const CAPABILITY_CONFIRMATION: Keys<WorkspaceId, ConfirmationId> = Keys::on(
    "capability confirmation",
    WORKSPACE_PK,
    "CAPCONF#<cc id>",
    "the approved request (capability, method, path, idempotency key, body hash, API key), `token_hash`, state issued/used, who approved and the preview they saw; 90 d TTL",
)
.personal();

pub const APPROVAL_LOOKUP: Keys<WorkspaceId, Text> = Keys::on(
    "approval look-up",
    WORKSPACE_PK,
    "APRKEY#<sha256 of key, method, path, Idempotency-Key and body hash>",
    "the approval request of one exact request of a restricted key, and once approved the confirmation it minted; expires with the request",
)
.internal();

pub const APPROVAL_REQUEST: Keys<WorkspaceId, ApprovalRequestId> = Keys::on(
    "approval request",
    WORKSPACE_PK,
    "APPROVAL#<apr id>",
    "a restricted key's request (method, path, body hash, Idempotency-Key), the preview rendered when it was asked, the objects it depends on at their versions, state and who decided, the `approval.requested` event's body; 90 d TTL",
)
.personal();
pub const APPROVAL_DUE: Keys<Text, (Text, WorkspaceId, ApprovalRequestId)> = Keys::on(
    "approval due entry",
    "DUE#APPROVAL#<0..7>",
    "<expiry epoch ms, 13 digits>#<ws>#<apr id>",
    "every approval request until it expires or is decided, for the sweep that announces `approval.expired`",
)
.internal();

/// The kinds of this crate, for the registry in `domain::keys`.
pub const SHARED_KINDS: &[Kind] = &[
    API_KEY.kind,
    API_KEY_LOOKUP.kind,
    MEMBER.kind,
    RATE_BUCKET.kind,
    IDEMPOTENCY.kind,
    OUTBOX_EVENT.kind,
    OUTBOX_JOB.kind,
    PORTAL_SESSION.kind,
    CAPABILITY_CONFIRMATION.kind,
    APPROVAL_LOOKUP.kind,
    APPROVAL_REQUEST.kind,
    APPROVAL_DUE.kind,
];

#[cfg(test)]
mod tests {
    use super::*;

    const ACT: Keys<WorkspaceId, (ContactId, Text)> = Keys::on("x", WORKSPACE_PK, "ACT#<ct id>#<n>", "");

    #[test]
    fn fill_and_prefix() {
        let (ws, ct) = (WorkspaceId::trusted("ws_1"), ContactId::trusted("ct_1"));
        assert_eq!(ACT.pk(&ws), "WS#ws_1");
        assert_eq!(ACT.sk((&ct, "2")), "ACT#ct_1#2");
        assert_eq!(ACT.sk_prefix(), "ACT#");
        assert_eq!(ACT.sk_prefix_of(&ct), "ACT#ct_1#");
        assert_eq!(API_KEY_LOOKUP.sk(()), "APIKEY");
        assert_eq!(literal_prefix(OUTBOX_EVENT.table.sk), "");
        assert_eq!(placeholders(RATE_BUCKET.table.pk), 2);
        assert_eq!(ACT.sk((&ContactId::erased(), "2")), "ACT##2", "an erased id is empty");
    }

    #[test]
    fn parts_fit_only_their_placeholders() {
        assert!(fills(ContactId::PLACEHOLDER, "ct id") && fills(WorkspaceId::PLACEHOLDER, "ws"));
        assert!(!fills(ContactId::PLACEHOLDER, "bk id"), "an id of another kind");
        assert!(!fills(Text::PLACEHOLDER, "ct id") && !fills(Text::PLACEHOLDER, "ws"), "text where an id belongs");
        for text in ["status", "session id", "link id", "provider message id", "ws or SUB#subject", "sha256 of the URL"] {
            assert!(fills(Text::PLACEHOLDER, text), "{text}");
        }
    }

    /// What a kind declared with the wrong parts hits at compile time.
    #[test]
    #[should_panic(expected = "does not fill")]
    fn a_kind_with_the_wrong_parts_is_refused() {
        fits::<ContactId>(std::hint::black_box("CONTACT#<bk id>"));
    }

    #[test]
    #[should_panic(expected = "fewer placeholders")]
    fn a_kind_with_too_many_parts_is_refused() {
        fits::<(ContactId, Text)>(std::hint::black_box("CONTACT#<ct id>"));
    }
}
