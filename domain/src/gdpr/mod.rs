//! GDPR: what each area holds about a person, and how it is exported and erased.
//!
//! Every item kind says in the key registry whether it holds personal data
//! (`keys::Kind::data`). Each area's domain module declares, for each of its personal kinds, a
//! [`Rule`]: how a subject's items of that kind are found, whether they go into the subject's
//! export, and how they are erased. [`rules`] collects them, and a test fails when a personal
//! kind has no rule, so a new area cannot forget its part. The export and erasure jobs
//! ([`export`], [`erasure`]) only ever run these rules.

pub mod consents;
pub mod erasure;
pub mod export;
pub mod jobs;

use crate::keys::{self, Kind, List};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use shared::ids::PrefixedId;
use shared::store::{self, Item, s, ws_pk};
use shared::{ApiError, ApiResult, App};
use utoipa::ToSchema;

shared::prefixed_id!(ExportId, "gx", "export");
shared::prefixed_id!(ErasureId, "ge", "erasure");
shared::prefixed_id!(ConsentId, "cons", "consent");

/// Whom a GDPR request is about, as the API names them.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SubjectRef {
    #[schema(format = Email, max_length = 254)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[schema(pattern = "^ct_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_id: Option<String>,
}

/// A resolved subject: the address (lower-cased), the contact when there is one, the
/// contact's search terms (their entries are keyed by them), and every identity the contact had
/// before (former addresses, phones and names, from `contacts::formers`). Kept sealed in an
/// erasure job, so a restarted erasure finds what it has not erased yet even after the contact
/// is gone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Subject {
    pub email: String,
    pub contact_id: Option<String>,
    #[serde(default)]
    pub terms: Vec<String>,
    /// Addresses the contact had before, lower-cased (not those another contact holds now).
    #[serde(default)]
    pub former_emails: Vec<String>,
    /// Phones, current first (E.164).
    #[serde(default)]
    pub phones: Vec<String>,
    /// Full names, current first, as written.
    #[serde(default)]
    pub names: Vec<String>,
}

impl Subject {
    /// A contact as a subject: their address, id, search terms, phone and name (no history:
    /// see [`with_history`]).
    pub fn of(c: &crate::contacts::Contact) -> Self {
        let name = [c.first_name.as_deref(), c.last_name.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" ");
        Subject {
            terms: crate::contacts::search_terms(c),
            email: c.email.clone(),
            contact_id: Some(c.id.clone()),
            phones: c.phone.iter().cloned().collect(),
            names: (!name.trim().is_empty()).then_some(name).into_iter().collect(),
            former_emails: vec![],
        }
    }

    /// Every address: the current one first.
    pub fn emails(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.email.as_str()).chain(self.former_emails.iter().map(String::as_str)).filter(|e| !e.is_empty())
    }

    /// The strings whose presence in an item names the subject: every address and the contact
    /// id. Not phones or names: a customer may set their phone to a prefix of other people's
    /// numbers (the portal lets them), and people share names; items found by these lose the
    /// names too (see the areas' erase functions).
    pub fn needles(&self) -> Vec<String> {
        let mut n: Vec<String> = self.emails().map(String::from).collect();
        n.extend(self.contact_id.clone());
        n
    }

    /// Does this address (or recipient entry, `Name <addr>`) name one of the subject's addresses?
    pub fn addressed(&self, entry: &str) -> bool {
        let e = entry.to_lowercase();
        self.emails().any(|a| e.contains(a))
    }

    /// Leave out the former addresses another contact holds now (one BatchGetItem of their
    /// claims): they are that contact's.
    pub async fn drop_others_addresses(&mut self, app: &App, ws: &str) -> ApiResult<()> {
        if self.former_emails.is_empty() {
            return Ok(());
        }
        let refs: Vec<&str> = self.former_emails.iter().map(String::as_str).collect();
        let owners = crate::contacts::email_owners(app, ws, &refs).await?;
        let me = self.contact_id.clone();
        self.former_emails.retain(|e| owners.get(e).is_none_or(|o| Some(o) == me.as_ref()));
        Ok(())
    }

    /// Is this item someone else's: linked to another contact and naming the subject only by a
    /// former address (which may have been another person's before or after)?
    pub fn others(&self, item: &Item) -> bool {
        let Some(owner) = store::get_str(item, "contact_id").filter(|c| !c.is_empty()) else { return false };
        if self.contact_id.as_deref() == Some(owner) {
            return false;
        }
        let current: Vec<String> = std::iter::once(self.email.clone()).chain(self.contact_id.clone()).collect();
        !mentions(item, &current)
    }
}

/// A contact as a subject with its history: the identities recorded on each change (one Query),
/// without addresses another contact holds now (one BatchGetItem of their claims).
pub async fn subject_of(app: &App, ws: &str, c: &crate::contacts::Contact) -> ApiResult<Subject> {
    let mut s = Subject::of(c);
    let formers = crate::contacts::formers(app, ws, &c.id).await?;
    let mut emails: Vec<String> = formers.iter().filter(|f| f.field == "email").map(|f| f.value.to_lowercase()).collect();
    emails.retain(|e| *e != s.email);
    emails.sort();
    emails.dedup();
    s.former_emails = emails;
    s.drop_others_addresses(app, ws).await?;
    for f in formers {
        let list = match f.field.as_str() {
            "phone" => &mut s.phones,
            "name" => &mut s.names,
            _ => continue,
        };
        if !list.contains(&f.value) {
            list.push(f.value);
        }
    }
    Ok(s)
}

/// Resolve `{email | contact_id}` (exactly one) in the workspace. An address with no contact
/// is a subject too (emails to it, consents, suppressions).
pub async fn resolve(app: &App, ws: &str, r: &SubjectRef, field: &str) -> ApiResult<Subject> {
    use crate::contacts::{self, ContactId};
    match (&r.email, &r.contact_id) {
        (Some(e), None) => {
            let email = shared::validate::normalise_email(e)
                .ok_or_else(|| ApiError::validation(&format!("{field}.email"), "not an email address"))?;
            let Some(id) = contacts::email_owner(app, ws, &email).await? else {
                return Ok(Subject { email, ..Default::default() });
            };
            let id = ContactId::parse(&id).ok_or_else(|| ApiError::internal("an email claim names a bad contact id"))?;
            subject_of(app, ws, &contacts::load(app, ws, &id).await?.0).await
        }
        (None, Some(id)) => {
            let id =
                ContactId::parse(id).ok_or_else(|| ApiError::validation(&format!("{field}.contact_id"), "not a contact id (ct_...)"))?;
            subject_of(app, ws, &contacts::load(app, ws, &id).await?.0).await
        }
        _ => Err(ApiError::validation(field, "give exactly one of email or contact_id")),
    }
}

/// How a subject's items of a kind are found.
#[derive(Clone, Copy)]
pub enum Find {
    /// One item of the workspace partition, by a sort key made from the subject.
    Key(fn(&Subject) -> Option<String>),
    /// Several items by their sort keys.
    Keys(fn(&Subject) -> Vec<String>),
    /// The items whose sort keys start with one of these (the kind's prefix and the subject's
    /// part: their contact id, each of their addresses).
    Prefixes(fn(&Subject) -> Vec<String>),
    /// A list on an index partitioned by the subject's contact (`pk` parts: workspace, contact).
    ContactIndex(List),
    /// Every item of the kind that names the address or the contact id anywhere in it: copies
    /// of data (stored responses, event bodies, deliveries) and items without an index by
    /// person. Reads the whole kind, so only background jobs use it.
    Mentions,
    /// Found and erased with the items of another kind's rule (an email's bodies with the
    /// email, an event's deliveries with the event): the parent's kind name, and the sort keys
    /// of the companions from the parent item.
    WithParent(&'static str, fn(&Item) -> Vec<String>),
    /// Erased by the parent kind's own `Erase::Custom`, which derives their keys with the
    /// platform's keys (a conversation's reply-address token).
    ErasedByParent(&'static str),
}

pub type EraseFn = for<'a> fn(&'a App, &'a str, Item, &'a Subject) -> BoxFuture<'a, ApiResult<()>>;

/// How one found item is erased.
#[derive(Clone, Copy)]
pub enum Erase {
    Delete,
    /// Remove these attributes and keep the item (a deal's value stays, its contact link goes).
    Remove(&'static [&'static str]),
    /// The area's own code (an email is cancelled if it has not left, then redacted).
    Custom(EraseFn),
}

/// One area's rule for one personal kind.
#[derive(Clone, Copy)]
pub struct Rule {
    pub kind: Kind,
    /// The export document's section.
    pub area: &'static str,
    pub find: Find,
    /// In the subject's export? (Copies such as stored responses are erased, not exported.)
    pub export: bool,
    pub erase: Erase,
}

/// The rules of every area, in the order erasures run them: the person's own records first,
/// then the copies: stored responses and outbox events (an event not yet fanned out is
/// withdrawn: its fan-out record is written empty, so a copy still queued sends nothing), and
/// last the webhook events already fanned out, so one that got out meanwhile is found too.
pub fn rules() -> Vec<Rule> {
    [
        crate::contacts::PRIVACY,
        crate::deals::PRIVACY,
        crate::emails::PRIVACY,
        crate::bookings::PRIVACY,
        crate::helpdesk::PRIVACY,
        consents::PRIVACY,
        crate::portal::PRIVACY,
        export::PRIVACY,
        PLATFORM,
        crate::webhooks::PRIVACY,
    ]
    .concat()
}

/// The shared mechanisms' copies of data: idempotent replays, outbox events, and the
/// previews people approved (the audit of a confirmation stays, what it showed goes).
const PLATFORM: &[Rule] = &[
    Rule { kind: keys::IDEMPOTENCY, area: "platform", find: Find::Mentions, export: false, erase: Erase::Delete },
    Rule {
        kind: keys::CAPABILITY_CONFIRMATION,
        area: "capability_confirmations",
        find: Find::Mentions,
        export: true,
        erase: Erase::Remove(&["preview_summary", "bound"]),
    },
    Rule {
        kind: keys::OUTBOX_EVENT,
        area: "platform",
        find: Find::Mentions,
        export: false,
        erase: Erase::Custom(|a, w, i, s| Box::pin(crate::webhooks::withdraw_event(a, w, i, s))),
    },
];

/// Attributes never exported: keys, index keys and secrets (hashes, sealed credentials).
const NOT_EXPORTED: &[&str] = &[
    "pk",
    "sk",
    "gsi1pk",
    "gsi1sk",
    "gsi2pk",
    "gsi2sk",
    "hash",
    "credentials",
    "session",
    "secrets",
    "claim_token",
    "claim_until",
    "job",
    "subject_sealed",
    "resume",
];

/// An item as its export shows it.
pub fn exported(mut item: Item) -> serde_json::Value {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    for a in NOT_EXPORTED {
        item.remove(*a);
    }
    // Bytes that are text (a signed body) read as text.
    for v in item.values_mut() {
        if let A::B(b) = v
            && let Ok(text) = std::str::from_utf8(b.as_ref())
        {
            *v = A::S(text.to_string());
        }
    }
    shared::store::item_json(item)
}

/// Does any string in the item contain one of the needles (the address case-insensitively)?
pub fn mentions(item: &Item, needles: &[String]) -> bool {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    fn walk(v: &A, needles: &[String]) -> bool {
        let hit = |text: &str| {
            let t = text.to_lowercase();
            needles.iter().any(|n| t.contains(n.as_str()))
        };
        match v {
            A::S(x) => hit(x),
            A::B(b) => hit(&String::from_utf8_lossy(b.as_ref())),
            A::Ss(l) => l.iter().any(|x| hit(x)),
            A::L(l) => l.iter().any(|x| walk(x, needles)),
            A::M(m) => m.values().any(|x| walk(x, needles)),
            _ => false,
        }
    }
    let needles: Vec<String> = needles.iter().map(|n| n.to_lowercase()).collect();
    item.values().any(|v| walk(v, &needles))
}

/// The partitions a kind's items of this workspace live in: the workspace's, or (outbox
/// events) the kind's shards, whose items carry `workspace_id`.
fn partitions(kind: &Kind, ws: &str) -> Vec<String> {
    if kind.table.pk == keys::WORKSPACE_PK {
        vec![ws_pk(ws)]
    } else if kind.name == keys::OUTBOX_EVENT.name {
        (0..shared::events::OUTBOX_SHARDS).map(|i| keys::OUTBOX_EVENT.pk(&[&i.to_string()])).collect()
    } else {
        panic!("{}: a kind outside the workspace partition needs its own find", kind.name)
    }
}

/// Where a rule's scan has got to: the partition index and the last sort key read.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Cursor {
    pub partition: usize,
    pub after: Option<String>,
}

pub const PAGE: usize = 100;

/// One page of a rule's items for the subject, and where the next page starts (None: done).
/// Every page reads O(PAGE) items; the Mentions scan of a large kind is many pages.
pub async fn page(app: &App, ws: &str, rule: &Rule, subject: &Subject, at: &Cursor) -> ApiResult<(Vec<Item>, Option<Cursor>)> {
    let pk = ws_pk(ws);
    let keyed = |sks: Vec<String>| sks.into_iter().map(|sk| (pk.clone(), sk)).collect::<Vec<_>>();
    match rule.find {
        Find::WithParent(..) | Find::ErasedByParent(_) => Ok((vec![], None)),
        Find::Key(f) => Ok((app.db.batch_get(&keyed(f(subject).into_iter().collect())).await?, None)),
        Find::Keys(f) => Ok((app.db.batch_get(&keyed(f(subject))).await?, None)),
        Find::Prefixes(f) => {
            // `partition` counts the prefixes.
            let prefixes = f(subject);
            let Some(prefix) = prefixes.get(at.partition) else { return Ok((vec![], None)) };
            let out = app.db.query_page(shared::store::QuerySpec::new(pk, prefix.clone(), at.after.clone(), PAGE)).await?;
            let next = match out.next_after {
                Some(a) => Some(Cursor { partition: at.partition, after: Some(a) }),
                None if at.partition + 1 < prefixes.len() => Some(Cursor { partition: at.partition + 1, after: None }),
                None => None,
            };
            Ok((out.items, next))
        }
        Find::ContactIndex(list) => {
            let Some(ct) = &subject.contact_id else { return Ok((vec![], None)) };
            let spec = list.query(&[ws, ct], &[], at.after.clone(), PAGE);
            let out =
                if list.index == keys::Index::Gsi2 { app.db.query_keys_then_get(spec).await? } else { app.db.query_page(spec).await? };
            Ok((out.items, out.next_after.map(|a| Cursor { partition: 0, after: Some(a) })))
        }
        Find::Mentions => {
            let parts = partitions(&rule.kind, ws);
            let Some(part) = parts.get(at.partition) else { return Ok((vec![], None)) };
            let prefix = keys::literal_prefix(rule.kind.table.sk).to_string();
            let out = app.db.query_page(shared::store::QuerySpec::new(part.clone(), prefix, at.after.clone(), PAGE)).await?;
            let needles = subject.needles();
            let own = |i: &Item| rule.kind.table.pk == keys::WORKSPACE_PK || store::get_str(i, "workspace_id") == Some(ws);
            let items = out.items.into_iter().filter(|i| own(i) && mentions(i, &needles) && !subject.others(i)).collect();
            let next = match out.next_after {
                Some(a) => Some(Cursor { partition: at.partition, after: Some(a) }),
                None if at.partition + 1 < parts.len() => Some(Cursor { partition: at.partition + 1, after: None }),
                None => None,
            };
            Ok((items, next))
        }
    }
}

/// Erase one found item as its rule says. Idempotent: an item already gone is no error.
pub async fn erase_item(app: &App, ws: &str, rule: &Rule, item: Item, subject: &Subject) -> ApiResult<()> {
    let (Some(pk), Some(sk)) = (store::get_str(&item, "pk").map(String::from), store::get_str(&item, "sk").map(String::from)) else {
        return Ok(());
    };
    let db = &app.db;
    match rule.erase {
        Erase::Delete => db.delete(&pk, &sk).await?,
        Erase::Remove(attrs) => {
            let mut u = db
                .client
                .update_item()
                .table_name(&db.table)
                .key("pk", s(pk))
                .key("sk", s(sk))
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_values(":one", store::n(1));
            let mut names = vec![];
            for (i, a) in attrs.iter().enumerate() {
                u = u.expression_attribute_names(format!("#r{i}"), *a);
                names.push(format!("#r{i}"));
            }
            // The version moves, so a concurrent edit of the old state fails instead of restoring it.
            let res = u.update_expression(format!("REMOVE {} ADD version :one", names.join(", "))).send().await;
            if let Err(e) = res
                && !e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception())
            {
                return Err(store::ddb_error(e));
            }
        }
        Erase::Custom(f) => f(app, ws, item, subject).await?,
    }
    Ok(())
}

/// The keys of a parent item's companions (in its partition).
pub fn companion_keys(child: &Rule, parent: &Item) -> Vec<(String, String)> {
    let (Find::WithParent(_, f), Some(pk)) = (child.find, store::get_str(parent, "pk")) else { return vec![] };
    f(parent).into_iter().map(|sk| (pk.to_string(), sk)).collect()
}

/// The rules whose items go with `parent`'s.
pub fn children_of(parent: &Rule) -> Vec<Rule> {
    rules().into_iter().filter(|c| matches!(c.find, Find::WithParent(p, _) if p == parent.kind.name)).collect()
}

/// An UpdateItem that sets every attribute of `item` (but the key) and removes `remove`: a
/// whole-object write that, unlike a Put, can carry a condition on reserved words.
pub fn set_all(pk: String, sk: String, mut item: Item, remove: &[&str]) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
    item.remove("pk");
    item.remove("sk");
    let mut u = aws_sdk_dynamodb::types::Update::builder().key("pk", s(pk)).key("sk", s(sk));
    let mut sets = vec![];
    for (i, (k, v)) in item.into_iter().enumerate() {
        u = u.expression_attribute_names(format!("#s{i}"), k).expression_attribute_values(format!(":s{i}"), v);
        sets.push(format!("#s{i} = :s{i}"));
    }
    let mut expr = format!("SET {}", sets.join(", "));
    if !remove.is_empty() {
        let names: Vec<String> = remove
            .iter()
            .enumerate()
            .map(|(i, r)| {
                u = std::mem::take(&mut u).expression_attribute_names(format!("#x{i}"), *r);
                format!("#x{i}")
            })
            .collect();
        expr.push_str(&format!(" REMOVE {}", names.join(", ")));
    }
    u.update_expression(expr)
}

/// The tombstone's key for an address: HMAC-SHA256 keyed per workspace, so the table names no
/// one and the same address in two workspaces gives two unrelated values.
pub async fn tombstone_sk(app: &App, ws: &str, email: &str) -> ApiResult<String> {
    let key = &app.platform_secret().await?.tombstone_key;
    Ok(keys::TOMBSTONE.sk(&[&tombstone_hash(key, ws, email)]))
}

/// Which of these addresses were erased here (one BatchGetItem of their tombstones).
pub async fn erased(app: &App, ws: &str, emails: &[&str]) -> ApiResult<std::collections::HashSet<String>> {
    if emails.is_empty() {
        return Ok(Default::default());
    }
    let owned: Vec<String> = emails.iter().map(|e| e.to_string()).collect();
    let by_sk = tombstone_keys(app, ws, &owned).await?;
    let keys: Vec<(String, String)> = by_sk.keys().map(|sk| (ws_pk(ws), sk.clone())).collect();
    let found = app.db.batch_get(&keys).await?;
    Ok(found.iter().filter_map(|i| by_sk.get(store::get_str(i, "sk")?).cloned()).collect())
}

/// The tombstone hashes of these addresses (hash -> address): the keys of their tombstones and
/// of what outlives their erasure (hashed suppressions and consents).
pub async fn address_hashes(app: &App, ws: &str, emails: &[String]) -> ApiResult<std::collections::HashMap<String, String>> {
    let key = &app.platform_secret().await?.tombstone_key;
    Ok(emails.iter().map(|e| (tombstone_hash(key, ws, e), e.clone())).collect())
}

/// The tombstone keys of these addresses, for a caller's own batch read, by sort key.
pub async fn tombstone_keys(app: &App, ws: &str, emails: &[String]) -> ApiResult<std::collections::HashMap<String, String>> {
    let key = &app.platform_secret().await?.tombstone_key;
    Ok(emails.iter().map(|e| (keys::TOMBSTONE.sk(&[&tombstone_hash(key, ws, e)]), e.clone())).collect())
}

pub const ERASED_MESSAGE: &str = "this address was erased (GDPR); it can only come back with new consent (resubscribe)";

pub fn tombstone_hash(key: &[u8], ws: &str, email: &str) -> String {
    use hmac::{KeyInit, Mac};
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("any key length");
    m.update(ws.as_bytes());
    m.update(b"\n");
    m.update(email.to_lowercase().as_bytes());
    shared::crypto::hex(&m.finalize().into_bytes())
}

pub fn due_at(received: &chrono::DateTime<chrono::Utc>) -> String {
    shared::ids::format_time(*received + chrono::Duration::days(30))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Data;

    #[test]
    fn every_personal_kind_has_exactly_one_rule_and_rules_cover_only_personal_kinds() {
        let rules = rules();
        for k in keys::all().iter().filter(|k| k.data == Data::Personal) {
            let n = rules.iter().filter(|r| r.kind.name == k.name).count();
            assert_eq!(n, 1, "{}: holds personal data, so its area needs exactly one gdpr::Rule (has {n})", k.name);
        }
        for r in &rules {
            assert_eq!(r.kind.data, Data::Personal, "{}: a rule for a kind not marked personal", r.kind.name);
            if let Find::WithParent(parent, _) = r.find {
                assert!(rules.iter().any(|p| p.kind.name == parent), "{}: parent {parent} has no rule", r.kind.name);
            }
            if let Find::ErasedByParent(parent) = r.find {
                assert!(
                    rules.iter().any(|p| p.kind.name == parent && matches!(p.erase, Erase::Custom(_))),
                    "{}: parent {parent} needs a rule with its own erase",
                    r.kind.name
                );
            }
            if matches!(r.find, Find::Mentions) {
                partitions(&r.kind, "ws_1");
            }
        }
    }

    #[test]
    fn mentions_are_found_in_nested_values_and_case_insensitively() {
        use aws_sdk_dynamodb::types::AttributeValue as A;
        let item: Item = [
            ("pk".to_string(), A::S("WS#ws_1".into())),
            ("body".to_string(), A::M([("to".to_string(), A::L(vec![A::S("Ada@Example.com".into())]))].into())),
        ]
        .into();
        assert!(mentions(&item, &["ada@example.com".into()]));
        assert!(!mentions(&item, &["bob@example.com".into(), "ct_1".into()]));
    }

    #[test]
    fn tombstones_differ_per_workspace_and_ignore_case() {
        let k = b"0123456789abcdef0123456789abcdef";
        assert_eq!(tombstone_hash(k, "ws_1", "A@x.org"), tombstone_hash(k, "ws_1", "a@x.org"));
        assert_ne!(tombstone_hash(k, "ws_1", "a@x.org"), tombstone_hash(k, "ws_2", "a@x.org"));
        assert!(!tombstone_hash(k, "ws_1", "a@x.org").contains('@'));
    }

    #[test]
    fn exports_leave_out_keys_and_secrets() {
        use aws_sdk_dynamodb::types::AttributeValue as A;
        let item: Item = [
            ("pk".to_string(), A::S("x".into())),
            ("credentials".to_string(), A::S("sealed".into())),
            ("name".to_string(), A::S("n".into())),
        ]
        .into();
        assert_eq!(exported(item), serde_json::json!({"name": "n"}));
    }
}
