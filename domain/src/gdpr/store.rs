//! Personal data in the table: resolving a subject, every area's privacy rule in one list,
//! the partitions and pages a request walks, and erasing or exporting one item.

use super::{Cursor, PAGE, SubjectRef, export};
use crate::keys::{self, Kind};
use crate::privacy::{Erase, Find, Rule, Subject, mentions};
use shared::auth::WorkspaceId;
use shared::store::{self, Item, ws_pk};
use shared::{ApiError, ApiResult, App};

/// A contact as a subject with its history: the identities recorded on each change (one Query),
/// without addresses another contact holds now (one BatchGetItem of their claims).
pub async fn subject_of(app: &App, ws: &WorkspaceId, c: &crate::contacts::Contact) -> ApiResult<Subject> {
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
pub async fn resolve(app: &App, ws: &WorkspaceId, r: &SubjectRef, field: &str) -> ApiResult<Subject> {
    use crate::contacts::{self, ContactId};
    match (&r.email, &r.contact_id) {
        (Some(e), None) => {
            let email = shared::validate::normalise_email(e)
                .ok_or_else(|| ApiError::validation(&format!("{field}.email"), "not an email address"))?;
            if let Some(id) = contacts::email_owner(app, ws, &email).await? {
                let id = ContactId::parse(&id).ok_or_else(|| ApiError::internal("an email claim names a bad contact id"))?;
                return subject_of(app, ws, &contacts::load(app, ws, &id).await?.0).await;
            }
            // Nobody holds it now: the contact that had it before is the person it names.
            if let Some(id) = contacts::former_holder(app, ws, &email).await?
                && let Ok((c, _)) = contacts::load(app, ws, &id).await
            {
                let s = subject_of(app, ws, &c).await?;
                if s.emails().any(|e| e == email) {
                    return Ok(s);
                }
            }
            Ok(Subject { email, ..Default::default() })
        }
        (None, Some(id)) => {
            let id =
                ContactId::parse(id).ok_or_else(|| ApiError::validation(&format!("{field}.contact_id"), "not a contact id (ct_...)"))?;
            subject_of(app, ws, &contacts::load(app, ws, &id).await?.0).await
        }
        _ => Err(ApiError::validation(field, "give exactly one of email or contact_id")),
    }
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
        crate::contacts::consents::PRIVACY,
        crate::portal::PRIVACY,
        export::PRIVACY,
        PLATFORM,
        crate::webhooks::PRIVACY,
    ]
    .concat()
}

/// The shared mechanisms' copies of data: idempotent replays, outbox events, approval
/// requests, and the previews people approved (the audit of a confirmation stays, what it showed goes).
const PLATFORM: &[Rule] = &[
    Rule { kind: keys::IDEMPOTENCY.kind, area: "platform", find: Find::Mentions, export: false, erase: Erase::Delete },
    // Not exported, as approval requests below: a preview names other people too.
    Rule {
        kind: keys::CAPABILITY_CONFIRMATION.kind,
        area: "capability_confirmations",
        find: Find::Mentions,
        export: false,
        erase: Erase::Remove(&["preview_summary", "bound"]),
    },
    // What an agent asked to do to a person (the preview names them): the request and its
    // look-up go with them, so an approval of it never runs and the agent's same request asks
    // anew. Not exported: a preview names other people too (a batch's recipients), and what it
    // would do to the subject is in their export where it happened (emails, erasures).
    Rule {
        kind: keys::APPROVAL_REQUEST.kind,
        area: "approval_requests",
        find: Find::Mentions,
        export: false,
        erase: Erase::Custom(|a, w, i, _| Box::pin(crate::approvals::erase(a, w, i))),
    },
    Rule {
        kind: keys::OUTBOX_EVENT.kind,
        area: "platform",
        find: Find::Mentions,
        export: false,
        erase: Erase::Custom(|a, w, i, s| Box::pin(crate::webhooks::withdraw_event(a, w, i, s))),
    },
];

/// The partitions a kind's items of this workspace live in: the workspace's, or (outbox
/// events) the kind's shards, whose items carry `workspace_id`.
fn partitions(kind: &Kind, ws: &WorkspaceId) -> Vec<String> {
    if kind.table.pk == keys::WORKSPACE_PK {
        vec![ws_pk(ws)]
    } else if kind.name == keys::OUTBOX_EVENT.name {
        (0..shared::events::OUTBOX_SHARDS).map(|i| keys::OUTBOX_EVENT.pk(&i.to_string())).collect()
    } else {
        panic!("{}: a kind outside the workspace partition needs its own find", kind.name)
    }
}

/// One page of a rule's items for the subject, and where the next page starts (None: done).
/// Every page reads O(PAGE) items; the Mentions scan of a large kind is many pages.
pub async fn page(app: &App, ws: &WorkspaceId, rule: &Rule, subject: &Subject, at: &Cursor) -> ApiResult<(Vec<Item>, Option<Cursor>)> {
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
            let spec = list.query((ws, ct), at.after.clone(), PAGE);
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
pub async fn erase_item(app: &App, ws: &WorkspaceId, rule: &Rule, item: Item, subject: &Subject) -> ApiResult<()> {
    let (Some(pk), Some(sk)) = (store::get_str(&item, "pk").map(String::from), store::get_str(&item, "sk").map(String::from)) else {
        return Ok(());
    };
    let db = &app.db;
    match rule.erase {
        Erase::Delete => db.delete(&pk, &sk).await?,
        Erase::Remove(attrs) => {
            let names: Vec<String> = (0..attrs.len()).map(|i| format!("#r{i}")).collect();
            // The version moves, so a concurrent edit of the old state fails instead of restoring it.
            let mut u = db
                .update(pk, sk, format!("REMOVE {} ADD version :one", names.join(", ")))
                .when("attribute_exists(pk)")
                .value(":one", store::n(1));
            for (name, a) in names.iter().zip(attrs.iter()) {
                u = u.name(name, *a);
            }
            // An item gone meanwhile has nothing left to remove.
            u.apply().await?;
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

/// An UpdateItem that sets every attribute of `item` (but the key) and removes `remove`: a
/// whole-object write that, unlike a Put, can carry a condition on reserved words.
pub fn set_all(pk: String, sk: String, mut item: Item, remove: &[&str]) -> shared::store::Update {
    item.remove("pk");
    item.remove("sk");
    let (mut sets, mut names, mut values) = (vec![], vec![], vec![]);
    for (i, (k, v)) in item.into_iter().enumerate() {
        names.push((format!("#s{i}"), k));
        values.push((format!(":s{i}"), v));
        sets.push(format!("#s{i} = :s{i}"));
    }
    let mut expr = format!("SET {}", sets.join(", "));
    if !remove.is_empty() {
        let gone: Vec<String> = remove
            .iter()
            .enumerate()
            .map(|(i, r)| {
                names.push((format!("#x{i}"), r.to_string()));
                format!("#x{i}")
            })
            .collect();
        expr.push_str(&format!(" REMOVE {}", gone.join(", ")));
    }
    let mut u = shared::store::Update::new(pk, sk, expr);
    for (k, v) in names {
        u = u.name(k, v);
    }
    for (k, v) in values {
        u = u.value(k, v);
    }
    u
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
                partitions(&r.kind, &WorkspaceId::trusted("ws_1"));
            }
        }
    }
}
