//! Files sent with an email: checked on accept (decoded, typed by their bytes, executables
//! refused, the whole message measured against SES's limit), written once to the mail bucket
//! beside the email's record, read by the sender alone, and deleted when the email reaches a
//! final state or its recipient is erased. The email's record lists them (name, type, size,
//! SHA-256); the bytes are never in DynamoDB, an event or an answer.
//!
//! Objects: `outbound/<ws>/<email id>/<index>` (a prefix of their own, so the functions that
//! send mail reach no inbound file), written tagged [`shared::aws::UNLINKED_TAG`] before the
//! email's transaction and untagged after it, so an email that was never recorded leaves
//! nothing behind a day later (the bucket's lifecycle). Only emails that will be sent store
//! files: one suppressed on accept lists them and keeps none.

use super::Email;
use crate::ids::EmailUploadId;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::validate::Errors;
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;
use std::sync::Arc;
use utoipa::ToSchema;

pub const MAX_ATTACHMENTS: usize = 20;
const MAX_FILENAME_CHARS: usize = 255;

/// A file to send, as `POST /emails` takes it.
#[derive(Deserialize, ToSchema, Clone, Debug)]
#[serde(deny_unknown_fields)]
#[schema(as = NewEmailAttachment)]
pub struct NewAttachment {
    /// The name the recipient sees: 1 to 255 characters, no path separators or control
    /// characters.
    #[schema(min_length = 1, max_length = 255)]
    pub filename: String,
    /// e.g. `application/pdf`. Defaults to the type the bytes show (else
    /// `application/octet-stream`); when the bytes show a type, this must agree with it.
    #[serde(default)]
    pub content_type: Option<String>,
    /// The file, base64 (standard alphabet; padding and line breaks optional); or
    /// `upload_id` instead.
    #[serde(default)]
    #[schema(content_encoding = "base64", extensions(("x-exactly-one" = json!(["content", "upload_id"]))))]
    pub content: Option<String>,
    /// A file uploaded through `POST /emails/attachments` (`eup_...`), instead of `content`:
    /// for files too large for a request body.
    #[serde(default)]
    #[schema(value_type = Option<crate::ids::EmailUploadId>)]
    pub upload_id: Option<String>,
    /// Sends the file inline, for the HTML to show as `<img src="cid:...">`: 1 to 100 of
    /// `A-Z a-z 0-9 . _ @ -`, unique within the email.
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9._@-]{1,100}$")]
    pub content_id: Option<String>,
}

/// A file sent with an email, as its record lists it.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[schema(as = EmailAttachment)]
pub struct Attachment {
    /// `[erased]` once the recipient was erased.
    pub filename: String,
    pub content_type: String,
    /// Bytes, decoded.
    pub size: u64,
    /// Set for an inline file (`cid:`).
    #[schema(pattern = "^[A-Za-z0-9._@-]{1,100}$")]
    pub content_id: Option<String>,
    /// SHA-256 of the bytes (hex); null once the recipient was erased.
    pub sha256: Option<String>,
}

/// An attachment's bytes, shared by the copies of its email (cheap to clone).
pub type Bytes = Arc<[u8]>;

/// Types the bytes show that are not sent: programs, libraries, installers and browser
/// extensions, whatever the file is called.
const DANGEROUS_TYPES: &[&str] = &[
    "application/vnd.microsoft.portable-executable",
    "application/x-executable",
    "application/x-mach-binary",
    "application/java",
    "application/wasm",
    "application/x-llvm",
    "application/vnd.android.dex",
    "application/vnd.android.dey",
    "application/x-shockwave-flash",
    "application/x-google-chrome-extension",
    "application/vnd.ms-cab-compressed",
    "application/vnd.debian.binary-package",
    "application/x-rpm",
    "text/x-shellscript",
];

/// Names mail providers refuse (Gmail's list): scripts and shortcuts have no magic number, so
/// their name is the only evidence, and a recipient's system runs them by it.
const DANGEROUS_EXTENSIONS: &[&str] = &[
    "ade",
    "adp",
    "apk",
    "appx",
    "appxbundle",
    "bat",
    "cab",
    "chm",
    "cmd",
    "com",
    "cpl",
    "diagcab",
    "diagcfg",
    "diagpack",
    "dll",
    "dmg",
    "ex",
    "ex_",
    "exe",
    "hta",
    "img",
    "ins",
    "iso",
    "isp",
    "jar",
    "jnlp",
    "js",
    "jse",
    "lib",
    "lnk",
    "mde",
    "mjs",
    "msc",
    "msi",
    "msix",
    "msixbundle",
    "msp",
    "mst",
    "nsh",
    "pif",
    "ps1",
    "scr",
    "sct",
    "shb",
    "sys",
    "vb",
    "vbe",
    "vbs",
    "vhd",
    "vxd",
    "wsc",
    "wsf",
    "wsh",
    "xll",
];

/// Zip-based formats whose bytes may read as a plain zip.
const ZIP_FORMATS: &[&str] = &[
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.oasis.opendocument.text",
    "application/vnd.oasis.opendocument.spreadsheet",
    "application/vnd.oasis.opendocument.presentation",
    "application/epub+zip",
    "application/x-zip-compressed",
];

/// `type/subtype` in lower case, without parameters, when it is one.
fn essence(content_type: &str) -> Option<String> {
    let t = content_type.split(';').next()?.trim().to_ascii_lowercase();
    let (kind, sub) = t.split_once('/')?;
    let token = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b));
    // A container type would need a structure (boundaries, a message) the file does not have.
    (token(kind) && token(sub) && t.len() <= 127 && kind != "multipart" && kind != "message").then_some(t)
}

/// Do the declared type and the one the bytes show agree?
fn agrees(declared: &str, sniffed: &str) -> bool {
    declared == sniffed
        || (sniffed == "application/zip" && ZIP_FORMATS.contains(&declared))
        || (declared == "image/jpg" && sniffed == "image/jpeg")
        || (declared == "application/x-zip-compressed" && sniffed == "application/zip")
}

/// Check and decode the request's files: each becomes its record entry and its bytes.
pub fn check(errs: &mut Errors, list: &[NewAttachment]) -> Vec<Source> {
    if list.len() > MAX_ATTACHMENTS {
        errs.add("attachments", format!("at most {MAX_ATTACHMENTS} files"));
        return vec![];
    }
    let lenient = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let mut out = vec![];
    let mut ids: Vec<&str> = vec![];
    for (i, a) in list.iter().enumerate() {
        let field = |f: &str| format!("attachments[{i}].{f}");
        let name = &a.filename;
        // Bidirectional and invisible formatting characters make `exe.pdf` read as `fdp.exe`;
        // a trailing dot or space is dropped by Windows when it saves (`run.vbs.` is `run.vbs`).
        let spoofing = |c: char| matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}');
        if name.trim().is_empty()
            || name.chars().count() > MAX_FILENAME_CHARS
            || name.chars().any(|c| c.is_control() || spoofing(c) || c == '/' || c == '\\')
            || name.ends_with(['.', ' '])
        {
            errs.add(
                field("filename"),
                "1 to 255 characters, without path separators, control or direction characters, not ending in a dot or space",
            );
            continue;
        }
        let extension = name.rsplit_once('.').map(|(_, e)| e.trim().to_ascii_lowercase());
        if extension.as_deref().is_some_and(|e| DANGEROUS_EXTENSIONS.contains(&e)) {
            errs.add(field("filename"), "files of this kind (programs, scripts, disk images) are not sent; mail providers refuse them");
            continue;
        }
        let declared = match a.content_type.as_deref().map(essence) {
            Some(None) => {
                errs.add(field("content_type"), "must be a media type such as application/pdf (not multipart/ or message/)");
                continue;
            }
            Some(d) => d,
            None => None,
        };
        if let Some(cid) = &a.content_id {
            if !(1..=100).contains(&cid.len()) || !cid.bytes().all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b)) {
                errs.add(field("content_id"), "1 to 100 of A-Z a-z 0-9 . _ @ -");
                continue;
            }
            if ids.contains(&cid.as_str()) {
                errs.add(field("content_id"), "is used by another file of this email");
                continue;
            }
            ids.push(cid);
        }
        let file = File { index: i, filename: name.clone(), declared, content_id: a.content_id.clone() };
        match (&a.content, &a.upload_id) {
            (Some(content), None) => {
                let compact: Vec<u8> = content.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
                match lenient.decode(&compact) {
                    Ok(bytes) => {
                        if let Some(ready) = inspect(errs, file, Bytes::from(bytes)) {
                            out.push(Source::Ready(ready.0, ready.1));
                        }
                    }
                    Err(_) => errs.add(field("content"), "must be base64"),
                }
            }
            (None, Some(upload)) => match <EmailUploadId as shared::ids::PrefixedId>::parse(upload) {
                Some(id) => out.push(Source::Upload(file, id)),
                None => errs.add(field("upload_id"), "must be an upload id (eup_..., from POST /emails/attachments)"),
            },
            _ => errs.add(field("content"), "give the file as content (base64) or as upload_id, one of the two"),
        }
    }
    out
}

/// A file's checks that need no bytes, done: what is left to check once they are read.
#[derive(Clone, Debug)]
pub struct File {
    index: usize,
    filename: String,
    /// The declared type, as its essence.
    declared: Option<String>,
    content_id: Option<String>,
}

/// A file of a send: its bytes came with the request, or are in an upload to read.
#[derive(Clone, Debug)]
pub enum Source {
    Ready(Attachment, Bytes),
    Upload(File, EmailUploadId),
}

/// The checks of a file's bytes: not empty, not a program, of the declared type.
fn inspect(errs: &mut Errors, f: File, bytes: Bytes) -> Option<(Attachment, Bytes)> {
    let field = |x: &str| format!("attachments[{}].{x}", f.index);
    if bytes.is_empty() {
        errs.add(field("content"), "the file is empty");
        return None;
    }
    let sniffed = infer::get(&bytes);
    if let Some(t) = sniffed.filter(|t| DANGEROUS_TYPES.contains(&t.mime_type())) {
        errs.add(field("content"), format!("programs and scripts are not sent (the bytes are {})", t.mime_type()));
        return None;
    }
    // Text kinds (HTML, XML) are guessed from the first characters: no ground to refuse a
    // declared type on.
    let known = sniffed.filter(|t| t.matcher_type() != infer::MatcherType::Text).map(|t| t.mime_type());
    let content_type = match (f.declared, known) {
        (Some(d), Some(s)) if !agrees(&d, s) => {
            errs.add(field("content_type"), format!("the bytes are {s}, not {d}"));
            return None;
        }
        (Some(d), _) => d,
        (None, Some(s)) => s.to_string(),
        (None, None) => "application/octet-stream".to_string(),
    };
    let entry = Attachment {
        filename: f.filename,
        content_type,
        size: bytes.len() as u64,
        content_id: f.content_id,
        sha256: Some(shared::crypto::sha256_hex(&bytes)),
    };
    Some((entry, bytes))
}

/// Every file of a send with its bytes, the uploads' read (`uploads`, by id: their bytes, or
/// why not) and checked like the others.
pub fn ready(
    errs: &mut Errors,
    sources: Vec<Source>,
    uploads: &BTreeMap<EmailUploadId, Result<Bytes, String>>,
) -> Vec<(Attachment, Bytes)> {
    let mut out = vec![];
    for s in sources {
        match s {
            Source::Ready(a, b) => out.push((a, b)),
            Source::Upload(f, id) => match uploads.get(&id) {
                Some(Ok(bytes)) => out.extend(inspect(errs, f, bytes.clone())),
                Some(Err(why)) => errs.add(format!("attachments[{}].upload_id", f.index), why.clone()),
                None => errs.add(format!("attachments[{}].upload_id", f.index), "was not read"),
            },
        }
    }
    out
}

/// The uploads the sources name.
pub fn uploads_named(sources: &[Source]) -> impl Iterator<Item = &EmailUploadId> {
    sources.iter().filter_map(|s| match s {
        Source::Upload(_, id) => Some(id),
        Source::Ready(..) => None,
    })
}

/// Where an upload is: a prefix the bucket's lifecycle empties after a day.
fn upload_key(ws: &WorkspaceId, id: &EmailUploadId) -> String {
    format!("uploads/{ws}/{id}")
}

/// The upload's metadata that holds the SHA-256 its creator declared (signed into the link).
const SHA256_META: &str = "sha256";

/// How long an upload link is valid.
const UPLOAD_LINK_SECS: u64 = 3600;

/// What `POST /emails/attachments` takes.
#[derive(Deserialize, ToSchema, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct CreateUpload {
    /// The file's size in bytes: the link writes exactly this many. At most what fits in a
    /// message once encoded (with SES's 40 MB: 29,934,464; less where the deployment lowers
    /// `EMAIL_MAX_MESSAGE_BYTES`).
    #[schema(minimum = 1, maximum = 29934464)]
    pub size: u64,
    /// The file's SHA-256 (hex): a send refuses an upload whose bytes differ, and two files
    /// are two requests (an agent's retried call with the same arguments gets the same link).
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub sha256: String,
}

/// A place to upload one file to, for sends to name by `upload_id`.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct EmailUpload {
    /// `eup_...`: name it as an attachment's `upload_id`, in any number of sends within a day.
    pub id: EmailUploadId,
    /// Always `email_upload`.
    pub object: String,
    /// `PUT` the file's bytes here, with exactly `headers`, before `expires_at`.
    pub upload_url: String,
    pub headers: BTreeMap<String, String>,
    pub size: u64,
    pub expires_at: shared::ids::Timestamp,
}

/// A presigned link to upload a file too large for a request body (up to what fits in a
/// message once encoded); the upload is kept a day.
pub async fn create_upload(app: &App, ws: &WorkspaceId, input: &CreateUpload) -> ApiResult<EmailUpload> {
    let max = max_file_bytes(app);
    if !shared::validate::is_sha256_hex(&input.sha256) {
        return Err(ApiError::validation("sha256", "the file's SHA-256, 64 lower-case hex digits"));
    }
    if input.size == 0 || input.size > max {
        return Err(ApiError::validation(
            "size",
            format!("1 to {max} bytes (a message, files encoded, is at most {} bytes)", app.cfg.email.max_message_bytes),
        ));
    }
    let id = EmailUploadId::generate();
    let (url, headers) = shared::aws::presigned_put(
        app.s3(),
        &app.cfg.mail_bucket,
        &upload_key(ws, &id),
        input.size,
        &[(SHA256_META, &input.sha256)],
        std::time::Duration::from_secs(UPLOAD_LINK_SECS),
    )
    .await
    .map_err(|e| s3_error("presign", e))?;
    let expires_at = shared::ids::Timestamp::from(chrono::Utc::now() + chrono::Duration::seconds(UPLOAD_LINK_SECS as i64));
    Ok(EmailUpload {
        id,
        object: "email_upload".into(),
        upload_url: url,
        headers: headers.into_iter().collect(),
        size: input.size,
        expires_at,
    })
}

/// The largest file that fits in a message once encoded.
fn max_file_bytes(app: &App) -> u64 {
    file_bytes_within(app.cfg.email.max_message_bytes)
}

/// The largest file a message of `limit` bytes holds once encoded, with room for the rest.
fn file_bytes_within(limit: usize) -> u64 {
    (limit as u64 * 3 / 4).saturating_sub(64 * 1024)
}

/// Read the named uploads of one request, each once (a batch may name one upload in every
/// entry). An upload that is missing (never written, or older than a day) or too large is a
/// reason, per upload; the bytes read by one request are bounded by one message's limit.
pub async fn read_uploads<'a>(
    app: &App,
    ws: &WorkspaceId,
    ids: impl Iterator<Item = &'a EmailUploadId>,
) -> ApiResult<BTreeMap<EmailUploadId, Result<Bytes, String>>> {
    let mut ids: Vec<&EmailUploadId> = ids.collect();
    ids.sort();
    ids.dedup();
    let mut out = BTreeMap::new();
    let (max, mut budget) = (max_file_bytes(app), app.cfg.email.max_message_bytes as u64);
    for (n, id) in ids.into_iter().enumerate() {
        if n >= MAX_ATTACHMENTS || budget == 0 {
            out.insert(
                id.clone(),
                Err(format!("one request may name at most {MAX_ATTACHMENTS} uploads, of one message's worth of bytes in all")),
            );
            continue;
        }
        let key = upload_key(ws, id);
        let head = shared::aws::object_head(app.s3(), &app.cfg.mail_bucket, &key).await.map_err(|e| s3_error("head", e))?;
        let declared = head.as_ref().and_then(|(_, meta)| meta.get(SHA256_META).cloned()).unwrap_or_default();
        let found = match head.map(|(n, _)| n) {
            None => Err("no such upload in this workspace (uploads are kept a day; PUT the file before sending)".to_string()),
            Some(n) if n > max => Err(format!("the upload is {n} bytes; a file fits in a message up to {max}")),
            Some(n) if n > budget => Err("the uploads one request names may hold one message's worth of bytes in all".to_string()),
            Some(n) => {
                budget -= n;
                match shared::aws::get_object(app.s3(), &app.cfg.mail_bucket, &key).await.map_err(|e| s3_error("get", e))? {
                    // Every PUT through its link has the signed length; anything else is not it.
                    Some(bytes) if bytes.len() as u64 == n && shared::crypto::sha256_hex(&bytes) == declared => Ok(Bytes::from(bytes)),
                    Some(_) => Err("the upload's bytes are not the file its SHA-256 named; upload it again".to_string()),
                    None => Err("no such upload in this workspace".to_string()),
                }
            }
        };
        out.insert(id.clone(), found);
    }
    Ok(out)
}

/// Base64 with a line break every 76 characters, as MIME writes it.
fn encoded_len(n: usize) -> usize {
    let b64 = n.div_ceil(3) * 4;
    b64 + b64.div_ceil(76) * 2
}

/// The message's size as SES will count it, estimated from above: what comes before the
/// files, then the running total after each file. Bodies count double (a body of short lines
/// doubles when its line breaks become CRLF; base64 adds a third), names eight times over
/// (RFC 2231 writes a byte as `%XX`, in continuation lines, and RFC 2047 again).
pub fn estimate(e: &Email) -> (usize, Vec<usize>) {
    const HEADERS: usize = 4096;
    const PART_HEADERS: usize = 512;
    let headers: usize = e.headers.iter().map(|(k, v)| k.len() + v.len() * 2 + 4).sum::<usize>()
        + [&e.to, &e.cc, &e.reply_to].iter().flat_map(|l| l.iter()).map(|a| a.len() * 2 + 4).sum::<usize>()
        + e.from.len() * 2
        + e.subject.len() * 2;
    let bodies: usize = [&e.html, &e.text, &e.calendar].iter().filter_map(|b| b.as_ref()).map(|b| 2 * b.len() + 3 + PART_HEADERS).sum();
    let before = HEADERS + headers + bodies;
    let mut total = before;
    let after = e
        .attachments
        .iter()
        .map(|a| {
            total += encoded_len(a.size as usize) + PART_HEADERS + a.filename.len() * 8 + a.content_id.as_ref().map_or(0, |c| c.len() + 16);
            total
        })
        .collect();
    (before, after)
}

/// Is the message within `limit`? Else a 400 naming the file with which it is not.
pub fn check_size(errs: &mut Errors, e: &Email, limit: usize) {
    let mb = |n: usize| format!("{:.1} MB", n as f64 / 1_000_000.0);
    let (before, after) = estimate(e);
    if before > limit {
        errs.add("html", format!("the message would be about {} before any file; the limit is {}", mb(before), mb(limit)));
        return;
    }
    if let Some((i, total)) = after.iter().enumerate().find(|(_, t)| **t > limit) {
        let name = &e.attachments[i].filename;
        errs.add(
            format!("attachments[{i}]"),
            format!("with {name} the message would be about {} once encoded; the limit for a whole message is {}", mb(*total), mb(limit)),
        );
    }
}

/// Where an email's file is.
pub fn key(ws: &WorkspaceId, email_id: &str, index: usize) -> String {
    format!("outbound/{ws}/{email_id}/{index}")
}

/// S3 calls of one request at once (a batch: up to 100 emails of 20 files).
const CONCURRENT_CALLS: usize = 16;

#[track_caller]
fn s3_error(what: &str, e: shared::aws::AwsError) -> ApiError {
    ApiError::unavailable(format!("s3 {what} attachment: {e}"))
}

/// The files of the emails that will be sent (pending), each as its email, index and key.
fn objects<'a>(ws: &WorkspaceId, emails: &[&'a Email]) -> Vec<(&'a Email, usize, String)> {
    emails.iter().filter(|e| e.status.pending()).flat_map(|e| (0..e.attachments.len()).map(move |i| (*e, i, key(ws, &e.id, i)))).collect()
}

/// Write the files of the emails that will be sent, tagged unlinked (before their transaction:
/// the sender must find them once the email is recorded).
pub async fn store(app: &App, ws: &WorkspaceId, emails: &[&Email]) -> ApiResult<()> {
    for chunk in objects(ws, emails).chunks(CONCURRENT_CALLS) {
        futures_util::future::try_join_all(chunk.iter().map(|(e, i, key)| async move {
            let bytes = e.files.get(*i).ok_or_else(|| ApiError::internal("an email's file was not loaded"))?;
            // The bytes are shared, not copied: a batch may send one upload in every entry.
            let body = bytes::Bytes::from_owner(bytes.clone());
            shared::aws::put_unlinked(app.s3(), &app.cfg.mail_bucket, key, body, &e.attachments[*i].content_type)
                .await
                .map_err(|err| s3_error("put", err))
        }))
        .await?;
    }
    Ok(())
}

/// Untag the files of recorded emails. A file left tagged would expire under a scheduled
/// email (after the SDK's retries: reported, and the email then fails `attachment_missing`
/// rather than going out without it).
pub async fn link(app: &App, ws: &WorkspaceId, emails: &[&Email]) {
    for chunk in objects(ws, emails).chunks(CONCURRENT_CALLS) {
        futures_util::future::join_all(chunk.iter().map(|(e, _, key)| async move {
            if let Err(err) = shared::aws::link_object(app.s3(), &app.cfg.mail_bucket, key).await {
                tracing::error!(error = %err, email_id = %e.id, "an email's file stays tagged unlinked and expires in a day");
            }
        }))
        .await;
    }
}

/// The email's files, in order, for the sender: `None` when one is gone (expired unlinked,
/// or erased).
pub async fn load(app: &App, ws: &WorkspaceId, e: &Email) -> ApiResult<Option<Vec<Bytes>>> {
    let gets = (0..e.attachments.len()).map(|i| {
        let key = key(ws, &e.id, i);
        async move { shared::aws::get_object(app.s3(), &app.cfg.mail_bucket, &key).await.map_err(|err| s3_error("get", err)) }
    });
    let found = futures_util::future::try_join_all(gets).await?;
    Ok(found.into_iter().map(|b| b.map(Bytes::from)).collect())
}

/// Delete the email's files: it reached a final state (nothing reads them again) or its
/// recipient is erased.
pub async fn discard(app: &App, ws: &WorkspaceId, e: &Email) -> ApiResult<()> {
    let deletes = (0..e.attachments.len()).map(|i| {
        let key = key(ws, &e.id, i);
        async move { shared::aws::delete_object(app.s3(), &app.cfg.mail_bucket, &key).await.map_err(|err| s3_error("delete", err)) }
    });
    futures_util::future::try_join_all(deletes).await?;
    Ok(())
}

/// What an erasure leaves of the list: types and sizes (a name, a hash or an inline id may
/// name the person).
pub fn redact(list: &mut [Attachment]) {
    for a in list {
        a.filename = super::ERASED_SUBJECT.into();
        a.sha256 = None;
        a.content_id = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(filename: &str, content_type: Option<&str>, bytes: &[u8]) -> Result<Attachment, String> {
        let mut errs = Errors::new();
        let input = NewAttachment {
            filename: filename.into(),
            content_type: content_type.map(String::from),
            content: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
            upload_id: None,
            content_id: None,
        };
        let sources = check(&mut errs, &[input]);
        let out = ready(&mut errs, sources, &BTreeMap::new());
        match errs.finish() {
            Ok(()) => Ok(out.into_iter().next().unwrap().0),
            Err(e) => Err(e.details.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; ")),
        }
    }

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
    const EXE: &[u8] = b"MZ\x90\0\x03\0\0\0\x04\0\0\0\xff\xff\0\0";

    #[test]
    fn the_bytes_decide_the_type_not_the_name() {
        assert_eq!(one("pixel.png", None, PNG).unwrap().content_type, "image/png");
        assert_eq!(one("notes.txt", Some("text/plain; charset=utf-8"), b"hello").unwrap().content_type, "text/plain");
        assert_eq!(one("blob", None, b"\x01\x02\x03").unwrap().content_type, "application/octet-stream");
        // A program named like a document is refused by its bytes.
        assert!(one("invoice.pdf", Some("application/pdf"), EXE).unwrap_err().contains("portable-executable"));
        // A type that the bytes contradict.
        assert!(one("pixel.pdf", Some("application/pdf"), PNG).unwrap_err().contains("the bytes are image/png"));
        // Scripts have no magic number: their name is refused.
        assert!(one("run.vbs", None, b"MsgBox 1").unwrap_err().contains("not sent"));
        assert!(one("a/b.txt", None, b"x").is_err());
        assert!(one("run.vbs.", None, b"MsgBox 1").is_err(), "Windows drops the dot");
        assert!(one("invoice\u{202e}fdp.exe", None, b"x").is_err(), "reads as invoice.exe.pdf");
        assert!(one("a.eml", Some("message/rfc822"), b"Subject: x").unwrap_err().contains("not multipart"));
        assert!(one("empty.txt", None, b"").unwrap_err().contains("empty"));
    }

    #[test]
    fn the_contract_states_the_default_largest_upload() {
        assert_eq!(file_bytes_within(shared::config::SES_MAX_MESSAGE_BYTES), 29_934_464, "CreateUpload.size's maximum in the contract");
    }

    #[test]
    fn base64_may_be_wrapped_and_unpadded() {
        let mut errs = Errors::new();
        let wrapped = "aGVs\r\nbG8g\nd29y bGQ";
        let input = NewAttachment {
            filename: "a.txt".into(),
            content_type: None,
            content: Some(wrapped.into()),
            upload_id: None,
            content_id: None,
        };
        let sources = check(&mut errs, &[input]);
        let out = ready(&mut errs, sources, &BTreeMap::new());
        assert!(errs.finish().is_ok());
        assert_eq!(&*out[0].1, b"hello world");
    }

    #[test]
    fn an_upload_is_checked_like_content_once_read() {
        let id = EmailUploadId::generate();
        let upload = |upload_id: Option<&str>, content: Option<&str>| NewAttachment {
            filename: "setup.pdf".into(),
            content_type: Some("application/pdf".into()),
            content: content.map(String::from),
            upload_id: upload_id.map(String::from),
            content_id: None,
        };
        let mut errs = Errors::new();
        let sources = check(&mut errs, &[upload(Some(id.as_str()), None)]);
        let read = BTreeMap::from([(id.clone(), Ok(Bytes::from(EXE)))]);
        assert!(ready(&mut errs, sources, &read).is_empty());
        assert!(errs.finish().unwrap_err().details[0].message.contains("programs"));
        for (u, c, field) in [(Some("eup_x"), None, "upload_id"), (Some(id.as_str()), Some("eA=="), "content"), (None, None, "content")] {
            let mut errs = Errors::new();
            check(&mut errs, &[upload(u, c)]);
            assert_eq!(errs.finish().unwrap_err().details[0].field.as_deref(), Some(format!("attachments[0].{field}").as_str()));
        }
    }
}
