//! `GET /emails`: its filters and the ways to answer them: a batch's emails in request order, a
//! contact's by its index, or the emails (by status when asked) newest first, with a tag as the
//! query's filter. The other filters apply to the page.

use super::{Email, EmailBatchId, EmailStatus, batch};
use crate::ids::ContactId;
use crate::keys;
use serde::Deserialize;
use shared::auth::WorkspaceId;
use shared::store::s;
use shared::{ApiResult, App};

/// The filters of `GET /emails` (`limit` and `cursor` are the page's); they combine.
#[derive(Deserialize)]
pub struct ListEmails {
    pub status: Option<EmailStatus>,
    #[serde(default)]
    pub contact_id: Option<ContactId>,
    pub tag: Option<String>,
    #[serde(default)]
    pub batch_id: Option<EmailBatchId>,
}

impl ListEmails {
    /// The filters as a page's cursor binds them.
    pub fn bound(&self) -> [(&'static str, Option<&str>); 4] {
        [
            ("status", self.status.map(EmailStatus::as_str)),
            ("contact_id", self.contact_id.as_deref()),
            ("tag", self.tag.as_deref()),
            ("batch_id", self.batch_id.as_deref()),
        ]
    }

    fn keeps(&self, e: &Email) -> bool {
        self.status.is_none_or(|p| e.status == p)
            && self.contact_id.as_deref().is_none_or(|c| e.contact_id.as_deref() == Some(c))
            && self.tag.as_deref().is_none_or(|t| e.tags.iter().any(|x| x == t))
    }
}

/// One page of emails after `after`, and the key to go on from.
pub async fn list(
    app: &App,
    ws: &WorkspaceId,
    q: &ListEmails,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Email>, Option<String>)> {
    if let Some(b) = &q.batch_id {
        let (emails, next) = batch::page(app, ws, b, after.as_deref(), limit).await?;
        return Ok((emails.into_iter().filter(|e| q.keeps(e)).collect(), next));
    }
    if let Some(c) = &q.contact_id {
        let spec = keys::EMAILS_OF_CONTACT.query((ws, c), after, limit).descending();
        let (emails, next) = shared::request::keyed_page::<Email>(app, spec).await?;
        return Ok((emails.into_iter().filter(|e| q.keeps(e)).collect(), next));
    }
    let mut spec = match q.status {
        Some(st) => keys::EMAILS_BY_STATUS.query((ws, st.as_str()), after, limit),
        None => keys::EMAILS.query(ws, after, limit),
    }
    .descending();
    if let Some(t) = &q.tag {
        spec = spec.filter("contains(tags, :tag)", vec![(":tag", s(t))]);
    }
    shared::request::page::<Email>(app, spec).await
}
