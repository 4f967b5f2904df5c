//! The transactional outbox: how state changes and their events leave together.
//!
//! A state change and its event are written in one DynamoDB transaction ([`Tx`]): the event
//! lands as an outbox item (`pk = OUTBOX#<shard>`, `sk = <evt id>`). After the commit the
//! event is sent to the events queue. The consumer (the webhook dispatcher) deletes the outbox
//! item once it has the event ([`ack`]), and a scheduled [`sweep`] re-sends outbox items older
//! than a few minutes, so an event survives SQS being unreachable during the write. Keeping
//! the acknowledgement off the request path saves one DynamoDB round trip per write.
//!
//! A worker's job travels the same way ([`Tx::job`]): the job and its queue message are one
//! transaction (`pk = OUTBOXJOB#<shard>`, `sk = <queue>#<job id>`). After the commit the
//! message is handed to its queue and, once SQS has it, the item is deleted; the sweep sends
//! what was not handed off (SQS refused or did not answer) and deletes it then. A queue that
//! refuses or hangs while an export, an erasure, a scan or an import is accepted thereby costs
//! the job a delay, not the job, and a job whose message reached SQS gets no copy from here.

use crate::app::App;
use crate::error::ApiError;
use crate::events::{Event, OUTBOX_SHARDS};
use crate::store::{Item, Record, TxError, ddb_error, get_str, n, s};
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem};
use serde::Serialize;

/// Several writes and their events, committed atomically, then the events are queued. Built
/// as a plain value (no I/O, no table name) and sent by [`Tx::commit`].
#[derive(Default, Clone)]
pub struct Tx {
    ops: Vec<Op>,
    events: Vec<Event>,
    /// (queue, job id, body, the item's token)
    jobs: Vec<(WorkQueue, String, String, String)>,
    /// Committed without the request's witness: see [`Tx::repeatable`].
    repeatable: bool,
}

/// The work queues whose jobs travel through the outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkQueue {
    ContactImports,
    Gdpr,
    Scans,
}

impl WorkQueue {
    const ALL: [Self; 3] = [Self::ContactImports, Self::Gdpr, Self::Scans];

    /// As the outbox item spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::ContactImports => "contact-imports",
            Self::Gdpr => "gdpr",
            Self::Scans => "scans",
        }
    }

    fn url(self, cfg: &crate::config::Config) -> &str {
        match self {
            Self::ContactImports => &cfg.contact_imports_queue_url,
            Self::Gdpr => &cfg.gdpr_queue_url,
            Self::Scans => &cfg.scans_queue_url,
        }
    }

    fn item_key(self, job_id: &str) -> (String, String) {
        use crate::keys::OUTBOX_JOB;
        (OUTBOX_JOB.pk(&crate::events::outbox_shard(job_id).to_string()), OUTBOX_JOB.sk((self.name(), job_id)))
    }
}

type Values = Vec<(String, AttributeValue)>;
type Names = Vec<(String, String)>;

#[derive(Clone)]
enum Op {
    Put { item: Item, cond: Option<(String, Values)>, names: Names },
    Delete { pk: String, sk: String, cond: Option<(String, Values)> },
    Check { pk: String, sk: String, cond: String, values: Values },
    Update(crate::store::Update),
}

fn owned(vals: Vec<(&str, AttributeValue)>) -> Values {
    vals.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

impl Tx {
    pub fn new() -> Self {
        Self::default()
    }

    fn op(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    /// A transaction a rerun of the same request repeats harmlessly (its puts conditional on
    /// their keys being new, under ids derived from the request's key): committed without the
    /// witness, so a request that fails after it keeps its key resumable
    /// (`idempotency::before_resumable_writes`, which must come first).
    pub fn repeatable(mut self) -> Self {
        self.repeatable = true;
        self
    }

    /// Create: fails the condition if the key exists.
    pub fn create(self, rec: Record) -> Self {
        self.op(Op::Put { item: rec.item, cond: Some(("attribute_not_exists(pk)".into(), vec![])), names: vec![] })
    }

    /// Replace an object read at `version`; the stored version becomes `version + 1`.
    pub fn replace(self, rec: Record, version: i64) -> Self {
        let item = rec.version(version + 1).item;
        self.op(Op::Put {
            item,
            cond: Some(("version = :expected_version".into(), vec![(":expected_version".into(), n(version))])),
            names: vec![],
        })
    }

    /// Unconditional put (upsert).
    pub fn put(self, item: Item) -> Self {
        self.op(Op::Put { item, cond: None, names: vec![] })
    }

    /// Unconditional puts of each item (none for an empty `Option` or list).
    pub fn put_all(self, items: impl IntoIterator<Item = Item>) -> Self {
        items.into_iter().fold(self, Self::put)
    }

    pub fn put_if(self, item: Item, cond: &str, vals: Vec<(&str, AttributeValue)>) -> Self {
        self.put_if_named(item, cond, &[], vals)
    }

    /// A conditional put whose condition names attributes through `#placeholders` (for
    /// reserved words such as `state`).
    pub fn put_if_named(self, item: Item, cond: &str, names: &[(&str, &str)], vals: Vec<(&str, AttributeValue)>) -> Self {
        let names = names.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.op(Op::Put { item, cond: Some((cond.into(), owned(vals))), names })
    }

    /// Delete an object read at `version`.
    pub fn delete_versioned(self, pk: String, sk: String, version: i64) -> Self {
        self.delete_if(pk, sk, "version = :expected_version", vec![(":expected_version", n(version))])
    }

    /// Delete, on a condition (an empty one deletes unconditionally).
    pub fn delete_if(self, pk: String, sk: String, cond: &str, vals: Vec<(&str, AttributeValue)>) -> Self {
        let cond = (!cond.is_empty()).then(|| (cond.to_string(), owned(vals)));
        self.op(Op::Delete { pk, sk, cond })
    }

    /// A condition on an item this transaction does not write (e.g. "the contact exists").
    pub fn check(self, pk: String, sk: String, cond: &str) -> Self {
        self.check_if(pk, sk, cond, vec![])
    }

    /// A condition with values on an item this transaction does not write (e.g. "still at
    /// the version a person approved").
    pub fn check_if(self, pk: String, sk: String, cond: &str, vals: Vec<(&str, AttributeValue)>) -> Self {
        self.op(Op::Check { pk, sk, cond: cond.into(), values: owned(vals) })
    }

    /// An update expression (key, expression and values set; the table is added on commit).
    pub fn update(self, u: crate::store::Update) -> Self {
        self.op(Op::Update(u))
    }

    /// The event of this change: written as an outbox item in the same transaction.
    pub fn event(mut self, ev: Event) -> Self {
        self.ops.push(Op::Put { item: ev.outbox_item(), cond: None, names: vec![] });
        self.events.push(ev);
        self
    }

    /// A job for a worker: its queue message is written with this transaction and handed to
    /// the queue after the commit; the sweep sends it if that fails. `job_id` names the job
    /// within its queue; workers drop copies (a hand-off whose answer was lost makes one).
    pub fn job(mut self, queue: WorkQueue, job_id: &str, body: String) -> Self {
        let (item, token) = job_item(queue, job_id, &body);
        self.ops.push(Op::Put { item, cond: None, names: vec![] });
        self.jobs.push((queue, job_id.to_string(), body, token));
        self
    }

    /// How many writes so far (a transaction holds at most 100).
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    fn build(op: Op, table: &str) -> Result<TransactWriteItem, ApiError> {
        let values = |b: Option<(String, Values)>| b.map(|(c, v)| (Some(c), Some(v.into_iter().collect()))).unwrap_or((None, None));
        let w = TransactWriteItem::builder();
        Ok(match op {
            Op::Put { item, cond, names } => {
                let (c, v) = values(cond);
                let names = (!names.is_empty()).then(|| names.into_iter().collect());
                let p =
                    Put::builder().table_name(table).set_item(Some(item)).set_condition_expression(c).set_expression_attribute_names(names);
                w.put(
                    p.set_expression_attribute_values(v.filter(|v: &std::collections::HashMap<_, _>| !v.is_empty()))
                        .build()
                        .map_err(|e| ApiError::internal(e))?,
                )
            }
            Op::Delete { pk, sk, cond } => {
                let (c, v) = values(cond);
                let d = Delete::builder().table_name(table).key("pk", s(pk)).key("sk", s(sk)).set_condition_expression(c);
                w.delete(
                    d.set_expression_attribute_values(v.filter(|v: &std::collections::HashMap<_, _>| !v.is_empty()))
                        .build()
                        .map_err(|e| ApiError::internal(e))?,
                )
            }
            Op::Check { pk, sk, cond, values } => w.condition_check(
                ConditionCheck::builder()
                    .table_name(table)
                    .key("pk", s(pk))
                    .key("sk", s(sk))
                    .condition_expression(cond)
                    .set_expression_attribute_values((!values.is_empty()).then(|| values.into_iter().collect()))
                    .build()
                    .map_err(|e| ApiError::internal(e))?,
            ),
            Op::Update(u) => w.update(u.into_sdk().table_name(table).build().map_err(|e| ApiError::internal(e))?),
        }
        .build())
    }

    /// Commit the writes atomically, then queue the events. A failed condition is
    /// `TxError::Condition(i)`, `i` counting the writes in the order they were added.
    pub async fn commit(self, app: &App) -> Result<(), TxError> {
        // IAM authorises a transaction per item: record what each write needs.
        for op in &self.ops {
            let action = match op {
                Op::Put { .. } => "dynamodb:PutItem",
                Op::Delete { .. } => "dynamodb:DeleteItem",
                Op::Check { .. } => "dynamodb:ConditionCheckItem",
                Op::Update(_) => "dynamodb:UpdateItem",
            };
            crate::metrics::record_call(action, "Table");
        }
        let repeatable = self.repeatable;
        let items = self.ops.into_iter().map(|op| Self::build(op, &app.db.table)).collect::<Result<Vec<_>, _>>()?;
        // A request with an Idempotency-Key has its transactions witnessed (one more write,
        // no more round trips): a lost answer is then read back rather than guessed.
        match crate::idempotency::Witness::current().filter(|_| !items.is_empty() && !repeatable) {
            Some(w) if items.len() < 100 => w.commit(&app.db, items).await?,
            witness => {
                if let Some(w) = witness {
                    // No room for the witness's write: the key is marked written first.
                    w.before_plain_writes(&app.db).await?;
                }
                app.db.transact(items).await?
            }
        }
        publish(app, &self.events).await;
        for (queue, job_id, body, token) in &self.jobs {
            if let Err(e) = app.hand_off(queue.url(&app.cfg), body, 0).await {
                // The rest too, as `publish` does: one slow queue costs a request one hand-off.
                tracing::warn!(queue = queue.name(), error = %e, "job not queued; left in the outbox for the sweep");
                break;
            }
            // SQS has it. Only this item (a worker may have parked the job again meanwhile).
            // Best effort: a job left here is sent again by the sweep, and dropped as a copy.
            let (pk, sk) = queue.item_key(job_id);
            if let Err(e) = app.db.delete_when(pk, sk, "write_id = :write_id").value(":write_id", s(token)).apply().await {
                tracing::warn!(queue = queue.name(), error = %e, "queued job's outbox item not deleted");
            }
        }
        Ok(())
    }
}

/// A job's outbox item, and its token (which write of the item it is).
fn job_item(queue: WorkQueue, job_id: &str, body: &str) -> (Item, String) {
    let (pk, sk) = queue.item_key(job_id);
    let now = chrono::Utc::now().timestamp();
    let token = ulid::Ulid::generate().to_string();
    let item = Item::from([
        ("pk".into(), s(pk)),
        ("sk".into(), s(sk)),
        ("queue".into(), s(queue.name())),
        ("body".into(), s(body)),
        ("write_id".into(), s(&token)),
        ("queued_at".into(), n(now)),
        ("expires_at".into(), n(now + crate::events::OUTBOX_TTL_SECS)),
    ]);
    (item, token)
}

/// Leave a job for the sweep to send: a worker that must queue its job again and finds the
/// queue refusing parks it here, rather than in a message that may end in the DLQ.
pub async fn park(app: &App, queue: WorkQueue, job_id: &str, body: &str) -> Result<(), ApiError> {
    Tx::new().put(job_item(queue, job_id, body).0).commit(app).await.map_err(TxError::stale)
}

/// SQS allows 256 KiB per message; leave room for attributes and escaping.
const BATCH_MESSAGE_BYTES: usize = 200 * 1024;

/// Send committed events to the queue: one message for one event, packed batches for many. A
/// failure is logged, not returned: the write has happened and the outbox sweep will deliver
/// the event later.
pub async fn publish(app: &App, events: &[Event]) {
    let mut bodies: Vec<(String, usize)> = vec![];
    if let [ev] = events {
        bodies.push((ev.body(), 1));
    } else {
        let mut current: Vec<&Event> = vec![];
        let mut size = 0;
        for ev in events {
            let len = ev.body().len() + 1;
            if !current.is_empty() && size + len > BATCH_MESSAGE_BYTES {
                bodies.push((batch_body(&current), current.len()));
                current.clear();
                size = 0;
            }
            size += len;
            current.push(ev);
        }
        if !current.is_empty() {
            bodies.push((batch_body(&current), current.len()));
        }
    }
    for (body, count) in bodies {
        match app.hand_off(&app.cfg.events_queue_url, &body, 0).await {
            Ok(()) => tracing::info!(count, first_event = %events.first().map(|e| e.id.as_str()).unwrap_or_default(), "events queued"),
            // The rest too: one slow queue must not cost a request a hand-off per batch.
            Err(e) => {
                tracing::warn!(count, error = %e, "events not queued; left in outbox for the sweep");
                return;
            }
        }
    }
}

fn batch_body(events: &[&Event]) -> String {
    #[derive(Serialize)]
    struct Batch<'a> {
        events: &'a [&'a Event],
    }
    serde_json::to_string(&Batch { events }).expect("events serialize")
}

/// How many pages of recently re-sent items one shard's sweep reads past before it stops.
const SWEEP_PAGES: usize = 20;

/// A shard's due items (id, body), oldest first, read past the recently re-sent ones (events
/// nobody can acknowledge) so they cannot hide the rest.
async fn due_in_shard(app: &App, shard: u32, bound: &str, again: i64, per_shard: i32) -> Result<Vec<(String, String)>, ApiError> {
    let filter = ("attribute_not_exists(resent_at) OR resent_at < :again", vec![(":again", n(again))]);
    let items =
        app.db.scan_range(&crate::events::outbox_shard_pk(shard), bound, filter, per_shard, SWEEP_PAGES, per_shard.max(0) as usize).await?;
    Ok(items.iter().filter_map(|i| Some((get_str(i, "sk")?.to_string(), get_str(i, "body")?.to_string()))).collect())
}

/// The sweep re-sends one event at most this often, however long its consumer is down, so an
/// outage does not pile up copies in the queue.
const RESEND_EVERY_SECS: i64 = 300;

/// Re-send outbox items older than `min_age_secs` (their SendMessage failed, or their consumer
/// has not acknowledged them yet). Event ids are ULIDs, so "older than" is a key range: each
/// shard is read from its oldest item, up to `per_shard` due items, plus one small write per
/// re-sent item (`resent_at`). The consumer dedupes by event id.
pub async fn sweep(app: &App, min_age_secs: i64, per_shard: i32) -> Result<usize, ApiError> {
    let now = chrono::Utc::now().timestamp();
    let cutoff = (chrono::Utc::now().timestamp_millis() - min_age_secs * 1000).max(0) as u64;
    // The largest id of that millisecond: every event older than the cutoff sorts below it.
    let bound = format!("evt_{}", ulid::Ulid::from_parts(cutoff.saturating_sub(1), u128::MAX));
    let shards = (0..OUTBOX_SHARDS).map(|shard| due_in_shard(app, shard, &bound, now - RESEND_EVERY_SECS, per_shard));
    let mut due: Vec<(String, String)> = vec![];
    for items in futures_util::future::join_all(shards).await {
        due.extend(items?);
    }
    let mut sent = 0;
    for chunk in due.chunks(10) {
        let taken = send_batch(app, &app.cfg.events_queue_url, "events", chunk.iter().map(|(_, body)| body.as_str())).await?;
        sent += taken.len();
        // Note the re-send; an item the consumer deleted meanwhile stays deleted.
        let marks =
            taken.iter().filter_map(|i| chunk.get(*i)).map(|(id, _)| app.db.mark(Event::outbox_pk(id), id.clone(), "resent_at", n(now)));
        futures_util::future::join_all(marks).await;
    }
    if sent > 0 {
        tracing::info!(resent = sent, "outbox sweep re-sent events");
    }
    Ok(sent)
}

/// Send up to 10 bodies to a queue in one call: the indexes (into `bodies`) SQS took. One it
/// refused is logged and left for the next sweep (one SQS will never take stays until its TTL).
async fn send_batch(app: &App, url: &str, queue: &str, bodies: impl Iterator<Item = &str>) -> Result<Vec<usize>, ApiError> {
    let entries = bodies
        .enumerate()
        .map(|(i, body)| aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder().id(i.to_string()).message_body(body).build())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ApiError::internal(e))?;
    let out = app
        .sqs()
        .send_message_batch()
        .queue_url(url)
        .set_entries(Some(entries))
        .send()
        .await
        .map_err(|e| ApiError::unavailable(format!("{queue} queue: {}", crate::aws::AwsError::from(e))))?;
    for f in out.failed() {
        tracing::warn!(queue, code = f.code(), message = f.message().unwrap_or_default(), "a message was refused");
    }
    Ok(out.successful().iter().filter_map(|e| e.id().parse().ok()).collect())
}

/// How long a sweep's claim on a job it sends lasts: overlapping sweeps (one slowed by a
/// hanging queue, a retried invocation) do not both send it, and a failed send is tried again
/// by the first sweep after it (the sweep runs every minute).
const JOB_CLAIM_SECS: i64 = 55;

/// Send the jobs whose hand-off failed and that are older than `min_age_secs`, up to
/// `per_shard` per queue and shard, then delete them. Each queue is read apart (a backlog of
/// one never hides another's jobs), each job is claimed before it is sent, each queue is sent
/// to in batches of 10 and skipped after its first failure.
pub async fn sweep_jobs(app: &App, min_age_secs: i64, per_shard: i32) -> Result<usize, ApiError> {
    use crate::keys::OUTBOX_JOB;
    let now = chrono::Utc::now().timestamp();
    let reads = WorkQueue::ALL.into_iter().flat_map(|q| (0..OUTBOX_SHARDS).map(move |shard| (q, shard))).map(|(queue, shard)| async move {
        let pk = OUTBOX_JOB.pk(&shard.to_string());
        let prefix = OUTBOX_JOB.sk_prefix_of(queue.name());
        (queue, app.db.query_between(&pk, &prefix, &format!("{prefix}~"), true, Some(per_shard.max(1) as usize)).await)
    });
    let mut failed = None;
    // (queue, pk, sk, body)
    let mut due: Vec<(WorkQueue, String, String, String)> = vec![];
    for (queue, items) in futures_util::future::join_all(reads).await {
        let items = match items {
            Ok(items) => items,
            Err(e) => {
                failed = Some(e);
                continue;
            }
        };
        for item in items {
            let (Some(pk), Some(sk), Some(body)) = (get_str(&item, "pk"), get_str(&item, "sk"), get_str(&item, "body")) else { continue };
            if crate::store::get_i64(&item, "queued_at").is_none_or(|at| at > now - min_age_secs) {
                continue;
            }
            due.push((queue, pk.into(), sk.into(), body.into()));
        }
    }
    let now = chrono::Utc::now().timestamp();
    let until = now + JOB_CLAIM_SECS;
    let claims = due.iter().map(|(_, pk, sk, _)| {
        app.db
            .update(pk.clone(), sk.clone(), "SET claimed_until = :until")
            .when("attribute_exists(pk) AND (attribute_not_exists(claimed_until) OR claimed_until <= :now)")
            .value(":until", n(until))
            .value(":now", n(now))
            .apply()
    });
    let claimed: Vec<bool> = futures_util::future::join_all(claims).await.into_iter().map(|c| matches!(c, Ok(Some(_)))).collect();
    let due: Vec<&(WorkQueue, String, String, String)> = due.iter().zip(claimed).filter_map(|(d, ok)| ok.then_some(d)).collect();
    let mut sent = 0;
    for queue in WorkQueue::ALL {
        let mine: Vec<&(WorkQueue, String, String, String)> = due.iter().copied().filter(|d| d.0 == queue).collect();
        for chunk in mine.chunks(10) {
            let taken = match send_batch(app, queue.url(&app.cfg), queue.name(), chunk.iter().map(|d| d.3.as_str())).await {
                Ok(taken) => taken,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            let taken: Vec<&(WorkQueue, String, String, String)> = taken.into_iter().filter_map(|i| chunk.get(i).copied()).collect();
            sent += taken.len();
            // Only the item this sweep claimed: one parked again meanwhile stays for the next.
            let deletes = taken
                .iter()
                .map(|d| app.db.delete_when(d.1.clone(), d.2.clone(), "claimed_until = :until").value(":until", n(until)).apply());
            for (d, deleted) in taken.iter().zip(futures_util::future::join_all(deletes).await) {
                if let Err(e) = deleted {
                    // Sent again after its claim: the worker drops the copy.
                    tracing::warn!(queue = queue.name(), sk = %d.2, error = %e, "sent job's outbox item not deleted");
                }
            }
        }
    }
    if sent > 0 {
        tracing::info!(sent, "outbox sweep sent jobs");
    }
    failed.map_or(Ok(sent), Err)
}

/// Acknowledge many events at once (BatchWriteItem deletes, 25 per call).
pub async fn ack_many(app: &App, event_ids: &[&str]) -> Result<(), ApiError> {
    use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
    for chunk in event_ids.chunks(25) {
        let reqs: Vec<WriteRequest> = chunk
            .iter()
            .map(|id| {
                let d = DeleteRequest::builder().key("pk", s(Event::outbox_pk(id))).key("sk", s(*id)).build().expect("key set");
                WriteRequest::builder().delete_request(d).build()
            })
            .collect();
        let out = app.db.client.batch_write_item().request_items(&app.db.table, reqs).send().await.map_err(ddb_error)?;
        // Unprocessed deletes are harmless: the sweep re-sends those events and they are acked then.
        if out.unprocessed_items().is_some_and(|u| !u.is_empty()) {
            tracing::debug!("some outbox acks were not processed");
        }
    }
    Ok(())
}

/// The consumer's acknowledgement: the event reached the queue and was taken from it.
pub async fn ack(app: &App, event_id: &str) -> Result<(), ApiError> {
    app.db
        .client
        .delete_item()
        .table_name(&app.db.table)
        .key("pk", s(Event::outbox_pk(event_id)))
        .key("sk", s(event_id))
        .send()
        .await
        .map_err(ddb_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_is_a_value_until_commit() {
        let ev = Event::new("ws_1", crate::events::EventType::PostCreated, &serde_json::json!({"id": "post_1"}));
        let tx = Tx::new()
            .create(Record::new("WS#ws_1".into(), "POST#post_1".into(), &serde_json::json!({"id": "post_1"})).unwrap())
            .delete_if("WS#ws_1".into(), "X#1".into(), "", vec![])
            .check("WS#ws_1".into(), "CT#1".into(), "attribute_exists(pk)")
            .event(ev);
        assert_eq!(tx.len(), 4);
        let built: Vec<_> = tx.ops.into_iter().map(|op| Tx::build(op, "t").unwrap()).collect();
        assert_eq!(built[0].put().unwrap().condition_expression(), Some("attribute_not_exists(pk)"));
        assert_eq!(built[1].delete().unwrap().condition_expression(), None);
        assert!(built[1].delete().unwrap().expression_attribute_values().is_none());
        assert_eq!(built[2].condition_check().unwrap().table_name(), "t");
        assert!(get_str(built[3].put().unwrap().item(), "pk").unwrap().starts_with("OUTBOX#"));
    }
}
