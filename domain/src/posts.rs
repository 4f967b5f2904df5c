//! Posts: content for one or more channels, drafted, then scheduled (and, with the channels
//! area, published per channel). Keys: `keys::POST` (GSI1 serves the status filter, GSI2 the
//! publisher's due query).

use crate::keys;
use serde::{Deserialize, Serialize};
use shared::store::{Record, ws_pk};
use shared::validate::Errors;
use shared::{ApiError, ApiResult};
use std::collections::BTreeMap;
use utoipa::ToSchema;

shared::prefixed_id!(PostId, "post", "post");
shared::prefixed_id!(ChannelId, "ch", "channel");

pub const MAX_CONTENT_CHARS: usize = 10_000;
pub const MAX_CHANNELS: usize = 20;
pub const MAX_MEDIA: usize = 10;
/// How far ahead a post may be scheduled.
pub const MAX_SCHEDULE_DAYS: i64 = 365;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PostStatus {
    Draft,
    Scheduled,
    Publishing,
    Published,
    PartiallyFailed,
    Failed,
}

impl PostStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Draft => "draft",
            Self::Scheduled => "scheduled",
            Self::Publishing => "publishing",
            Self::Published => "published",
            Self::PartiallyFailed => "partially_failed",
            Self::Failed => "failed",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        shared::validate::parse_enum(s)
    }
    pub fn editable(self) -> bool {
        matches!(self, Self::Draft | Self::Scheduled)
    }
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Variant {
    pub channel_id: String,
    /// pending, published or failed.
    pub status: String,
    pub remote_id: Option<String>,
    pub permalink: Option<String>,
    pub error: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Post {
    /// `post_...`
    pub id: String,
    /// Always `post`.
    pub object: String,
    pub status: PostStatus,
    pub content: String,
    /// `ch_...` ids of the channels to publish to.
    pub channel_ids: Vec<String>,
    /// https URLs of images or videos.
    pub media_urls: Vec<String>,
    /// When the post is (to be) published, RFC 3339 UTC.
    pub scheduled_at: Option<String>,
    /// One per channel, with that channel's publishing state.
    pub variants: Vec<Variant>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: String,
    pub updated_at: String,
    pub published_at: Option<String>,
}

pub fn sk(id: &str) -> String {
    keys::POST.sk(&[id])
}

pub fn record(ws: &str, post: &Post) -> ApiResult<Record> {
    let mut rec =
        Record::new(ws_pk(ws), sk(&post.id), post)?.gsi1(keys::POST.gsi1_pk(&[ws, post.status.as_str()]), keys::POST.gsi1_sk(&[&post.id]));
    if post.status == PostStatus::Scheduled
        && let Some(at) = &post.scheduled_at
    {
        rec = rec.gsi2(keys::POST.gsi2_pk(&[]), keys::POST.gsi2_sk(&[at, ws, &post.id]));
    }
    Ok(rec)
}

pub fn variants_for(channel_ids: &[String], old: &[Variant]) -> Vec<Variant> {
    channel_ids
        .iter()
        .map(|c| {
            old.iter().find(|v| &v.channel_id == c).cloned().unwrap_or(Variant {
                channel_id: c.clone(),
                status: "pending".into(),
                remote_id: None,
                permalink: None,
                error: None,
            })
        })
        .collect()
}

pub fn check_channels(errs: &mut Errors, ids: &[String]) {
    if ids.len() > MAX_CHANNELS {
        errs.add("channel_ids", format!("at most {MAX_CHANNELS} channels"));
    }
    for (i, id) in ids.iter().enumerate() {
        if <ChannelId as shared::ids::PrefixedId>::parse(id).is_none() {
            errs.add(format!("channel_ids[{i}]"), "must be a channel id (ch_...)");
        } else if ids[..i].contains(id) {
            errs.add(format!("channel_ids[{i}]"), "is listed twice");
        }
    }
}

pub fn check_media(errs: &mut Errors, urls: &[String]) {
    if urls.len() > MAX_MEDIA {
        errs.add("media_urls", format!("at most {MAX_MEDIA} media URLs"));
    }
    for (i, u) in urls.iter().enumerate() {
        errs.https_url(&format!("media_urls[{i}]"), u);
    }
}

/// A schedule time: valid, in the future, within the horizon. Returns it normalised.
pub fn check_schedule(errs: &mut Errors, value: &str) -> Option<String> {
    let t = errs.timestamp("scheduled_at", value)?;
    let now = chrono::Utc::now();
    if t <= now {
        errs.add("scheduled_at", "must be in the future");
        None
    } else if t > now + chrono::Duration::days(MAX_SCHEDULE_DAYS) {
        errs.add("scheduled_at", format!("must be within {MAX_SCHEDULE_DAYS} days"));
        None
    } else {
        Some(shared::ids::format_time(t))
    }
}

pub fn not_editable(post: &Post) -> ApiError {
    ApiError::conflict(format!("a {} post cannot be changed", post.status.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_rules() {
        let mut e = Errors::new();
        assert!(check_schedule(&mut e, "2020-01-01T00:00:00Z").is_none());
        assert!(check_schedule(&mut e, "tomorrow").is_none());
        let soon = shared::ids::format_time(chrono::Utc::now() + chrono::Duration::hours(1));
        assert_eq!(check_schedule(&mut e, &soon), Some(soon.clone()));
        let offset = (chrono::Utc::now() + chrono::Duration::hours(2)).with_timezone(&chrono::FixedOffset::east_opt(3600).unwrap());
        assert!(check_schedule(&mut e, &offset.to_rfc3339()).unwrap().ends_with('Z'));
        assert_eq!(e.finish().unwrap_err().details.len(), 2);
    }

    #[test]
    fn variants_follow_channels_and_keep_state() {
        let a = "ch_01HF6Z3Q8M4W2T9K7R5N1B0C6D".to_string();
        let b = "ch_01HF6Z3Q8M4W2T9K7R5N1B0C6E".to_string();
        let mut v = variants_for(std::slice::from_ref(&a), &[]);
        v[0].status = "published".into();
        let v2 = variants_for(&[a, b], &v);
        assert_eq!(v2[0].status, "published");
        assert_eq!(v2[1].status, "pending");
        assert!(PostStatus::parse("partially_failed").is_some() && PostStatus::parse("nope").is_none());
    }
}
