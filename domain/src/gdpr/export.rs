//! Exports (Art. 15 and 20): one gzip JSON document in S3 per job, written by the worker as a
//! multipart upload (or one PutObject when it is smaller than a part). Each part is a complete gzip member (concatenated members are one gzip
//! file), cut when it reaches `Config::export_part_bytes`; after each part the job saves the upload, its
//! parts and the position it had reached, so memory stays at one part whatever the workspace
//! holds, and a restarted worker resumes after the last part instead of starting over.
//!
//! Document: `{"object": "gdpr_export_document", "schema_version", "export_id", "generated_at",
//! "scope", "subject", "sections": {<area>: {<kind>: [items...]}}, "manifest": {"schema_version",
//! "generated_at", "subject", "areas": {<area>: {<kind>: count}}, "total_items"}}`. A subject
//! export's areas are the GDPR rules' (`contacts`, `deals`, `emails`, ...); a workspace export
//! has one area, `workspace`, with every kind that is not bookkeeping. Keys, index keys and
//! secrets are never exported.

use super::jobs::{JobError, JobKind, JobStatus};
use super::{Cursor, Erase, ExportId, Find, Rule, Subject, SubjectRef};
use crate::effects::{Authority, ExportSubject, ExportWorkspace};
use crate::keys::{self, Data, Kind};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::outbox::{Tx, WorkQueue};
use shared::store::{self, Item, Record, n, s, ws_pk};
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;
use std::io::Write;
use utoipa::ToSchema;

pub const SCHEMA_VERSION: u32 = 1;
/// How long a download link works, and how long an export can be downloaded at all.
pub const URL_SECS: u64 = 3600;
/// The stored document: gzipped JSON, served as such by its link.
/// The document's type and encoding, stored with it.
const CONTENT_TYPE: &str = "application/json";
const CONTENT_ENCODING: &str = "gzip";

#[track_caller]
fn s3_error(what: &str, e: impl Into<shared::aws::AwsError>) -> ApiError {
    ApiError::unavailable(format!("s3 {what}: {}", e.into()))
}
pub const KEEP_DAYS: i64 = 7;

pub const PRIVACY: &[Rule] = &[Rule {
    kind: keys::EXPORT_JOB.kind,
    area: "gdpr",
    find: Find::Mentions,
    export: false,
    erase: Erase::Custom(|a, w, i, s| Box::pin(erase_job(a, w, i, s))),
}];

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ExportScope {
    Subject,
    Workspace,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct ExportJob {
    /// `gx_...`
    pub id: ExportId,
    /// Always `gdpr_export`.
    pub object: String,
    pub scope: ExportScope,
    /// The subject (for `scope: subject`), as resolved when the job was created.
    pub subject: Option<SubjectRef>,
    pub status: JobStatus,
    /// Items collected so far, per area.
    pub progress: BTreeMap<String, u64>,
    /// Who asked: `key:<id>`, a member's subject, or `portal:<contact id>`.
    pub requested_by: String,
    /// The legal deadline: received + 30 days.
    pub due_at: Timestamp,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    /// Until when the document can be downloaded (completed + 7 days); S3 deletes it then.
    pub expires_at: Option<Timestamp>,
    /// Compressed size of the document.
    pub size_bytes: Option<u64>,
    pub error: Option<JobError>,
    /// A presigned link valid 1 hour, minted on every read of a completed, unexpired export.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_url: Option<String>,
}

fn object_key(ws: &WorkspaceId, id: &str) -> String {
    format!("exports/{ws}/{id}.json.gz")
}

/// The effect `ExportSubject`: one person's data. A portal customer's authority exports only
/// the customer.
pub async fn start_subject(grant: &shared::authority::Grant, app: &App, ws: &WorkspaceId, subject: &Subject) -> ApiResult<ExportJob> {
    let auth = grant.authorize_value::<ExportSubject>(&super::Exporting { subject: super::Reach::of(subject) })?;
    if let Some(c) = auth.customer()
        && subject.contact_id.as_deref() != Some(c)
    {
        return Err(ApiError::forbidden("a portal customer exports only their own data"));
    }
    if let Some(c) = auth.customer() {
        let id = <crate::contacts::ContactId as shared::ids::PrefixedId>::parse(c).ok_or_else(|| ApiError::forbidden("not a contact"))?;
        crate::contacts::EmailChange::vouched(&crate::contacts::load(app, ws, &id).await?.0)?;
    }
    start(app, ws, ExportScope::Subject, Some(subject), auth.by(), auth.tx(&[])?).await
}

/// The effect `ExportWorkspace`: everything the workspace holds.
pub async fn start_workspace(grant: &shared::authority::Grant, app: &App, ws: &WorkspaceId) -> ApiResult<ExportJob> {
    let auth = grant.authorize_value::<ExportWorkspace>(&super::Everything { workspace_id: ws.clone() })?;
    start(app, ws, ExportScope::Workspace, None, auth.by(), auth.tx(&[])?).await
}

/// Create the job and queue it.
/// `tx`: the authority's guard on the objects the person approved.
async fn start(
    app: &App,
    ws: &WorkspaceId,
    scope: ExportScope,
    subject: Option<&Subject>,
    requested_by: &str,
    tx: Tx,
) -> ApiResult<ExportJob> {
    let now = chrono::Utc::now();
    let job = ExportJob {
        id: ExportId::generate(),
        object: "gdpr_export".into(),
        scope,
        subject: subject.map(|s| SubjectRef { email: Some(s.email.clone()), contact_id: s.contact_id.as_ref().map(String::from) }),
        status: JobStatus::Pending,
        progress: BTreeMap::new(),
        requested_by: requested_by.into(),
        due_at: super::due_at(&now),
        created_at: shared::ids::Timestamp::from(now),
        started_at: None,
        completed_at: None,
        expires_at: None,
        size_bytes: None,
        error: None,
        download_url: None,
    };
    let mut rec = Record::new(ws_pk(ws), keys::EXPORT_JOB.sk(&job.id), &job)?;
    if let Some(s) = subject {
        rec = rec.attr("subject_full", s_json(s));
    }
    tx.create(rec)
        .job(WorkQueue::Gdpr, &job.id, super::jobs::message(JobKind::Export, ws, &job.id))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::conflict("the export exists, or what was approved changed")))?;
    Ok(job)
}

fn s_json(s: &Subject) -> shared::store::Value {
    store::s(serde_json::to_string(s).expect("serializes"))
}

/// The job as the API shows it: with a fresh download link while the document exists.
pub async fn load(app: &App, ws: &WorkspaceId, id: &ExportId) -> ApiResult<Option<ExportJob>> {
    let Some(item) = app.db.get(&ws_pk(ws), &keys::EXPORT_JOB.sk(id)).await? else { return Ok(None) };
    let mut job: ExportJob = store::from_item(item)?;
    with_link(app, ws, &mut job).await?;
    Ok(Some(job))
}

pub async fn with_link(app: &App, ws: &WorkspaceId, job: &mut ExportJob) -> ApiResult<()> {
    let live = job.expires_at.is_some_and(|t| *t > chrono::Utc::now());
    if job.status != JobStatus::Completed || !live {
        return Ok(());
    }
    let url = shared::aws::presigned_get(
        app.s3(),
        &app.cfg.exports_bucket,
        &object_key(ws, &job.id),
        CONTENT_TYPE,
        Some(CONTENT_ENCODING),
        None,
        std::time::Duration::from_secs(URL_SECS),
    )
    .await
    .map_err(|e| s3_error("presign", e))?;
    job.download_url = Some(url);
    Ok(())
}

// ---------- the worker ----------

/// Where the document stands after its last uploaded part.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
struct Resume {
    upload_id: String,
    /// (part number, ETag) of the parts uploaded so far.
    parts: Vec<(u32, String)>,
    /// The source being written, whether its opening is written, how many of its items are,
    /// and where its next page starts.
    source: usize,
    opened: bool,
    in_source: u64,
    cursor: Cursor,
    header: bool,
    progress: BTreeMap<String, BTreeMap<String, u64>>,
    bytes: u64,
}

/// One list of the document: a rule's items (subject scope) or a kind's (workspace scope).
struct Source {
    area: &'static str,
    kind: Kind,
    rule: Option<Rule>,
}

fn sources(scope: ExportScope) -> Vec<Source> {
    match scope {
        ExportScope::Subject => super::rules()
            .into_iter()
            .filter(|r| r.export && !matches!(r.find, Find::WithParent(..)))
            .map(|r| Source { area: r.area, kind: r.kind, rule: Some(r) })
            .collect(),
        ExportScope::Workspace => keys::all()
            .into_iter()
            .filter(|k| k.table.pk == keys::WORKSPACE_PK)
            // Business data, and the personal data a subject's export would show (not copies
            // such as claims, search entries or stored responses).
            .filter(|k| match k.data {
                Data::Business => true,
                Data::Personal => super::rules().iter().any(|r| r.kind.name == k.name && r.export),
                _ => false,
            })
            .map(|k| Source { area: "workspace", kind: k, rule: None })
            .collect(),
    }
}

fn kind_key(k: &Kind) -> String {
    k.name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == ' ').collect::<String>().replace(' ', "_").to_lowercase()
}

/// The gzip member being filled, and the uploads done.
struct Writer {
    gz: GzEncoder<Vec<u8>>,
    part_bytes: usize,
}

impl Writer {
    fn new(part_bytes: usize) -> Self {
        Self { gz: GzEncoder::new(Vec::with_capacity(part_bytes + 64 * 1024), Compression::default()), part_bytes }
    }
    fn write(&mut self, s: &str) -> ApiResult<()> {
        self.gz.write_all(s.as_bytes()).map_err(|e| ApiError::internal(e))
    }
    /// Has the member reached a part's size? Flushes the compressor first (a sync flush per
    /// page costs a few bytes), so the size is the real one.
    fn full(&mut self) -> ApiResult<bool> {
        self.gz.flush().map_err(|e| ApiError::internal(e))?;
        Ok(self.gz.get_ref().len() >= self.part_bytes)
    }
    fn finish(self) -> ApiResult<Vec<u8>> {
        self.gz.finish().map_err(|e| ApiError::internal(e))
    }
}

async fn create_upload(app: &App, key: &str) -> ApiResult<String> {
    let out = app
        .s3()
        .create_multipart_upload()
        .bucket(&app.cfg.exports_bucket)
        .key(key)
        .content_type(CONTENT_TYPE)
        .content_encoding(CONTENT_ENCODING)
        .send()
        .await
        .map_err(|e| s3_error("create upload", e))?;
    out.upload_id.ok_or_else(|| ApiError::unavailable("s3 create upload: no upload id"))
}

async fn upload_part(app: &App, key: &str, r: &mut Resume, bytes: Vec<u8>) -> ApiResult<()> {
    let n = r.parts.len() as u32 + 1;
    r.bytes += bytes.len() as u64;
    let etag = app
        .s3()
        .upload_part()
        .bucket(&app.cfg.exports_bucket)
        .key(key)
        .upload_id(&r.upload_id)
        .part_number(n as i32)
        .body(bytes.into())
        .send()
        .await
        .map_err(|e| s3_error("upload part", e))?
        .e_tag
        .ok_or_else(|| ApiError::unavailable("s3 upload part: no ETag"))?;
    r.parts.push((n, etag));
    Ok(())
}

fn flat_progress(p: &BTreeMap<String, BTreeMap<String, u64>>) -> BTreeMap<String, u64> {
    p.iter().map(|(a, kinds)| (a.clone(), kinds.values().sum())).collect()
}

/// Save the position. Only the newest run may (`runs` fences off a run that a redelivered
/// message overtook: its next save fails and it stops, and a part it still uploaded makes the
/// completion fail on its ETag, so the newest run redoes that part).
async fn save(app: &App, ws: &WorkspaceId, id: &ExportId, run: i64, r: &Resume) -> ApiResult<()> {
    let progress = store::to_item(&flat_progress(&r.progress))?;
    app.db
        .update(ws_pk(ws), keys::EXPORT_JOB.sk(id), "SET #resume = :r, progress = :p, stalled = :zero")
        .when("#status = :running AND runs = :run")
        .name("#resume", "resume")
        .name("#status", "status")
        .value(":r", s(serde_json::to_string(r).expect("serializes")))
        .value(":p", shared::store::Value::M(progress))
        .value(":running", s("running"))
        .value(":run", n(run))
        .value(":zero", n(0))
        .required()
        .await?;
    Ok(())
}

/// Run (or resume) an export to the end.
pub async fn run(app: &App, ws: &WorkspaceId, id: &ExportId) -> ApiResult<()> {
    let Some(item) = app.db.get(&ws_pk(ws), &keys::EXPORT_JOB.sk(id)).await? else { return Ok(()) };
    let job: ExportJob = store::from_item(item.clone())?;
    if job.status.finished() {
        return Ok(());
    }
    let (runs, stalled) = super::jobs::begin_run(app, ws, &keys::EXPORT_JOB.sk(id)).await?;
    if stalled > super::jobs::MAX_RUNS {
        return fail(app, ws, &job, &item, "attempts_exhausted", "the export failed repeatedly; start a new one").await;
    }
    let subject: Option<Subject> = store::get_str(&item, "subject_full").and_then(|j| serde_json::from_str(j).ok());
    let key = object_key(ws, id);
    // A resumed run continues after its last part; a new one starts at the top. The multipart
    // upload begins with the first full part: a document smaller than one part is one PutObject.
    let mut r: Resume = store::get_str(&item, "resume").and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default();
    let srcs = sources(job.scope);
    let mut w = Writer::new(app.cfg.export_part_bytes);
    let generated_at = shared::ids::Timestamp::now();
    if !r.header {
        w.write(&header(id, job.scope, &job.subject, generated_at))?;
        r.header = true;
    }
    let none = Subject::default();
    let subj = subject.as_ref().unwrap_or(&none);
    while r.source < srcs.len() {
        let src = &srcs[r.source];
        if !r.opened {
            w.write(&opening(r.source.checked_sub(1).map(|i| srcs[i].area), src))?;
            r.opened = true;
        }
        let (items, next) = read(app, ws, src, subj, &r.cursor).await?;
        for v in &items {
            if r.in_source > 0 {
                w.write(",")?;
            }
            w.write(&v.to_string())?;
            r.in_source += 1;
        }
        r.advance(src, items.len() as u64, next);
        if w.full()? {
            let bytes = std::mem::replace(&mut w, Writer::new(app.cfg.export_part_bytes)).finish()?;
            if r.upload_id.is_empty() {
                r.upload_id = create_upload(app, &key).await?;
            }
            upload_part(app, &key, &mut r, bytes).await?;
            save(app, ws, id, runs, &r).await?;
        }
    }
    w.write(&closing(&job.subject, &r, generated_at, srcs.is_empty()))?;
    store_document(app, &key, &mut r, w.finish()?).await?;
    complete(app, ws, job, &r).await
}

/// The document's header object, left open for "sections".
fn header(id: &ExportId, scope: ExportScope, subject: &Option<SubjectRef>, generated_at: shared::ids::Timestamp) -> String {
    let head = serde_json::json!({"object": "gdpr_export_document", "schema_version": SCHEMA_VERSION, "export_id": id,
        "generated_at": generated_at, "scope": scope, "subject": subject})
    .to_string();
    format!("{},\"sections\":{{", &head[..head.len() - 1])
}

/// What opens a source's list: its area's object when the area changes (closing the previous
/// area's last list), else only its own list.
fn opening(prev_area: Option<&str>, src: &Source) -> String {
    match prev_area {
        None => format!("\"{}\":{{\"{}\":[", src.area, kind_key(&src.kind)),
        Some(a) if a != src.area => format!("]}},\"{}\":{{\"{}\":[", src.area, kind_key(&src.kind)),
        Some(_) => format!("],\"{}\":[", kind_key(&src.kind)),
    }
}

/// What closes the document: the last list and area (if any), the sections, and the manifest.
fn closing(subject: &Option<SubjectRef>, r: &Resume, generated_at: shared::ids::Timestamp, no_sources: bool) -> String {
    let total: u64 = r.progress.values().flat_map(|k| k.values()).sum();
    let manifest = serde_json::json!({"schema_version": SCHEMA_VERSION, "generated_at": generated_at, "subject": subject,
        "areas": r.progress, "total_items": total});
    format!("{}}},\"manifest\":{manifest}}}", if no_sources { "" } else { "]}" })
}

/// One page of a source: a rule's items with their companions (subject scope), or a kind's
/// items as exported (workspace scope).
async fn read(
    app: &App,
    ws: &WorkspaceId,
    src: &Source,
    subj: &Subject,
    at: &Cursor,
) -> ApiResult<(Vec<serde_json::Value>, Option<Cursor>)> {
    match &src.rule {
        Some(rule) => {
            let (items, next) = super::page(app, ws, rule, subj, at).await?;
            Ok((with_companions(app, rule, items).await?, next))
        }
        None => {
            let prefix = keys::literal_prefix(src.kind.table.sk);
            let out = app.db.query_page(store::QuerySpec::new(ws_pk(ws), prefix, at.after.clone(), super::PAGE)).await?;
            let next = out.next_after.map(|a| Cursor { partition: 0, after: Some(a) });
            Ok((out.items.into_iter().map(crate::privacy::exported).collect(), next))
        }
    }
}

impl Resume {
    /// Count a page of `src` written, and move to its next page, or to the next source.
    fn advance(&mut self, src: &Source, written: u64, next: Option<Cursor>) {
        *self.progress.entry(src.area.to_string()).or_default().entry(kind_key(&src.kind)).or_default() += written;
        match next {
            Some(c) => self.cursor = c,
            None => {
                self.source += 1;
                self.opened = false;
                self.in_source = 0;
                self.cursor = Cursor::default();
            }
        }
    }
}

/// Put the finished document: one PutObject when it never filled a part, else its last part
/// and the completion of the multipart upload. A run that died after completing the upload
/// left the document whole (the upload is gone, the object is there), which counts as stored.
async fn store_document(app: &App, key: &str, r: &mut Resume, bytes: Vec<u8>) -> ApiResult<()> {
    let stored = async {
        if r.upload_id.is_empty() {
            r.bytes = bytes.len() as u64;
            app.s3()
                .put_object()
                .bucket(&app.cfg.exports_bucket)
                .key(key)
                .content_type(CONTENT_TYPE)
                .content_encoding(CONTENT_ENCODING)
                .body(bytes.into())
                .send()
                .await
                .map_err(|e| s3_error("put", e))?;
            return Ok(());
        }
        upload_part(app, key, r, bytes).await?;
        app.s3()
            .complete_multipart_upload()
            .bucket(&app.cfg.exports_bucket)
            .key(key)
            .upload_id(&r.upload_id)
            .multipart_upload(
                aws_sdk_s3::types::CompletedMultipartUpload::builder()
                    .set_parts(Some(
                        r.parts
                            .iter()
                            .map(|(n, etag)| aws_sdk_s3::types::CompletedPart::builder().part_number(*n as i32).e_tag(etag).build())
                            .collect(),
                    ))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| s3_error("complete upload", e))?;
        Ok::<_, ApiError>(())
    }
    .await;
    match stored {
        Err(e) if app.s3().head_object().bucket(&app.cfg.exports_bucket).key(key).send().await.is_err() => Err(e),
        _ => Ok(()),
    }
}

/// Attach each item's companions (an email's bodies) and shape it for the document.
async fn with_companions(app: &App, rule: &Rule, items: Vec<Item>) -> ApiResult<Vec<serde_json::Value>> {
    let children: Vec<Rule> = super::children_of(rule).into_iter().filter(|c| c.export).collect();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let mut v = crate::privacy::exported(item.clone());
        for child in &children {
            let keys = super::companion_keys(child, &item);
            let found = if keys.is_empty() { vec![] } else { app.db.batch_get(&keys).await? };
            v[kind_key(&child.kind)] = serde_json::Value::Array(found.into_iter().map(crate::privacy::exported).collect());
        }
        out.push(v);
    }
    Ok(out)
}

async fn complete(app: &App, ws: &WorkspaceId, mut job: ExportJob, r: &Resume) -> ApiResult<()> {
    let now = chrono::Utc::now();
    job.status = JobStatus::Completed;
    job.progress = flat_progress(&r.progress);
    job.started_at = job.started_at.or_else(|| Some(shared::ids::Timestamp::from(now)));
    job.completed_at = Some(shared::ids::Timestamp::from(now));
    job.expires_at = Some(shared::ids::Timestamp::from(now + chrono::Duration::days(KEEP_DAYS)));
    job.size_bytes = Some(r.bytes);
    finish(app, ws, &job, EventType::GdprExportCompleted).await
}

async fn fail(app: &App, ws: &WorkspaceId, job: &ExportJob, item: &Item, code: &str, message: &str) -> ApiResult<()> {
    if let Some(r) = store::get_str(item, "resume").and_then(|j| serde_json::from_str::<Resume>(j).ok()).filter(|r| !r.upload_id.is_empty())
    {
        let _ = app
            .s3()
            .abort_multipart_upload()
            .bucket(&app.cfg.exports_bucket)
            .key(object_key(ws, &job.id))
            .upload_id(&r.upload_id)
            .send()
            .await;
    }
    let mut job = job.clone();
    job.status = JobStatus::Failed;
    job.completed_at = Some(shared::ids::Timestamp::now());
    job.error = Some(JobError { code: code.into(), message: message.into() });
    finish(app, ws, &job, EventType::GdprExportFailed).await
}

/// The final state, without the resume record, and its event, in one transaction; only a
/// running job finishes (a second worker on the same job finds it finished).
async fn finish(app: &App, ws: &WorkspaceId, job: &ExportJob, event: EventType) -> ApiResult<()> {
    let update = super::set_all(ws_pk(ws), keys::EXPORT_JOB.sk(&job.id), store::to_item(job)?, &["resume", "subject_full"])
        .when("#status = :running")
        .name("#status", "status")
        .value(":running", s("running"));
    let ev = Event::new(
        ws,
        event,
        &serde_json::json!({"id": job.id, "object": "gdpr_export", "scope": job.scope, "status": job.status,
        "completed_at": job.completed_at, "expires_at": job.expires_at, "error": job.error}),
    );
    Tx::new().update(update).event(ev).commit(app).await.map_err(|e| match e {
        store::TxError::Condition(_) => ApiError::conflict("the export finished elsewhere"),
        store::TxError::Api(e) => e,
    })
}

/// After an erasure, no earlier workspace export still hands out the subject: a completed one
/// loses its document and its link (it reads expired, with `error.code` `withdrawn`), and one
/// not yet finished is failed the same way (its worker's finish then finds it finished). The
/// admin exports again. One Query of the workspace's exports (they last 7 days), then one
/// write per workspace export still live.
pub async fn withdraw_workspace_exports(app: &App, ws: &WorkspaceId) -> ApiResult<u32> {
    let now = shared::ids::Timestamp::now();
    let mut after = None;
    let mut withdrawn = 0;
    loop {
        let out = app.db.query_page(keys::EXPORT_JOBS.query(ws, after, 100)).await?;
        for item in out.items {
            let mut job: ExportJob = store::from_item(item)?;
            let live = match job.status {
                JobStatus::Completed => job.expires_at.is_some_and(|t| *t > *now),
                JobStatus::Pending | JobStatus::Running => true,
                JobStatus::Failed => false,
            };
            if job.scope != ExportScope::Workspace || !live {
                continue;
            }
            let was = job.status;
            if was == JobStatus::Completed {
                app.s3()
                    .delete_object()
                    .bucket(&app.cfg.exports_bucket)
                    .key(object_key(ws, &job.id))
                    .send()
                    .await
                    .map_err(|e| s3_error("delete", e))?;
                job.expires_at = Some(now);
            } else {
                job.status = JobStatus::Failed;
                job.completed_at = Some(now);
            }
            job.error = Some(JobError {
                code: "withdrawn".into(),
                message: "a personal-data erasure since this export began withdrew it; export again".into(),
            });
            let update = super::set_all(ws_pk(ws), keys::EXPORT_JOB.sk(&job.id), store::to_item(&job)?, &["resume", "subject_full"])
                .when("#status = :was")
                .name("#status", "status")
                .value(":was", s(was.as_str()));
            match Tx::new().update(update).commit(app).await {
                Ok(()) => withdrawn += 1,
                // It moved on meanwhile (finished or failed): the next erasure run looks again.
                Err(store::TxError::Condition(_)) => {
                    return Err(ApiError::unavailable("an export changed while it was withdrawn; retrying"));
                }
                Err(store::TxError::Api(e)) => return Err(e),
            }
        }
        after = out.next_after;
        if after.is_none() {
            return Ok(withdrawn);
        }
    }
}

/// Erasing a subject deletes the exports about them, document and job.
async fn erase_job(app: &App, ws: &WorkspaceId, item: Item, _subject: &Subject) -> ApiResult<()> {
    let Some(id) = store::get_str(&item, "id") else { return Ok(()) };
    app.s3().delete_object().bucket(&app.cfg.exports_bucket).key(object_key(ws, id)).send().await.map_err(|e| s3_error("delete", e))?;
    app.db.delete(&ws_pk(ws), &keys::EXPORT_JOB.sk(&ExportId::trusted(id))).await
}

/// The download link of one of the customer's completed exports, emailed to their own address
/// (the pages never show it: whoever holds the screen does not get the file).
pub async fn email_link(
    auth: &Authority<crate::effects::SendEmail>,
    app: &App,
    ws: &WorkspaceId,
    contact: &crate::contacts::Contact,
    export_id: &ExportId,
    lang: crate::portal::Lang,
) -> ApiResult<crate::emails::Email> {
    let job = load(app, ws, export_id)
        .await?
        .filter(|j| j.subject.as_ref().and_then(|s| s.contact_id.as_deref()) == Some(contact.id.as_str()))
        .ok_or_else(|| ApiError::not_found("export"))?;
    let url = job.download_url.ok_or_else(|| ApiError::conflict("the export is not ready, or its file has expired"))?;
    let from = crate::portal::sender(app, ws).await?;
    let (w, _) = crate::workspaces::load(app, ws).await?;
    let (subject, text) = match lang {
        crate::portal::Lang::En => (
            format!("Your data from {}", w.name),
            format!(
                "Download everything {} holds about you (the link works for one hour):\n\n{}\n",
                w.name,
                crate::emails::secret_placeholder("link")
            ),
        ),
        crate::portal::Lang::Nb => (
            format!("Dataene dine fra {}", w.name),
            format!("Last ned alt {} har om deg (lenken virker i én time):\n\n{}\n", w.name, crate::emails::secret_placeholder("link")),
        ),
    };
    let email = crate::portal::mail_to(app, ws, contact, &from, &subject, text, &[("link", &url)]).await?;
    crate::emails::compose::send(auth, app, ws, &email, chrono::Utc::now().timestamp()).await?;
    Ok(email)
}

/// One page of the export jobs, newest first.
pub async fn list(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<ExportJob>, Option<String>)> {
    shared::request::page(app, keys::EXPORT_JOBS.query(ws, after, limit).descending()).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn source(area: &'static str, kind: Kind) -> Source {
        Source { area, kind, rule: None }
    }

    /// The pieces a run writes frame one JSON document: a section per area, a list per kind
    /// (empty ones too), and the manifest with the counts `advance` kept.
    #[test]
    fn the_pieces_make_one_document() {
        let srcs = [source("contacts", keys::CONTACT.kind), source("contacts", keys::ACTIVITY.kind), source("emails", keys::EMAIL.kind)];
        let pages: [&[&str]; 3] = [&[r#"{"a":1}"#, r#"{"a":2}"#], &[], &[r#"{"e":1}"#]];
        let (id, at) = (ExportId::generate(), shared::ids::Timestamp::now());
        let mut r = Resume::default();
        let mut doc = header(&id, ExportScope::Workspace, &None, at);
        while r.source < srcs.len() {
            let src = &srcs[r.source];
            if !r.opened {
                doc += &opening(r.source.checked_sub(1).map(|i| srcs[i].area), src);
                r.opened = true;
            }
            for v in pages[r.source] {
                if r.in_source > 0 {
                    doc += ",";
                }
                doc += v;
                r.in_source += 1;
            }
            r.advance(src, pages[r.source].len() as u64, None);
        }
        doc += &closing(&None, &r, at, false);
        let v: Value = serde_json::from_str(&doc).unwrap_or_else(|e| panic!("{e}: {doc}"));
        assert_eq!(v["export_id"], id.as_str());
        assert_eq!(v["sections"]["contacts"], json!({"contact": [{"a": 1}, {"a": 2}], "activity": []}));
        assert_eq!(v["sections"]["emails"], json!({"email": [{"e": 1}]}));
        assert_eq!(v["manifest"]["total_items"], 3);
        assert_eq!(v["manifest"]["areas"]["contacts"], json!({"activity": 0, "contact": 2}));
        let empty = header(&id, ExportScope::Workspace, &None, at) + &closing(&None, &Resume::default(), at, true);
        assert_eq!(serde_json::from_str::<Value>(&empty).expect("an empty document")["sections"], json!({}));
    }

    /// A page with more to come keeps the run in its source at the new cursor; the last page
    /// moves it to the next source, whose list is not open yet.
    #[test]
    fn a_source_ends_with_its_last_page() {
        let src = source("contacts", keys::CONTACT.kind);
        let mut r = Resume { opened: true, in_source: 100, ..Resume::default() };
        let more = Cursor { partition: 0, after: Some("CONTACT#ct_1".into()) };
        r.advance(&src, 100, Some(more.clone()));
        assert_eq!((r.source, r.opened, r.in_source, &r.cursor), (0, true, 100, &more));
        r.advance(&src, 5, None);
        assert_eq!((r.source, r.opened, r.in_source, &r.cursor), (1, false, 0, &Cursor::default()));
        assert_eq!(r.progress["contacts"]["contact"], 105);
    }
}
