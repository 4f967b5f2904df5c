//! Bookings in the table: records and keys, the cells a booking or hold takes and releases
//! in its own transaction, availability from one query per resource, the look-ups, the
//! contact a booking names, and the privacy rule.

use super::schedule;
use super::slots::{Held, Now, Window, bounds, choose, free_slots, slot_cells, taken};
use super::{
    Booking, BookingStatus, CancelledBy, ContactInput, CreateResource, Hold, Resource, Service, ServiceInput, Slot, UpdateResource,
};
use crate::contacts::Contact;
use crate::ids::{BookingId, ContactId, HoldId, ResourceId, ServiceId};
use crate::keys;
use chrono::{Duration, Utc};
use shared::auth::WorkspaceId;
use shared::error::ErrorCode;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::Tx;
use shared::store::{self as st, Item, Record, TxError, n, s, ws_pk};
use shared::validate::Errors;
use shared::{ApiError, ApiResult, App};
use std::collections::{BTreeMap, HashMap};

/// What this area holds about a person: their bookings (contact, notes, cancellation reason,
/// metadata). An erasure keeps the booking (the slot stays taken or history stays true) and
/// removes the person and every free text from it.
pub const PRIVACY: &[crate::privacy::Rule] = {
    use crate::privacy::{Erase, Find, Rule};
    &[
        Rule {
            kind: crate::keys::BOOKING.kind,
            area: "bookings",
            find: Find::Mentions,
            export: true,
            // The person and what they or staff wrote about them go; the slot and its times stay.
            erase: Erase::Remove(&["contact_id", "notes", "cancel_reason", "metadata"]),
        },
        Rule {
            kind: crate::keys::CONTACT_BOOKING.kind,
            area: "bookings",
            find: Find::Prefixes(|s| s.contact_id.iter().map(|c| crate::keys::CONTACT_BOOKING.sk_prefix_of(c)).collect()),
            export: false,
            erase: Erase::Delete,
        },
    ]
};

pub fn resource_sk(id: &ResourceId) -> String {
    keys::BOOKING_RESOURCE.sk(id)
}

pub fn service_sk(id: &ServiceId) -> String {
    keys::BOOKING_SERVICE.sk(id)
}

pub fn booking_sk(id: &BookingId) -> String {
    keys::BOOKING.sk(id)
}

pub fn hold_sk(id: &HoldId) -> String {
    keys::BOOKING_HOLD.sk(id)
}

pub async fn load_resource(app: &App, ws: &WorkspaceId, id: &ResourceId) -> ApiResult<Option<(Resource, i64)>> {
    app.db.get_object(ws, &resource_sk(id)).await
}

pub async fn load_service(app: &App, ws: &WorkspaceId, id: &ServiceId) -> ApiResult<Option<(Service, i64)>> {
    app.db.get_object(ws, &service_sk(id)).await
}

/// The resources of a service that still exist, in its order.
pub async fn resources_of(app: &App, ws: &WorkspaceId, svc: &Service) -> ApiResult<Vec<Resource>> {
    let keys: Vec<(String, String)> = svc.resource_ids.iter().map(|r| (ws_pk(ws), resource_sk(r))).collect();
    app.db.batch_get(&keys).await?.into_iter().map(st::from_item).collect()
}

/// Write a resource or service (created at version 1, or replacing `version`) with its event.
async fn save<T: serde::Serialize>(
    app: &App,
    ws: &WorkspaceId,
    sk: String,
    obj: &T,
    version: Option<i64>,
    event: EventType,
) -> ApiResult<()> {
    let rec = Record::new(ws_pk(ws), sk, obj)?;
    let tx = match version {
        Some(v) => Tx::new().replace(rec, v),
        None => Tx::new().create(rec.version(1)),
    };
    tx.event(Event::new(ws, event, obj)).commit(app).await.map_err(TxError::stale)
}

/// Delete a resource or service read at `version`, with its event.
async fn remove<T: serde::Serialize>(app: &App, ws: &WorkspaceId, sk: String, obj: &T, version: i64, event: EventType) -> ApiResult<()> {
    Tx::new().delete_versioned(ws_pk(ws), sk, version).event(Event::new(ws, event, obj)).commit(app).await.map_err(TxError::stale)
}

/// A new bookable resource (`booking.resource.created`).
pub async fn create_resource(app: &App, ws: &WorkspaceId, input: CreateResource) -> ApiResult<Resource> {
    let r = Resource::create(input, shared::ids::Timestamp::now())?;
    save(app, ws, resource_sk(&r.id), &r, None, EventType::BookingResourceCreated).await?;
    Ok(r)
}

/// Change a loaded resource (`booking.resource.updated`).
pub async fn update_resource(app: &App, ws: &WorkspaceId, r: Resource, version: i64, patch: UpdateResource) -> ApiResult<Resource> {
    let r = r.apply(patch, shared::ids::Timestamp::now())?;
    save(app, ws, resource_sk(&r.id), &r, Some(version), EventType::BookingResourceUpdated).await?;
    Ok(r)
}

/// Delete a resource: services stop offering it, its bookings stay as they are.
pub async fn delete_resource(app: &App, ws: &WorkspaceId, r: &Resource, version: i64) -> ApiResult<()> {
    remove(app, ws, resource_sk(&r.id), r, version, EventType::BookingResourceDeleted).await
}

/// Every resource a service names must be one of the workspace's.
async fn check_resources(app: &App, ws: &WorkspaceId, svc: &Service) -> ApiResult<()> {
    let found = resources_of(app, ws, svc).await?;
    let mut errs = Errors::new();
    for (i, id) in svc.resource_ids.iter().enumerate() {
        if !found.iter().any(|r| &r.id == id) {
            errs.add(format!("resource_ids[{i}]"), "no such resource in this workspace");
        }
    }
    errs.finish()
}

/// A new service (`booking.service.created`).
pub async fn create_service(app: &App, ws: &WorkspaceId, input: ServiceInput) -> ApiResult<Service> {
    let svc = Service::build(None, input, shared::ids::Timestamp::now())?;
    check_resources(app, ws, &svc).await?;
    save(app, ws, service_sk(&svc.id), &svc, None, EventType::BookingServiceCreated).await?;
    Ok(svc)
}

/// Change a loaded service (`booking.service.updated`); named resources are checked again.
pub async fn update_service(app: &App, ws: &WorkspaceId, old: Service, version: i64, input: ServiceInput) -> ApiResult<Service> {
    let changed_resources = input.resource_ids.is_some();
    let svc = Service::build(Some(&old), input, shared::ids::Timestamp::now())?;
    if changed_resources {
        check_resources(app, ws, &svc).await?;
    }
    save(app, ws, service_sk(&svc.id), &svc, Some(version), EventType::BookingServiceUpdated).await?;
    Ok(svc)
}

/// Delete a service; bookings keep their copy of it.
pub async fn delete_service(app: &App, ws: &WorkspaceId, svc: &Service, version: i64) -> ApiResult<()> {
    remove(app, ws, service_sk(&svc.id), svc, version, EventType::BookingServiceDeleted).await
}

fn cell_sk(res: &ResourceId, cell: &str, unit: u32) -> String {
    keys::BOOKING_CELL.sk((res, cell, &format!("{unit:02}")))
}

/// What holds the cells of a resource from `first` to `last` (inclusive): one Query.
async fn held_cells(app: &App, ws: &WorkspaceId, res: &ResourceId, first: &str, last: &str) -> ApiResult<HashMap<String, Vec<Held>>> {
    let prefix = keys::BOOKING_CELL.sk_prefix_of(res);
    let (lo, hi) = (format!("{prefix}{first}"), format!("{prefix}{last}#~"));
    let mut out: HashMap<String, Vec<Held>> = HashMap::new();
    for item in app.db.query_between(&ws_pk(ws), &lo, &hi, true, None).await? {
        let Some(sk) = st::get_str(&item, "sk") else { continue };
        let rest = &sk[prefix.len()..];
        let Some((cell, unit)) = rest.split_once('#') else { continue };
        out.entry(cell.to_string()).or_default().push(Held {
            unit: unit.parse().unwrap_or(0),
            holder: st::get_str(&item, "holder").unwrap_or_default().into(),
            expires_at: st::get_i64(&item, "expires_at"),
        });
    }
    Ok(out)
}

/// Who takes cells: the new holder, the holder whose cells it may take over (a hold being
/// converted, a booking being moved), the expiry of a hold's cells, and the time.
#[derive(Clone, Copy)]
struct Taker<'a> {
    ws: &'a WorkspaceId,
    res: &'a ResourceId,
    holder: &'a str,
    own: Option<&'a str>,
    expires: Option<i64>,
    now: i64,
}

/// Add the cell writes of a plan: free cells on the condition that they still are (or hold
/// an expired hold), own cells on the condition that `own` still holds them.
fn take(mut tx: Tx, k: &Taker, plan: &[(String, u32, bool)]) -> Tx {
    let Taker { ws, res, holder, own, expires, now } = *k;
    for (cell, unit, is_own) in plan {
        let mut item = Item::from([
            ("pk".to_string(), s(ws_pk(ws))),
            ("sk".to_string(), s(cell_sk(res, cell, *unit))),
            ("holder".to_string(), s(holder)),
        ]);
        if let Some(t) = expires {
            item.insert("expires_at".into(), n(t));
        }
        tx = match (is_own, own) {
            (true, Some(o)) => tx.put_if(item, "holder = :own", vec![(":own", s(o))]),
            _ => tx.put_if(item, "attribute_not_exists(pk) OR expires_at < :now", vec![(":now", n(now))]),
        };
    }
    tx
}

fn plan_keys(res: &ResourceId, plan: &[(String, u32, bool)]) -> Vec<String> {
    plan.iter().map(|(c, u, _)| cell_sk(res, c, *u)).collect()
}

/// Free starts in a window: one cell Query per resource, then [`free_slots`].
pub async fn availability(
    app: &App,
    ws: &WorkspaceId,
    svc: &Service,
    resources: &[Resource],
    w: Window,
) -> ApiResult<BTreeMap<String, Vec<Slot>>> {
    let mut held = Vec::with_capacity(resources.len());
    if let Some((lo, hi)) = bounds(svc, &w) {
        let (dur, before, after) = svc.span();
        let first = schedule::cells(lo, 0, before, 0).first().cloned().unwrap_or_default();
        let last = schedule::cells(hi, dur, 0, after).last().cloned().unwrap_or_default();
        let reads = resources.iter().map(|r| held_cells(app, ws, &r.id, &first, &last));
        held = futures_util::future::try_join_all(reads).await?;
    }
    Ok(free_slots(svc, &resources.iter().zip(held).collect::<Vec<_>>(), &w))
}

/// A hold, if it exists and has not expired. Its item carries `expires_at` as the table's TTL
/// (epoch seconds) in place of the API's RFC 3339 field.
pub async fn load_hold(app: &App, ws: &WorkspaceId, id: &HoldId) -> ApiResult<Option<Hold>> {
    let Some(mut item) = app.db.get(&ws_pk(ws), &hold_sk(id)).await? else { return Ok(None) };
    let exp = st::get_i64(&item, "expires_at").unwrap_or(0);
    if exp < Utc::now().timestamp() {
        return Ok(None);
    }
    item.insert("expires_at".into(), s(shared::ids::format_time(chrono::DateTime::from_timestamp(exp, 0).unwrap_or_default())));
    st::from_item(item).map(Some)
}

pub struct StoredBooking {
    pub booking: Booking,
    pub cells: Vec<String>,
    pub version: i64,
}

pub async fn load_booking(app: &App, ws: &WorkspaceId, id: &BookingId) -> ApiResult<Option<StoredBooking>> {
    let Some(item) = app.db.get(&ws_pk(ws), &booking_sk(id)).await? else { return Ok(None) };
    let version = st::get_i64(&item, "version").unwrap_or(0);
    let cells = match item.get("cells") {
        Some(shared::store::Value::L(l)) => l.iter().filter_map(|v| v.as_s().ok().cloned()).collect(),
        _ => vec![],
    };
    Ok(Some(StoredBooking { booking: st::from_item(item)?, cells, version }))
}

fn booking_record(ws: &WorkspaceId, b: &Booking, cells: &[String]) -> ApiResult<Record> {
    let list = shared::store::Value::L(cells.iter().map(s).collect());
    Ok(Record::new(ws_pk(ws), booking_sk(&b.id), b)?
        .gsi1(keys::BOOKING.gsi1_pk((ws, b.status.as_str())), keys::BOOKING.gsi1_sk(&b.id))
        .gsi2(keys::BOOKING.gsi2_pk(ws), keys::BOOKING.gsi2_sk((&b.start.to_string(), &b.id)))
        .attr("cells", list)
        // `start` is a reserved word in expressions: the list's time filter reads this copy.
        .attr("starts_at", s(b.start.to_string())))
}

/// The contact's entry for this booking (`CTBOOKING#<ct>#<start>#<bk>`), so a customer's
/// bookings are a prefix Query in start order, not a scan. None once an erasure removed the
/// person from the booking.
fn contact_link(ws: &WorkspaceId, b: &Booking) -> Option<Item> {
    (!b.contact_id.is_erased()).then(|| {
        Item::from([
            ("pk".into(), s(ws_pk(ws))),
            ("sk".into(), s(keys::CONTACT_BOOKING.sk((&b.contact_id, &b.start.to_string(), &b.id)))),
            ("booking_id".into(), s(&b.id)),
        ])
    })
}

/// A contact's bookings starting after `from` (upcoming, soonest first) or before it (past,
/// latest first): one page of links, then the bookings (one BatchGetItem).
pub async fn of_contact(
    app: &App,
    ws: &WorkspaceId,
    contact_id: &ContactId,
    from: &str,
    upcoming: bool,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Booking>, Option<String>)> {
    let prefix = keys::CONTACT_BOOKING.sk_prefix_of(contact_id);
    let bound = format!("{prefix}{from}");
    let (lo, hi) = if upcoming {
        (after.clone().unwrap_or(bound.clone()), format!("{prefix}\u{10ffff}"))
    } else {
        (prefix.clone(), after.clone().unwrap_or(bound.clone()))
    };
    let mut links: Vec<Item> = app.db.query_between(&ws_pk(ws), &lo, &hi, upcoming, Some(limit + 1)).await?;
    // BETWEEN is inclusive: a cursor names the last item shown.
    links.retain(|l| after.as_deref() != st::get_str(l, "sk"));
    let more = links.len() > limit;
    links.truncate(limit);
    let next = if more { links.last().and_then(|l| st::get_str(l, "sk")).map(String::from) } else { None };
    let keys: Vec<(String, String)> =
        links.iter().filter_map(|l| Some((ws_pk(ws), booking_sk(&BookingId::trusted(st::get_str(l, "booking_id")?))))).collect();
    let mut by_id: HashMap<String, Booking> = app
        .db
        .batch_get(&keys)
        .await?
        .into_iter()
        .filter_map(|i| st::from_item::<Booking>(i).ok())
        .map(|b| (b.id.to_string(), b))
        .collect();
    let list = links.iter().filter_map(|l| by_id.remove(st::get_str(l, "booking_id")?)).collect();
    Ok((list, next))
}

/// Cancel a pending or confirmed booking; a customer cannot cancel inside the service's
/// cancellation window (409). The slot is free again at once.
pub async fn cancel(app: &App, ws: &WorkspaceId, sb: &StoredBooking, by: CancelledBy, reason: Option<String>) -> ApiResult<Booking> {
    let now = Utc::now();
    let next = sb.booking.cancelled(by, reason, Timestamp::from(now))?;
    if by == CancelledBy::Customer
        && let Some((svc, _)) = load_service(app, ws, &sb.booking.service_id).await?
    {
        sb.booking.customer_may("cancel", &svc, now)?;
    }
    let next = transition(app, ws, sb, next, EventType::BookingCancelled, true).await?;
    super::notify::cancel_reminder(app, ws, &next).await;
    Ok(next)
}

/// The contact's timeline entry for a change of this booking (none once an erasure removed the
/// person from it).
fn timeline(ws: &WorkspaceId, b: &Booking, kind: &str, summary: String) -> ApiResult<Option<Item>> {
    if b.contact_id.is_erased() {
        return Ok(None);
    }
    crate::contacts::activity(ws, &b.contact_id, kind, summary, serde_json::json!({"booking_id": b.id, "start": b.start})).map(Some)
}

/// The slot a booking takes: the service, the resources that may take it (the first with room
/// wins), the hold it converts, and the first candidate's cells if they were read already.
pub struct Request<'a> {
    pub svc: &'a Service,
    pub candidates: &'a [Resource],
    pub start: Now,
    pub hold: Option<&'a Hold>,
    pub prefetched: Option<Prefetched>,
}

/// The cells held on one resource around a slot, read concurrently with the resources (before
/// it is known whether that resource fits), for the first candidate's first attempt.
pub struct Prefetched {
    res: String,
    held: HashMap<String, Vec<Held>>,
}

/// Read the cells `svc`'s slot at `start` would take on `res`.
pub async fn prefetch(app: &App, ws: &WorkspaceId, svc: &Service, res: &ResourceId, start: Now) -> ApiResult<Prefetched> {
    let (_, first, last) = slot_cells(svc, start);
    Ok(Prefetched { res: res.to_string(), held: held_cells(app, ws, res, &first, &last).await? })
}

/// How many times one booking tries again after a concurrent transaction cancelled it.
const CONTENTION_RETRIES: u32 = 5;

/// The cells held on `res` from `first` to `last`: the prefetched ones (once), or a Query.
async fn cells_now(
    app: &App,
    ws: &WorkspaceId,
    res: &ResourceId,
    (first, last): (&str, &str),
    prefetched: &mut Option<Prefetched>,
) -> ApiResult<HashMap<String, Vec<Held>>> {
    match prefetched.take() {
        Some(p) if *res == p.res => Ok(p.held),
        _ => held_cells(app, ws, res, first, last).await,
    }
}

/// Book the slot on the first candidate with room: its cells, the booking, the hold it
/// converts (deleted), a new contact (`Party::New`), the contact's timeline entry and the
/// events, in one transaction, so nothing is written unless the booking is.
pub async fn book(app: &App, ws: &WorkspaceId, req: Request<'_>, mut booking: Booking, mut party: Party) -> ApiResult<Booking> {
    let Request { svc, candidates, start, hold, mut prefetched } = req;
    let (needed, first, last) = slot_cells(svc, start);
    // Attempts a concurrent transaction on the same items cancelled, across candidates: a few
    // are tried again once it has committed; past that the answer is that conflict (409).
    let mut contended = 0u32;
    for res in candidates {
        // Reads of the cells that found them changed (a contended attempt is not one: past
        // the cap it is the answer).
        let mut tries = 0;
        while tries < 4 {
            let now = Utc::now().timestamp();
            let held = cells_now(app, ws, &res.id, (&first, &last), &mut prefetched).await?;
            let own = hold.map(|h| h.id.as_str());
            let Some(plan) = choose(&needed, &held, res.capacity, own, now) else { break };
            booking.resource_id = res.id.clone();
            booking.contact_id = party.id().clone();
            // The party's conditions first: an erased address is told so, even for a full slot.
            let (tx, guard) = party.guard(ws, Tx::new())?;
            let mut tx = take(tx, &Taker { ws, res: &res.id, holder: &booking.id, own, expires: None, now }, &plan);
            if let Some(h) = hold {
                tx = tx.delete_if(ws_pk(ws), hold_sk(&h.id), "", vec![]);
            }
            let tx = tx
                .create(booking_record(ws, &booking, &plan_keys(&res.id, &plan))?.version(1))
                .put_all(contact_link(ws, &booking))
                .put_all(timeline(ws, &booking, "booking.created", format!("Booked for {}", booking.start))?)
                .event(Event::new(ws, EventType::BookingCreated, &booking));
            match tx.commit(app).await {
                Ok(()) => return Ok(booking),
                Err(TxError::Condition(i)) if guard.names(i) => {
                    tries += 1;
                    party = party.changed(app, ws, i, &guard).await?;
                }
                // Another booking took a cell meanwhile: read the cells again.
                Err(TxError::Condition(_)) => tries += 1,
                // A concurrent transaction on the same cells or the same new address: once it
                // commits, the next attempt sees its cells or its contact.
                Err(e) if e.is_contention() && contended < CONTENTION_RETRIES => {
                    shared::store::after_contention(contended).await;
                    contended += 1;
                }
                Err(TxError::Api(e)) => return Err(e),
            }
        }
    }
    Err(taken(&booking.start))
}

/// Hold a slot for `secs`: its cells with an expiry, and the hold.
pub async fn hold(app: &App, ws: &WorkspaceId, req: Request<'_>, secs: i64) -> ApiResult<Hold> {
    let Request { svc, candidates, start, mut prefetched, .. } = req;
    let (needed, first, last) = slot_cells(svc, start);
    let id = super::HoldId::generate();
    for res in candidates {
        for _ in 0..4 {
            let now = Utc::now();
            let expires = now.timestamp() + secs;
            let held = cells_now(app, ws, &res.id, (&first, &last), &mut prefetched).await?;
            let Some(plan) = choose(&needed, &held, res.capacity, None, now.timestamp()) else { break };
            let h = Hold {
                id: id.clone(),
                object: "booking_hold".into(),
                service_id: svc.id.clone(),
                resource_id: res.id.clone(),
                start: Timestamp::from(start),
                end: Timestamp::from(start + Duration::minutes(svc.duration_minutes)),
                expires_at: Timestamp::from(now + Duration::seconds(secs)),
                created_at: Timestamp::from(now),
            };
            let tx =
                take(Tx::new(), &Taker { ws, res: &res.id, holder: &id, own: None, expires: Some(expires), now: now.timestamp() }, &plan)
                    .create(Record::new(ws_pk(ws), hold_sk(&id), &h)?.attr("expires_at", n(expires)));
            match tx.commit(app).await {
                Ok(()) => return Ok(h),
                Err(TxError::Condition(_)) => continue,
                Err(TxError::Api(e)) => return Err(e),
            }
        }
    }
    Err(taken(&Timestamp::from(start)))
}

/// A state change without time changes (`confirm`, `complete`, `no_show`, `cancel`): the
/// booking, its timeline entry and event; `release` deletes its cells in the same transaction.
pub async fn transition(
    app: &App,
    ws: &WorkspaceId,
    sb: &StoredBooking,
    next: Booking,
    event: EventType,
    release: bool,
) -> ApiResult<Booking> {
    let mut tx = Tx::new();
    if release {
        for c in &sb.cells {
            tx = tx.delete_if(ws_pk(ws), c.clone(), "holder = :me", vec![(":me", s(&sb.booking.id))]);
        }
    }
    let cells: &[String] = if release { &[] } else { &sb.cells };
    tx.replace(booking_record(ws, &next, cells)?, sb.version)
        .put_all(timeline(ws, &next, event.as_str(), format!("{} ({})", event.as_str().trim_start_matches("booking."), next.start))?)
        .event(Event::new(ws, event, &next))
        .commit(app)
        .await
        .map_err(TxError::stale)?;
    Ok(next)
}

/// Move a booking: one transaction releases the old cells, takes the new ones (cells in both
/// change holder), cancels the old booking with `rescheduled_to` and creates the new one with
/// `rescheduled_from`. If the new time is taken, nothing changes.
pub async fn reschedule(
    app: &App,
    ws: &WorkspaceId,
    svc: &Service,
    res: &Resource,
    sb: &StoredBooking,
    start: Now,
    mut prefetched: Option<Prefetched>,
) -> ApiResult<Booking> {
    let (needed, first, last) = slot_cells(svc, start);
    let old = &sb.booking;
    for _ in 0..4 {
        let now = Utc::now();
        let held = cells_now(app, ws, &res.id, (&first, &last), &mut prefetched).await?;
        let Some(plan) = choose(&needed, &held, res.capacity, Some(&old.id), now.timestamp()) else { break };
        let at = Timestamp::from(now);
        let mut new = old.clone();
        new.id = crate::ids::BookingId::generate();
        new.start = Timestamp::from(start);
        new.end = Timestamp::from(start + Duration::minutes(svc.duration_minutes));
        new.rescheduled_from = Some(old.id.clone());
        new.rescheduled_to = None;
        // The same calendar event, moved: its invites keep the first booking's UID.
        new.invite_uid = Some(old.invite_uid.clone().unwrap_or_else(|| old.id.clone()));
        new.invite_sequence = old.invite_sequence + 1;
        new.reminder_email_id = super::notify::reminder_id(svc, &new);
        new.created_at = at;
        new.updated_at = at;
        let mut moved = old.clone();
        moved.status = BookingStatus::Cancelled;
        moved.cancelled_at = Some(at);
        moved.cancelled_by = Some(CancelledBy::Staff);
        moved.cancel_reason = Some("rescheduled".into());
        moved.rescheduled_to = Some(new.id.clone());
        moved.updated_at = at;
        let new_keys = plan_keys(&res.id, &plan);
        let mut tx =
            take(Tx::new(), &Taker { ws, res: &res.id, holder: &new.id, own: Some(&old.id), expires: None, now: now.timestamp() }, &plan);
        for c in sb.cells.iter().filter(|c| !new_keys.contains(c)) {
            tx = tx.delete_if(ws_pk(ws), c.clone(), "holder = :me", vec![(":me", s(&old.id))]);
        }
        let res = tx
            .replace(booking_record(ws, &moved, &[])?, sb.version)
            .create(booking_record(ws, &new, &new_keys)?.version(1))
            .put_all(contact_link(ws, &new))
            .put_all(timeline(ws, &new, "booking.rescheduled", format!("Moved from {} to {}", old.start, new.start))?)
            .event(Event::new(ws, EventType::BookingRescheduled, &serde_json::json!({"from": moved, "to": new})))
            .commit(app)
            .await;
        match res {
            Ok(()) => return Ok(new),
            Err(TxError::Condition(_)) => {
                // The old booking itself changed: that is a stale read, not a taken slot.
                let current = load_booking(app, ws, &old.id).await?;
                if current.is_none_or(|c| c.version != sb.version) {
                    return Err(ApiError::conflict("the booking was changed concurrently; retry"));
                }
                continue;
            }
            Err(TxError::Api(e)) => return Err(e),
        }
    }
    Err(taken(&Timestamp::from(start)))
}

/// Whom a booking is for, as the request names them: a contact by id, or by address (found,
/// or created with the booking). Checked before anything is read.
pub enum PartyInput {
    Id(ContactId),
    Address(Box<Contact>),
}

impl PartyInput {
    /// Errors name the field.
    pub fn parse(contact_id: Option<ContactId>, contact: Option<&ContactInput>) -> ApiResult<PartyInput> {
        use crate::contacts as ct;
        match (contact_id, contact) {
            (Some(id), None) => Ok(PartyInput::Id(id)),
            (None, Some(c)) => {
                let (first, last) = match c.name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
                    Some(n) => match n.rsplit_once(' ') {
                        Some((f, l)) => (Some(f.to_string()), Some(l.to_string())),
                        None => (Some(n.to_string()), None),
                    },
                    None => (None, None),
                };
                let input: ct::CreateContact = serde_json::from_value(serde_json::json!({
                    "email": c.email, "first_name": first, "last_name": last, "phone": c.phone,
                }))
                .map_err(|e| ApiError::validation("contact", e.to_string()))?;
                let mut errs = Errors::new();
                let built = input.build(&mut errs);
                errs.finish().map_err(|e| e.prefixed("contact"))?;
                Ok(PartyInput::Address(Box::new(built)))
            }
            _ => Err(ApiError::validation("contact", "give exactly one of contact_id and contact")),
        }
    }

    /// One read: the contact (by id), or the address's claim.
    pub async fn resolve(self, app: &App, ws: &WorkspaceId) -> ApiResult<Party> {
        match self {
            PartyInput::Id(id) => {
                crate::contacts::load(app, ws, &id).await.map_err(|e| if e.code == ErrorCode::NotFound { no_such_contact() } else { e })?;
                Ok(Party::Existing { id, by_address: None })
            }
            PartyInput::Address(c) => Party::of_address(app, ws, c).await,
        }
    }
}

fn no_such_contact() -> ApiError {
    ApiError::validation("contact_id", "no such contact in this workspace")
}

/// Whom a booking is for, as read: a contact that exists (the booking's transaction checks it
/// still does), or a new one the transaction creates. Found or created by address, the
/// address's erasure tombstone must be absent too (`tombstone`: its key).
pub enum Party {
    Existing { id: ContactId, by_address: Option<(Box<Contact>, String)> },
    New { contact: Box<Contact>, tombstone: String },
}

/// Where the party's conditions sit in the booking's transaction.
#[derive(Default)]
pub struct Guard {
    tombstone: Option<usize>,
    exists: Option<usize>,
    claim: Option<usize>,
}

impl Guard {
    fn names(&self, i: usize) -> bool {
        [self.tombstone, self.exists, self.claim].contains(&Some(i))
    }
}

impl Party {
    /// The address's contact, or a new one.
    async fn of_address(app: &App, ws: &WorkspaceId, c: Box<Contact>) -> ApiResult<Party> {
        let (owner, tombstone) =
            tokio::try_join!(crate::contacts::email_owner(app, ws, &c.email), crate::privacy::tombstone_sk(app, ws, &c.email))?;
        Ok(match owner {
            Some(id) => Party::Existing { id: ContactId::trusted(id), by_address: Some((c, tombstone)) },
            None => Party::New { contact: c, tombstone },
        })
    }

    pub fn id(&self) -> &ContactId {
        match self {
            Party::Existing { id, .. } => id,
            Party::New { contact, .. } => &contact.id,
        }
    }

    /// The party's conditions, added to `tx`: the tombstone's first, so an erased address is
    /// told so whatever else its erasure has removed yet.
    fn guard(&self, ws: &WorkspaceId, mut tx: Tx) -> ApiResult<(Tx, Guard)> {
        let mut g = Guard::default();
        match self {
            Party::Existing { id, by_address } => {
                if let Some((_, tombstone)) = by_address {
                    g.tombstone = Some(tx.len());
                    tx = tx.check(ws_pk(ws), tombstone.clone(), "attribute_not_exists(pk)");
                }
                g.exists = Some(tx.len());
                tx = tx.check(ws_pk(ws), crate::contacts::contact_sk(id), "attribute_exists(pk)");
            }
            Party::New { contact, tombstone } => {
                let created;
                (tx, created) = crate::contacts::create_in(ws, contact, tombstone.clone(), tx)?;
                (g.tombstone, g.claim) = (Some(created.tombstone), Some(created.claim));
            }
        }
        Ok((tx, g))
    }

    /// The party's condition `i` failed: the address was erased (409); or the contact went, or
    /// another request created the address's contact first, and the address is looked up
    /// again (the booking links to that contact, or creates one).
    async fn changed(self, app: &App, ws: &WorkspaceId, i: usize, guard: &Guard) -> ApiResult<Party> {
        if guard.tombstone == Some(i) {
            return Err(ApiError::conflict(crate::privacy::ERASED_MESSAGE).with_details(vec![shared::error::ErrorDetail::field(
                "contact.email",
                "was erased; create the contact with new consent (POST /contacts with resubscribe), then book with its contact_id",
            )]));
        }
        let before = self.id().clone();
        let again = match self {
            Party::New { contact, .. } | Party::Existing { by_address: Some((contact, _)), .. } => {
                Party::of_address(app, ws, contact).await?
            }
            Party::Existing { by_address: None, .. } => return Err(no_such_contact()),
        };
        // The address still names the contact that is gone: it is being removed.
        if matches!(again, Party::Existing { .. }) && *again.id() == before {
            return Err(ApiError::conflict("the address's contact was changed concurrently; retry"));
        }
        Ok(again)
    }
}
