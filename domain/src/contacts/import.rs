//! Contact imports: the API stores the rows in chunks and queues a job; the worker
//! (`functions/contact-import`) creates the contacts chunk by chunk, recording per-row errors
//! and progress after each chunk.
//!
//! Items (pk = WS#<workspace>): `IMPORT#<id>` (the job, plus `chunks` and `next_chunk`),
//! `IMPROWS#<id>#<chunk>` (up to 500 rows as JSON, 7-day TTL), `IMPERR#<id>#<row>`.
//!
//! Resuming after a crash cannot duplicate contacts: a row's contact id is derived from the
//! job and row number, and the email claim says who holds an address, so a chunk processed
//! again finds "its own" contacts, rewrites them (idempotent) and counts them once (progress
//! is saved only after a chunk). A resumed chunk may emit a contact's `contact.created` twice;
//! receivers dedupe by contact id as by event id.

use super::{self as model, Contact, CreateContact, UpdateContact};
use crate::keys;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::outbox::{Tx, WorkQueue};
use shared::sqs::{BatchResponse, SqsEvent};
use shared::store::{self, Item, TxError, n, s, ws_pk};

use shared::ids::Timestamp;
use shared::validate::Errors;
use shared::{ApiError, ApiResult, App};
use std::collections::HashMap;
use utoipa::ToSchema;

pub const MAX_ROWS: usize = 10_000;
/// 10,000 rows of a contact export are well under this.
pub const MAX_CSV_BYTES: usize = 2 * 1024 * 1024;
/// The request body: the CSV plus its JSON escaping, within what Lambda can take.
pub const MAX_IMPORT_BODY: usize = shared::request::MAX_LARGE_BODY_BYTES;
const CHUNK_ROWS: usize = 500;
const CHUNK_BYTES: usize = 300 * 1024;
const ROWS_TTL_SECS: i64 = 7 * 86_400;
const COLUMNS: &[&str] = &["email", "first_name", "last_name", "phone", "company", "job_title", "status", "email_status", "labels"];

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum OnConflict {
    /// Leave the existing contact as it is.
    #[default]
    Skip,
    /// Set the row's non-empty fields on the existing contact.
    Update,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ImportStatus {
    Queued,
    Processing,
    Completed,
    Failed,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateImport {
    /// Contacts as objects with the fields of `POST /contacts`. Either this or `csv`.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>, min_items = 1, max_items = 10000)]
    pub rows: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
    /// CSV text with a header row: `email` (required), `first_name`, `last_name`, `phone`,
    /// `company`, `job_title`, `status`, `email_status`, `labels` (`;`-separated), and
    /// `custom.<key>` columns for custom fields. RFC 4180 quoting; a UTF-8 BOM is ignored.
    #[serde(default)]
    #[schema(min_length = 1, extensions(("x-exactly-one" = json!(["rows", "csv"]))))]
    pub csv: Option<String>,
    /// The CSV field separator. Omitted: detected from the header line (the most frequent
    /// of `,` `;` tab outside quotes), so Excel's `;` exports work as they are.
    #[serde(default)]
    pub delimiter: Option<super::csv::Delimiter>,
    #[serde(default)]
    pub on_conflict: OnConflict,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct ImportJob {
    /// `imp_...`
    pub id: ImportId,
    /// Always `contact_import`.
    pub object: String,
    pub status: ImportStatus,
    pub on_conflict: OnConflict,
    /// Rows in the import.
    pub total: u64,
    pub processed: u64,
    pub created: u64,
    pub updated: u64,
    /// Rows whose email exists (with `on_conflict: skip`), in the workspace or earlier in the import.
    pub skipped: u64,
    /// Rows with invalid fields; see `/errors`.
    pub failed: u64,
    pub error: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub completed_at: Option<Timestamp>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct RowError {
    /// 1-based row of the import (the CSV header is not a row).
    pub row: u32,
    pub field: Option<String>,
    pub message: String,
}

impl ImportJob {
    fn new(id: String, on_conflict: OnConflict, total: u64, now: shared::ids::Timestamp) -> Self {
        Self {
            id: ImportId::trusted(id),
            object: "contact_import".into(),
            status: ImportStatus::Queued,
            on_conflict,
            total,
            processed: 0,
            created: 0,
            updated: 0,
            skipped: 0,
            failed: 0,
            error: None,
            created_at: now,
            updated_at: now,
            completed_at: None,
        }
    }
}

fn job_sk(id: &ImportId) -> String {
    keys::IMPORT_JOB.sk(id)
}
fn rows_sk(id: &ImportId, chunk: usize) -> String {
    keys::IMPORT_ROWS.sk((id, &format!("{chunk:05}")))
}

/// One row as stored: its number and the object to build a contact from.
#[derive(Serialize, Deserialize, Debug)]
struct Row {
    row: u32,
    data: serde_json::Value,
}

/// CSV text to row objects; a structural problem (bad quoting, unknown column) fails the request.
fn csv_rows(text: &str, delimiter: Option<super::csv::Delimiter>) -> ApiResult<Vec<Row>> {
    let records = super::csv::parse(text, delimiter).map_err(|e| ApiError::validation("csv", e))?;
    let Some((header, data)) = records.split_first() else { return Err(ApiError::validation("csv", "needs a header row")) };
    let cols: Vec<String> = header.fields.iter().map(|h| h.trim().to_lowercase()).collect();
    if !cols.iter().any(|c| c == "email") {
        return Err(ApiError::validation("csv", "the header has no email column"));
    }
    for c in &cols {
        if !COLUMNS.contains(&c.as_str()) && c.strip_prefix("custom.").is_none_or(|k| k.is_empty()) {
            return Err(ApiError::validation("csv", format!("unknown column {c:?}")));
        }
    }
    Ok(data
        .iter()
        .enumerate()
        .map(|(i, rec)| {
            let mut obj = serde_json::Map::new();
            let mut custom = serde_json::Map::new();
            for (col, v) in cols.iter().zip(&rec.fields) {
                if v.is_empty() {
                    continue;
                }
                if let Some(k) = col.strip_prefix("custom.") {
                    custom.insert(k.into(), v.clone().into());
                } else if col == "labels" {
                    obj.insert(col.clone(), v.split(';').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().into());
                } else {
                    obj.insert(col.clone(), v.clone().into());
                }
            }
            if !custom.is_empty() {
                obj.insert("custom_fields".into(), custom.into());
            }
            if rec.fields.len() != cols.len() {
                // Kept, and reported by the worker as this row's error.
                obj.insert("__columns".into(), format!("has {} fields, the header {}", rec.fields.len(), cols.len()).into());
            }
            Row { row: (i + 1) as u32, data: obj.into() }
        })
        .collect())
}

/// Validate, store the rows in chunks, create the job and queue it for the worker.
pub async fn start(app: &App, ws: &WorkspaceId, input: CreateImport) -> ApiResult<ImportJob> {
    if input.delimiter.is_some() && input.csv.is_none() {
        return Err(ApiError::validation("delimiter", "applies only to csv"));
    }
    let rows = match (input.rows, input.csv) {
        (Some(rows), None) => rows.into_iter().enumerate().map(|(i, data)| Row { row: (i + 1) as u32, data: data.into() }).collect(),
        (None, Some(csv)) if csv.len() > MAX_CSV_BYTES => return Err(ApiError::validation("csv", "at most 2 MiB")),
        (None, Some(csv)) => csv_rows(&csv, input.delimiter)?,
        _ => return Err(ApiError::validation("rows", "send either rows or csv")),
    };
    if rows.is_empty() || rows.len() > MAX_ROWS {
        return Err(ApiError::validation("rows", format!("1 to {MAX_ROWS} rows")));
    }
    let job = ImportJob::new(shared::ids::new_id("imp"), input.on_conflict, rows.len() as u64, shared::ids::Timestamp::now());
    // Chunks of at most 500 rows and 300 KiB, far below the 400 KB item limit.
    let mut chunks: Vec<Vec<Row>> = vec![];
    let mut size = 0;
    for r in rows {
        let len = r.data.to_string().len() + 16;
        if chunks.last().is_none_or(|c| c.len() >= CHUNK_ROWS || size + len > CHUNK_BYTES) {
            chunks.push(vec![]);
            size = 0;
        }
        size += len;
        chunks.last_mut().expect("pushed").push(r);
    }
    let expires = chrono::Utc::now().timestamp() + ROWS_TTL_SECS;
    let items: Vec<Item> = chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Item::from([
                ("pk".into(), s(ws_pk(ws))),
                ("sk".into(), s(rows_sk(&job.id, i))),
                ("rows".into(), s(serde_json::to_string(c).expect("rows serialize"))),
                ("expires_at".into(), n(expires)),
            ])
        })
        .collect();
    app.db.batch_put(items).await?;
    let rec =
        store::Record::new(ws_pk(ws), job_sk(&job.id), &job)?.attr("chunks", n(chunks.len() as i64)).attr("next_chunk", n(0)).version(1);
    let msg = serde_json::to_string(&ImportMessage { workspace_id: ws.clone(), import_id: job.id.to_string() })
        .map_err(|e| ApiError::internal(e))?;
    Tx::new().create(rec).job(WorkQueue::ContactImports, &job.id, msg).commit(app).await.map_err(TxError::stale)?;
    Ok(job)
}

pub use crate::ids::ImportId;

/// Erasure: the chunk keeps its other rows; the subject's are dropped (a row names the subject
/// when any of its values names the address or the contact id whole, `privacy::names`).
pub async fn erase_rows(app: &App, _ws: &str, item: Item, subject: &crate::privacy::Subject) -> ApiResult<()> {
    let Some(raw) = store::get_str(&item, "rows") else { return Ok(()) };
    let rows: Vec<Row> = serde_json::from_str(raw).map_err(|e| ApiError::internal(e))?;
    let needles: Vec<String> = subject.needles().iter().map(|n| n.to_lowercase()).collect();
    let keep: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            let text = r.data.to_string().to_lowercase();
            !needles.iter().any(|n| crate::privacy::names(&text, n))
        })
        .collect();
    let mut item = item.clone();
    item.insert("rows".into(), s(serde_json::to_string(&keep).map_err(|e| ApiError::internal(e))?));
    app.db.batch_put(vec![item]).await
}

/// An import job with its chunk count and the next chunk to process. `id` comes from a path
/// ([`ImportId`]) or from the job's own queue message.
pub async fn load_job(app: &App, ws: &WorkspaceId, id: &ImportId) -> ApiResult<Option<(ImportJob, usize, usize)>> {
    let Some(item) = app.db.get(&ws_pk(ws), &job_sk(id)).await? else { return Ok(None) };
    let chunks = store::get_i64(&item, "chunks").unwrap_or(0) as usize;
    let next = store::get_i64(&item, "next_chunk").unwrap_or(0) as usize;
    Ok(Some((store::from_item(item)?, chunks, next)))
}

// ---------- the worker ----------

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportMessage {
    #[serde(deserialize_with = "WorkspaceId::from_record")]
    workspace_id: WorkspaceId,
    import_id: String,
}

/// The worker's Lambda handler: one import per message; a failed run keeps its message (the
/// next delivery resumes at the saved chunk).
pub async fn handle_sqs(app: &App, ev: SqsEvent) -> BatchResponse {
    let mut kept = vec![];
    for m in &ev.records {
        let Ok(msg) = serde_json::from_str::<ImportMessage>(shared::sqs::body(m)) else {
            tracing::error!(message_id = %shared::sqs::id(m), "not an import message");
            kept.push(shared::sqs::id(m));
            continue;
        };
        // Written by `start` from the job's own id.
        let id = ImportId::trusted(msg.import_id.as_str());
        let mut res = run(app, &msg.workspace_id, &id).await;
        // A transient failure resumes from the saved position after a pause here rather than
        // after the queue's 10-minute visibility timeout.
        for pause in [1, 3] {
            match &res {
                Err(e) if transient(e) => {
                    tokio::time::sleep(std::time::Duration::from_secs(pause)).await;
                    res = run(app, &msg.workspace_id, &id).await;
                }
                _ => break,
            }
        }
        if let Err(e) = res {
            tracing::warn!(import_id = %msg.import_id, error = %e, "import interrupted; it resumes on the next delivery");
            kept.push(shared::sqs::id(m));
        }
    }
    shared::sqs::keep(kept)
}

#[derive(Default, Debug, Clone, Copy, PartialEq)]
pub struct Counts {
    pub created: u64,
    pub updated: u64,
    pub skipped: u64,
    pub failed: u64,
}

/// Process an import from its saved position to the end.
pub async fn run(app: &App, ws: &WorkspaceId, id: &ImportId) -> ApiResult<()> {
    loop {
        let Some((job, chunks, next)) = load_job(app, ws, id).await? else { return Ok(()) };
        if matches!(job.status, ImportStatus::Completed | ImportStatus::Failed) {
            return Ok(());
        }
        if next >= chunks {
            return finish(app, ws, &job, ImportStatus::Completed, None).await;
        }
        let Some(item) = app.db.get(&ws_pk(ws), &rows_sk(id, next)).await? else {
            return finish(app, ws, &job, ImportStatus::Failed, Some("the import's rows expired before it ran")).await;
        };
        let rows: Vec<Row> = serde_json::from_str(store::get_str(&item, "rows").unwrap_or("[]")).map_err(|e| ApiError::internal(e))?;
        let (counts, errors) = process_chunk(app, ws, &job, &rows).await?;
        // A row's errors are adjacent; `n` numbers them so each has its own key.
        let mut n = 0;
        let mut err_items: Vec<Item> = Vec::with_capacity(errors.len());
        for (i, e) in errors.iter().enumerate() {
            n = if i > 0 && errors[i - 1].row == e.row { n + 1 } else { 0 };
            err_items.push(store::Record::new(ws_pk(ws), keys::IMPORT_ERROR.sk((id, &format!("{:06}", e.row), &n.to_string())), e)?.item);
        }
        app.db.batch_put(err_items).await?;
        save_progress(app, ws, id, next, rows.len() as u64, counts).await?;
    }
}

async fn save_progress(app: &App, ws: &WorkspaceId, id: &ImportId, chunk: usize, rows: u64, c: Counts) -> ApiResult<()> {
    app.db
        .update(
            ws_pk(ws),
            job_sk(id),
            "SET next_chunk = :next, #status = :processing, updated_at = :now, #p = #p + :rows, #c = #c + :c, \
             #u = #u + :u, #s = #s + :s, #f = #f + :f",
        )
        // Another run saved this chunk first when this fails: its counts stand.
        .when("next_chunk = :chunk")
        // Several of these names are DynamoDB reserved words.
        .name("#status", "status")
        .name("#p", "processed")
        .name("#c", "created")
        .name("#u", "updated")
        .name("#s", "skipped")
        .name("#f", "failed")
        .value(":next", n(chunk as i64 + 1))
        .value(":chunk", n(chunk as i64))
        .value(":processing", s("processing"))
        .value(":now", s(shared::ids::Timestamp::now().to_string()))
        .value(":rows", n(rows as i64))
        .value(":c", n(c.created as i64))
        .value(":u", n(c.updated as i64))
        .value(":s", n(c.skipped as i64))
        .value(":f", n(c.failed as i64))
        .apply()
        .await?;
    Ok(())
}

async fn finish(app: &App, ws: &WorkspaceId, job: &ImportJob, status: ImportStatus, error: Option<&str>) -> ApiResult<()> {
    let id = &job.id;
    let now = shared::ids::Timestamp::now();
    let u =
        shared::store::Update::new(ws_pk(ws), job_sk(id), "SET #status = :status, updated_at = :now, completed_at = :now, #error = :error")
            .when("#status IN (:queued, :processing)")
            .name("#status", "status")
            .name("#error", "error")
            .value(":status", s(if status == ImportStatus::Completed { "completed" } else { "failed" }))
            .value(":now", s(now.to_string()))
            .value(":queued", s("queued"))
            .value(":processing", s("processing"))
            .value(":error", error.map_or(shared::store::Value::Null(true), s));
    let mut tx = Tx::new().update(u);
    if status == ImportStatus::Completed {
        // The caller read the job after the last chunk was saved: its counts are final.
        let mut job = job.clone();
        job.status = status;
        job.completed_at = Some(now);
        job.updated_at = now;
        tx = tx.event(Event::new(ws, EventType::ContactImportCompleted, &job));
    }
    match tx.commit(app).await {
        Ok(()) | Err(TxError::Condition(_)) => Ok(()),
        Err(TxError::Api(e)) => Err(e),
    }
}

/// The contact id of a row: the same for every run of the job, so a resumed run recognises the
/// contacts it created before.
pub fn row_contact_id(job: &ImportJob, row: u32) -> String {
    use sha2::Digest;
    let ms = job.created_at.timestamp_millis().max(0) as u64;
    let h = sha2::Sha256::digest(job.id.as_bytes());
    let tag = u64::from_be_bytes(h[..8].try_into().expect("8 bytes")) & 0xFFFF_FFFF_FFFF;
    format!("ct_{}", ulid::Ulid::from_parts(ms, ((tag as u128) << 32) | row as u128))
}

enum Planned {
    Create(Box<Contact>, serde_json::Value),
    /// The email exists (in the workspace or earlier in the import).
    Existing(serde_json::Value, String),
}

async fn process_chunk(app: &App, ws: &WorkspaceId, job: &ImportJob, rows: &[Row]) -> ApiResult<(Counts, Vec<RowError>)> {
    let mut counts = Counts::default();
    let mut errors = vec![];
    let mut plan = vec![];
    let mut first_row_of: HashMap<String, u32> = HashMap::new();
    let mut built = vec![];
    for r in rows {
        let data = r.data.clone();
        if let Some(msg) = data.get("__columns").and_then(|v| v.as_str()) {
            errors.push(RowError { row: r.row, field: None, message: format!("the row {msg}") });
            counts.failed += 1;
            continue;
        }
        // Read as the API reads a body, so a row's error names its field in the API's words
        // (`email`: "is required"), never serde's.
        let input: CreateContact = match shared::validate::parse_json(data.to_string().as_bytes()) {
            Ok(i) => i,
            Err(e) => {
                errors.extend(e.details.into_iter().map(|d| RowError { row: r.row, field: d.field, message: d.message }));
                counts.failed += 1;
                continue;
            }
        };
        let mut errs = Errors::new();
        let mut c = input.build(&mut errs);
        if let Err(e) = errs.finish() {
            errors.extend(e.details.into_iter().map(|d| RowError { row: r.row, field: d.field, message: d.message }));
            counts.failed += 1;
            continue;
        }
        c.id = model::ContactId::trusted(row_contact_id(job, r.row));
        built.push((r.row, c, data));
    }
    // An erased address is not re-created by an import (one batch read of tombstones).
    let emails: Vec<&str> = built.iter().map(|(_, c, _)| c.email.as_str()).collect();
    let erased = crate::privacy::erased(app, ws, &emails).await?;
    for (row, c, data) in built {
        if erased.contains(&c.email) {
            errors.push(RowError { row, field: Some("email".into()), message: crate::privacy::ERASED_MESSAGE.into() });
            counts.failed += 1;
        } else if first_row_of.contains_key(&c.email) {
            plan.push(Planned::Existing(data, c.email));
        } else {
            first_row_of.insert(c.email.clone(), row);
            plan.push(Planned::Create(Box::new(c), data));
        }
    }
    let creates: Vec<Contact> =
        plan.iter().filter_map(|p| if let Planned::Create(c, _) = p { Some((**c).clone()) } else { None }).collect();
    let mut existing: Vec<(serde_json::Value, String)> = vec![];
    {
        let (created, taken) = create_many(app, ws, creates).await?;
        counts.created += created;
        for c in taken {
            let data = plan.iter().find_map(|p| match p {
                Planned::Create(x, d) if x.id == c.id => Some(d.clone()),
                _ => None,
            });
            existing.push((data.unwrap_or_default(), c.email));
        }
    }
    // Rows whose address is taken: by a contact from before the import, or from this import.
    for p in &plan {
        if let Planned::Existing(data, email) = p {
            existing.push((data.clone(), email.clone()));
        }
    }
    for (data, email) in existing {
        match job.on_conflict {
            OnConflict::Skip => counts.skipped += 1,
            OnConflict::Update => {
                update_existing(app, ws, &email, data).await?;
                counts.updated += 1;
            }
        }
    }
    Ok((counts, errors))
}

/// Create contacts in bulk. Each contact's email claim is written in the same transaction as
/// the contact, so no claim exists without its contact. One batch read first finds addresses
/// that are taken; the rest go in transactions of several contacts (up to DynamoDB's 100
/// writes and 4 MB). A contact whose claim condition fails (taken meanwhile by a racing
/// request) is set aside and its transaction retried without it. A claim that already names
/// the row's contact (an interrupted run) passes, and the run rewrites what it left half done.
/// Returns how many were created and the ones whose address belongs to another contact.
async fn create_many(app: &App, ws: &WorkspaceId, contacts: Vec<Contact>) -> ApiResult<(u64, Vec<Contact>)> {
    use futures_util::stream::{self, StreamExt, TryStreamExt};
    let emails: Vec<&str> = contacts.iter().map(|c| c.email.as_str()).collect();
    let owners = model::email_owners(app, ws, &emails).await?;
    let (mut todo, mut taken): (Vec<Contact>, Vec<Contact>) =
        contacts.into_iter().partition(|c| owners.get(&c.email).is_none_or(|id| *id == c.id));
    let mut groups = vec![];
    while !todo.is_empty() {
        let (group, rest) = take_group(ws, todo)?;
        groups.push(group);
        todo = rest;
    }
    let results: Vec<(u64, Vec<Contact>)> =
        stream::iter(groups).map(|g| commit_group(app, ws, g)).buffered(TXS_IN_FLIGHT).try_collect().await?;
    let mut created = 0;
    for (n, lost) in results {
        created += n;
        taken.extend(lost);
    }
    Ok((created, taken))
}

/// Transactions of bulk creates in flight at once.
const TXS_IN_FLIGHT: usize = 4;
/// Under TransactWriteItems' 4 MB, with room for keys and index attributes.
const TX_BYTES: usize = 3 * 1024 * 1024;

/// The longest prefix of `todo` that fits one transaction, and the rest.
fn take_group(ws: &WorkspaceId, mut todo: Vec<Contact>) -> ApiResult<(Vec<Contact>, Vec<Contact>)> {
    let (mut writes, mut bytes, mut n) = (0, 0, 0);
    for c in &todo {
        let w = model::bulk_create_tx(ws, c, Tx::new())?.len();
        // The contact is written about three times (record, event, timeline summary).
        let b = 3 * serde_json::to_vec(c).map(|v| v.len()).unwrap_or(0);
        if n > 0 && (writes + w > 100 || bytes + b > TX_BYTES) {
            break;
        }
        (writes, bytes, n) = (writes + w, bytes + b, n + 1);
    }
    let rest = todo.split_off(n);
    Ok((todo, rest))
}

/// A concurrent transaction (409) or a throttled or unreachable DynamoDB (503): worth another
/// try within the same delivery.
fn transient(e: &ApiError) -> bool {
    matches!(e.code, shared::error::ErrorCode::Conflict | shared::error::ErrorCode::Unavailable)
}

/// Tries of one group when DynamoDB cancels it for a concurrent transaction or throttles it.
const TX_TRIES: u32 = 8;

async fn commit_group(app: &App, ws: &WorkspaceId, mut group: Vec<Contact>) -> ApiResult<(u64, Vec<Contact>)> {
    let mut lost = vec![];
    let mut tries = 0;
    while !group.is_empty() {
        let mut tx = Tx::new();
        // Where each contact's writes start: a failed condition names a write, and only
        // claims carry conditions.
        let mut starts = vec![];
        for c in &group {
            starts.push(tx.len());
            tx = model::bulk_create_tx(ws, c, tx)?;
        }
        match tx.commit(app).await {
            Ok(()) => return Ok((group.len() as u64, lost)),
            Err(TxError::Condition(i)) => {
                let at = starts.iter().rposition(|s| *s <= i).unwrap_or(0);
                lost.push(group.remove(at));
            }
            // A single create racing the import for one of these addresses cancels the whole
            // transaction; retry here after a short, growing pause, since giving up would
            // return the message to the queue for its whole visibility timeout (10 minutes).
            Err(TxError::Api(e)) if tries + 1 < TX_TRIES && transient(&e) => {
                tries += 1;
                let jitter =
                    u64::from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_micros() % 50);
                tokio::time::sleep(std::time::Duration::from_millis((25 << tries) + jitter)).await;
            }
            Err(TxError::Api(e)) => return Err(e),
        }
    }
    Ok((0, lost))
}

/// `on_conflict: update`: set the row's non-empty fields on the contact holding the email.
async fn update_existing(app: &App, ws: &WorkspaceId, email: &str, mut data: serde_json::Value) -> ApiResult<()> {
    if let Some(o) = data.as_object_mut() {
        o.remove("email");
    }
    for _ in 0..3 {
        let Some(id) = model::email_owner(app, ws, email).await? else { return Ok(()) };
        let (old, version) = model::load(app, ws, &model::ContactId::trusted(id)).await?;
        let patch: UpdateContact = serde_json::from_value(data.clone()).unwrap_or_default();
        let mut c = old.clone();
        let mut errs = Errors::new();
        patch.apply(&mut c, &mut errs);
        model::validate(&mut errs, &c);
        if !errs.is_empty() || model::changed_fields(&old, &c).is_empty() {
            return Ok(());
        }
        c.updated_at = shared::ids::Timestamp::now();
        match model::commit_update(app, ws, &old, &c, version).await {
            Ok(()) => return Ok(()),
            Err(e) if e.code == shared::error::ErrorCode::Conflict => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::conflict("a contact kept changing during the import"))
}

/// One page of an import's failed rows, in row order.
pub async fn errors(
    app: &App,
    ws: &WorkspaceId,
    id: &ImportId,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<RowError>, Option<String>)> {
    shared::request::page(app, keys::IMPORT_ERRORS.query_within(ws, id, after, limit)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_map_columns() {
        let rows = csv_rows(
            "Email,First_Name,labels,custom.tier\nada@example.com,Ada,\"vip; beta\",gold\nbob@example.com,,,\nx@y.com,a,b,c,d\n",
            None,
        )
        .unwrap();
        assert_eq!(
            rows[0].data,
            serde_json::json!({"email": "ada@example.com", "first_name": "Ada", "labels": ["vip", "beta"], "custom_fields": {"tier": "gold"}})
        );
        assert_eq!(rows[1].data, serde_json::json!({"email": "bob@example.com"}));
        assert!(rows[2].data.get("__columns").is_some());
        assert_eq!(rows.iter().map(|r| r.row).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert!(csv_rows("name\nx\n", None).is_err(), "email column required");
        assert!(csv_rows("email,shoe_size\nx@y.com,4\n", None).is_err(), "unknown column");
    }

    #[test]
    fn row_ids_are_stable_per_job_and_row() {
        let job = ImportJob::new(
            "imp_01HF6Z3Q8M4W2T9K7R5N1B0C6D".into(),
            OnConflict::Skip,
            2,
            shared::ids::Timestamp::parse("2026-11-22T10:00:00Z").unwrap(),
        );
        assert_eq!(row_contact_id(&job, 7), row_contact_id(&job, 7));
        assert_ne!(row_contact_id(&job, 7), row_contact_id(&job, 8));
        assert!(<crate::contacts::ContactId as shared::ids::PrefixedId>::parse(&row_contact_id(&job, 7)).is_some());
        assert!(row_contact_id(&job, 1) < row_contact_id(&job, 2), "row order is id order");
    }
}
