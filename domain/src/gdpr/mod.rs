//! GDPR: exports and erasures of what every area holds about a person, above every area.
//!
//! Each area declares, for each of its personal kinds, a [`Rule`] (`crate::privacy`): how a
//! subject's items of that kind are found, whether they go into the subject's export, and how
//! they are erased. [`rules`] collects them, and a test fails when a personal kind has no rule,
//! so a new area cannot forget its part. The export and erasure jobs ([`export`], [`erasure`])
//! only ever run these rules; the consent ledger is the contacts area's (`contacts::consents`).

pub mod erasure;
pub mod export;
pub mod jobs;
mod store;
pub mod worker;

pub use crate::ids::{ErasureId, ExportId};
use crate::privacy::{Erase, Find, Rule, Subject};
use serde::{Deserialize, Serialize};
pub use store::{companion_keys, erase_item, page, resolve, rules, set_all, subject_of};
use utoipa::ToSchema;

/// Whom a GDPR request is about, as the API names them.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SubjectRef {
    #[schema(format = Email, max_length = 254)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    // A string, as a request gives it: `resolve` checks it.
    #[schema(value_type = Option<crate::ids::ContactId>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_id: Option<String>,
}

/// Whom an erasure or an export reaches, resolved: the contact (or nobody, for an address no
/// contact holds or held) and every address, phone and name it will find the person by.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Reach {
    /// The contact it resolves to; null when nobody holds or held the address.
    pub contact_id: Option<crate::ids::ContactId>,
    pub email: String,
    pub former_emails: Vec<String>,
    pub phones: Vec<String>,
    pub names: Vec<String>,
}

impl Reach {
    pub fn of(s: &Subject) -> Self {
        Self {
            contact_id: s.contact_id.clone(),
            email: s.email.clone(),
            former_emails: s.former_emails.clone(),
            phones: s.phones.clone(),
            names: s.names.clone(),
        }
    }
}

/// The value of `EraseSubject`: whom it erases and the reason the audit record keeps.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Erasing {
    pub subject: Reach,
    pub reason: String,
}

impl crate::effects::Valued for crate::effects::EraseSubject {
    type Value = Erasing;
}

/// The value of `ExportSubject`: whose data it gathers (the link goes to the caller, or for a
/// customer to their own address).
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Exporting {
    pub subject: Reach,
}

/// The value of `ExportWorkspace`: everything the workspace holds, to the caller.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Everything {
    pub workspace_id: shared::auth::WorkspaceId,
}

impl crate::effects::Valued for crate::effects::ExportWorkspace {
    type Value = Everything;
}

impl crate::effects::Valued for crate::effects::ExportSubject {
    type Value = Exporting;
}

/// Where a rule's scan has got to: the partition index and the last sort key read.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Cursor {
    pub partition: usize,
    pub after: Option<String>,
}

pub const PAGE: usize = 100;

/// The rules whose items go with `parent`'s.
pub fn children_of(parent: &Rule) -> Vec<Rule> {
    rules().into_iter().filter(|c| matches!(c.find, Find::WithParent(p, _) if p == parent.kind.name)).collect()
}

pub fn due_at(received: &chrono::DateTime<chrono::Utc>) -> shared::ids::Timestamp {
    shared::ids::Timestamp::from(*received + chrono::Duration::days(30))
}
