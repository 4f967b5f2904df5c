//! Posts: content for one or more channels, drafted, then scheduled (and, with the channels
//! area, published per channel). Keys: `keys::POST` (GSI1 serves the status filter, GSI2 the
//! publisher's due query).

use crate::keys;
use serde::{Deserialize, Serialize};
use shared::store::{Record, ws_pk};
use shared::validate::{Errors, Patch};
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

/// A schedule time: valid, after `now`, within the horizon. Returns it normalised.
pub fn check_schedule(errs: &mut Errors, value: &str, now: Now) -> Option<String> {
    let t = errs.timestamp("scheduled_at", value)?;
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

type Now = chrono::DateTime<chrono::Utc>;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePost {
    /// 1 to 10,000 characters.
    #[schema(min_length = 1, max_length = 10000, pattern = "\\S")]
    pub content: String,
    #[serde(default)]
    pub channel_ids: Vec<String>,
    #[serde(default)]
    pub media_urls: Vec<String>,
    /// Planned publication time; the post stays a draft until `POST /posts/{id}/schedule`.
    #[serde(default)]
    pub scheduled_at: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdatePost {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub content: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub channel_ids: Patch<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub media_urls: Patch<Vec<String>>,
    /// `null` clears it (not allowed while scheduled).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub scheduled_at: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct SchedulePost {
    /// Overrides the post's `scheduled_at`; one of the two must be set and in the future.
    #[serde(default)]
    pub scheduled_at: Option<String>,
}

/// What a state change made: the post as it is now and the event it emits.
#[derive(Debug)]
pub struct Change {
    pub post: Post,
    pub event: &'static str,
}

fn check_content(errs: &mut Errors, content: &str) {
    errs.text("content", content, 1, MAX_CONTENT_CHARS);
    if content.trim().is_empty() && !content.is_empty() {
        errs.add("content", "must not be blank");
    }
}

// The lifecycle as pure functions of the post and the time: the handlers load, call one of
// these, and write the result with its event.
impl Post {
    /// A new draft.
    pub fn draft(input: CreatePost, now: Now) -> ApiResult<Post> {
        let mut errs = Errors::new();
        check_content(&mut errs, &input.content);
        check_channels(&mut errs, &input.channel_ids);
        check_media(&mut errs, &input.media_urls);
        errs.metadata("metadata", &input.metadata);
        let scheduled_at = input.scheduled_at.as_deref().and_then(|v| check_schedule(&mut errs, v, now));
        errs.finish()?;
        let at = shared::ids::format_time(now);
        Ok(Post {
            id: shared::ids::new_id("post"),
            object: "post".into(),
            status: PostStatus::Draft,
            variants: variants_for(&input.channel_ids, &[]),
            content: input.content,
            channel_ids: input.channel_ids,
            media_urls: input.media_urls,
            scheduled_at,
            metadata: input.metadata,
            created_at: at.clone(),
            updated_at: at,
            published_at: None,
        })
    }

    /// A PATCH of a draft or scheduled post (`post.updated`). A scheduled post keeps a time
    /// and at least one channel.
    pub fn apply(&self, patch: UpdatePost, now: Now) -> ApiResult<Change> {
        if !self.status.editable() {
            return Err(not_editable(self));
        }
        let mut post = self.clone();
        let mut errs = Errors::new();
        if let Some(c) = patch.content.required(&mut errs, "content") {
            check_content(&mut errs, &c);
            post.content = c;
        }
        if let Some(ids) = patch.channel_ids.or_empty() {
            check_channels(&mut errs, &ids);
            post.channel_ids = ids;
        }
        post.variants = variants_for(&post.channel_ids, &post.variants);
        if let Some(urls) = patch.media_urls.or_empty() {
            check_media(&mut errs, &urls);
            post.media_urls = urls;
        }
        match patch.scheduled_at {
            Patch::Absent => {}
            Patch::Null => post.scheduled_at = None,
            Patch::Value(v) => post.scheduled_at = check_schedule(&mut errs, &v, now),
        }
        errs.patch_metadata("metadata", patch.metadata, &mut post.metadata);
        if post.status == PostStatus::Scheduled {
            if post.scheduled_at.is_none() {
                errs.add("scheduled_at", "a scheduled post needs a time; cancel the schedule first");
            }
            if post.channel_ids.is_empty() {
                errs.add("channel_ids", "a scheduled post needs at least one channel");
            }
        }
        errs.finish()?;
        post.updated_at = shared::ids::format_time(now);
        Ok(Change { post, event: "post.updated" })
    }

    /// Draft -> scheduled (`post.scheduled`): at `at`, or the post's own `scheduled_at`.
    pub fn schedule(&self, at: Option<String>, now: Now) -> ApiResult<Change> {
        if self.status != PostStatus::Draft {
            return Err(ApiError::conflict(format!("only a draft can be scheduled; this post is {}", self.status.as_str())));
        }
        let mut post = self.clone();
        let mut errs = Errors::new();
        match at.or(post.scheduled_at.clone()) {
            Some(at) => post.scheduled_at = check_schedule(&mut errs, &at, now),
            None => errs.add("scheduled_at", "is required to schedule a post"),
        }
        if post.channel_ids.is_empty() {
            errs.add("channel_ids", "a post needs at least one channel to be scheduled");
        }
        errs.finish()?;
        post.status = PostStatus::Scheduled;
        post.updated_at = shared::ids::format_time(now);
        Ok(Change { post, event: "post.scheduled" })
    }

    /// Scheduled -> draft (`post.unscheduled`); `scheduled_at` is kept.
    pub fn unschedule(&self, now: Now) -> ApiResult<Change> {
        if self.status != PostStatus::Scheduled {
            return Err(ApiError::conflict(format!("only a scheduled post can be cancelled; this post is {}", self.status.as_str())));
        }
        let mut post = self.clone();
        post.status = PostStatus::Draft;
        post.updated_at = shared::ids::format_time(now);
        Ok(Change { post, event: "post.unscheduled" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_rules() {
        let now = chrono::Utc::now();
        let mut e = Errors::new();
        assert!(check_schedule(&mut e, "2020-01-01T00:00:00Z", now).is_none());
        assert!(check_schedule(&mut e, "tomorrow", now).is_none());
        let soon = shared::ids::format_time(now + chrono::Duration::hours(1));
        assert_eq!(check_schedule(&mut e, &soon, now), Some(soon.clone()));
        let offset = (now + chrono::Duration::hours(2)).with_timezone(&chrono::FixedOffset::east_opt(3600).unwrap());
        assert!(check_schedule(&mut e, &offset.to_rfc3339(), now).unwrap().ends_with('Z'));
        assert_eq!(e.finish().unwrap_err().details.len(), 2);
    }

    const CH: &str = "ch_01HF6Z3Q8M4W2T9K7R5N1B0C6D";

    fn draft(now: Now) -> Post {
        let input: CreatePost = serde_json::from_value(serde_json::json!({"content": "hello", "channel_ids": [CH]})).unwrap();
        Post::draft(input, now).unwrap()
    }

    fn patch(v: serde_json::Value) -> UpdatePost {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_lifecycle_is_pure() {
        let now = chrono::Utc::now();
        let later = now + chrono::Duration::hours(1);
        let at = shared::ids::format_time(now + chrono::Duration::days(1));
        let p = draft(now);
        assert_eq!((p.status, p.variants.len()), (PostStatus::Draft, 1));

        // Schedule needs a time; then it moves to scheduled with the event.
        assert_eq!(p.schedule(None, now).unwrap_err().details[0].field.as_deref(), Some("scheduled_at"));
        let s = p.schedule(Some(at.clone()), later).unwrap();
        assert_eq!(
            (s.post.status, s.event, s.post.updated_at.clone()),
            (PostStatus::Scheduled, "post.scheduled", shared::ids::format_time(later))
        );
        assert_eq!(s.post.schedule(None, now).unwrap_err().code, shared::error::ErrorCode::Conflict, "only drafts");

        // A scheduled post keeps its time and a channel; PATCH says which field.
        let e = s.post.apply(patch(serde_json::json!({"scheduled_at": null})), now).unwrap_err();
        assert_eq!(e.details[0].field.as_deref(), Some("scheduled_at"));
        let e = s.post.apply(patch(serde_json::json!({"channel_ids": []})), now).unwrap_err();
        assert_eq!(e.details[0].field.as_deref(), Some("channel_ids"));
        let u = s.post.apply(patch(serde_json::json!({"content": "changed"})), now).unwrap();
        assert_eq!((u.post.content.as_str(), u.event), ("changed", "post.updated"));
        assert_eq!(s.post.content, "hello", "the input is not changed");

        // Cancel takes it back to a draft, keeping the time; twice is a conflict.
        let c = s.post.unschedule(now).unwrap();
        assert_eq!((c.post.status, c.event, c.post.scheduled_at.as_deref()), (PostStatus::Draft, "post.unscheduled", Some(at.as_str())));
        assert!(c.post.unschedule(now).is_err());

        // Published posts are read-only; blank content is refused with every other problem.
        let mut published = p.clone();
        published.status = PostStatus::Published;
        assert_eq!(published.apply(patch(serde_json::json!({"content": "x"})), now).unwrap_err().code, shared::error::ErrorCode::Conflict);
        let e = p.apply(patch(serde_json::json!({"content": "  ", "media_urls": ["http://x"]})), now).unwrap_err();
        assert_eq!(e.details.len(), 2, "{e:?}");
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
