//! Posts: content for one or more channels, drafted, then scheduled (and, with the channels
//! area, published per channel). This file is the model: the types, their rules and their
//! state changes, without I/O; `store` writes and reads them (`keys::POST`: GSI1 serves the
//! status filter, GSI2 the publisher's due query).

mod store;
pub use store::{ListPosts, create, delete, detach_channel, list, load, record};

use serde::{Deserialize, Serialize};
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::validate::{Errors, Patch};
use shared::{ApiError, ApiResult};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub use crate::ids::{ChannelId, PostId};

// A post's variants report how a network failed; the channels area (above this one) connects
// to the networks and re-exports the categories.
/// Why a publish (or a connect) failed, as the API reports it.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    /// The credentials were refused: the channel needs reconnecting.
    AuthExpired,
    /// The content breaks the network's rules (length, media).
    UserContent,
    RateLimited,
    /// The network refused the post for another reason.
    PlatformRejected,
    /// The network answered 5xx.
    PlatformError,
    /// Timeout, refused connection, DNS, blocked address.
    Network,
}

impl ErrorCategory {
    /// Worth trying again later.
    pub fn retryable(self) -> bool {
        matches!(self, Self::RateLimited | Self::PlatformError | Self::Network)
    }
}

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

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum VariantStatus {
    Pending,
    Publishing,
    Published,
    Failed,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct VariantError {
    pub category: ErrorCategory,
    pub message: String,
    /// Whether `POST /posts/{id}/variants/{channel_id}/retry` may succeed as it is.
    pub retryable: bool,
}

/// The post as one channel gets it, and how publishing it went.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Variant {
    pub channel_id: ChannelId,
    /// This channel's text instead of the post's `content`.
    #[serde(default)]
    pub content: Option<String>,
    /// This channel's images instead of the post's `media`.
    #[serde(default)]
    #[schema(max_items = 10)]
    pub media: Option<Vec<Media>>,
    /// Mastodon options (see `VariantInput`).
    #[serde(default)]
    pub visibility: Option<Visibility>,
    #[serde(default)]
    pub spoiler_text: Option<String>,
    #[serde(default)]
    pub sensitive: Option<bool>,
    pub status: VariantStatus,
    pub remote_id: Option<String>,
    pub permalink: Option<String>,
    #[serde(default)]
    pub published_at: Option<Timestamp>,
    pub error: Option<VariantError>,
}

/// Who sees a Mastodon status.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    Public,
    Unlisted,
    Private,
    Direct,
}

/// A per-channel override in a create or update.
#[derive(Deserialize, ToSchema, Clone)]
#[serde(deny_unknown_fields)]
pub struct VariantInput {
    #[schema(value_type = crate::ids::ChannelId)]
    pub channel_id: String,
    /// The text for this channel (1 to 10,000 characters, within the channel's limit).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 10000)]
    pub content: Option<String>,
    /// The images for this channel (an empty list: none).
    #[serde(default)]
    #[schema(max_items = 10)]
    pub media: Option<Vec<Media>>,
    /// Mastodon: who sees the status (default public).
    #[serde(default)]
    pub visibility: Option<Visibility>,
    /// Mastodon: a content warning shown before the text.
    #[serde(default)]
    #[schema(max_length = 500)]
    pub spoiler_text: Option<String>,
    /// Mastodon: mark the media sensitive.
    #[serde(default)]
    pub sensitive: Option<bool>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Post {
    /// `post_...`
    pub id: PostId,
    /// Always `post`.
    pub object: String,
    pub status: PostStatus,
    pub content: String,
    /// `ch_...` ids of the channels to publish to.
    pub channel_ids: Vec<ChannelId>,
    /// Images to attach (each channel fetches and uploads them when it publishes).
    #[serde(default)]
    pub media: Vec<Media>,
    /// ISO 639-1 language of the text (Mastodon `language`, Bluesky `langs`).
    #[serde(default)]
    pub language: Option<String>,
    /// When the post is (to be) published, RFC 3339 UTC.
    pub scheduled_at: Option<Timestamp>,
    /// One per channel, with that channel's publishing state.
    pub variants: Vec<Variant>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub published_at: Option<Timestamp>,
}

pub fn variants_for(channel_ids: &[ChannelId], old: &[Variant]) -> Vec<Variant> {
    channel_ids
        .iter()
        .map(|c| {
            old.iter().find(|v| &v.channel_id == c).cloned().unwrap_or(Variant {
                channel_id: c.clone(),
                content: None,
                media: None,
                visibility: None,
                spoiler_text: None,
                sensitive: None,
                status: VariantStatus::Pending,
                remote_id: None,
                permalink: None,
                published_at: None,
                error: None,
            })
        })
        .collect()
}

/// Set per-channel texts: each must name one of the post's channels.
fn apply_overrides(errs: &mut Errors, variants: &mut [Variant], overrides: &[VariantInput]) {
    for (i, o) in overrides.iter().enumerate() {
        if let Some(c) = &o.content {
            errs.text(&format!("variants[{i}].content"), c, 1, MAX_CONTENT_CHARS);
        }
        if let Some(m) = &o.media {
            check_media(errs, &format!("variants[{i}].media"), m);
        }
        if let Some(s) = &o.spoiler_text {
            errs.text(&format!("variants[{i}].spoiler_text"), s, 0, 500);
        }
        match variants.iter_mut().find(|v| v.channel_id == o.channel_id) {
            Some(v) => {
                if o.content.is_some() {
                    v.content = o.content.clone();
                }
                if o.media.is_some() {
                    v.media = o.media.clone();
                }
                v.visibility = o.visibility.or(v.visibility);
                if o.spoiler_text.is_some() {
                    v.spoiler_text = o.spoiler_text.clone();
                }
                v.sensitive = o.sensitive.or(v.sensitive);
            }
            None => errs.add(format!("variants[{i}].channel_id"), "must be one of the post's channel_ids"),
        }
    }
}

impl Post {
    /// The text a channel gets.
    pub fn text_for(&self, v: &Variant) -> String {
        v.content.clone().unwrap_or_else(|| self.content.clone())
    }

    /// The images a channel gets.
    pub fn media_for(&self, v: &Variant) -> Vec<Media> {
        v.media.clone().unwrap_or_else(|| self.media.clone())
    }

    /// Media URLs the deployment's outbound rules allow (http and loopback only where
    /// development allows them), checked when the post is written.
    pub fn check_media_urls(&self, policy: shared::outbound::UrlPolicy) -> ApiResult<()> {
        let mut errs = Errors::new();
        for (i, m) in self.media.iter().enumerate() {
            if let Err(e) = shared::outbound::check_url(&m.url, policy) {
                errs.add(format!("media[{i}].url"), e.to_string());
            }
        }
        for (j, v) in self.variants.iter().enumerate() {
            for (i, m) in v.media.iter().flatten().enumerate() {
                if let Err(e) = shared::outbound::check_url(&m.url, policy) {
                    errs.add(format!("variants[{j}].media[{i}].url"), e.to_string());
                }
            }
        }
        errs.finish()
    }
}

/// The channels a body names, every problem at once (so they are text until checked here):
/// the well-formed ones, which are all of them when `errs` stays empty.
pub fn check_channels(errs: &mut Errors, ids: &[String]) -> Vec<ChannelId> {
    if ids.len() > MAX_CHANNELS {
        errs.add("channel_ids", format!("at most {MAX_CHANNELS} channels"));
    }
    let mut parsed = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        match <ChannelId as shared::ids::PrefixedId>::parse(id) {
            None => errs.add(format!("channel_ids[{i}]"), ChannelId::malformed()),
            Some(_) if ids[..i].contains(id) => errs.add(format!("channel_ids[{i}]"), "is listed twice"),
            Some(c) => parsed.push(c),
        }
    }
    parsed
}

fn check_language(errs: &mut Errors, l: Option<&str>) {
    if let Some(l) = l
        && (l.len() != 2 || !l.chars().all(|c| c.is_ascii_lowercase()))
    {
        errs.add("language", "must be an ISO 639-1 code such as en or nb");
    }
}

/// An image by URL: jpeg, png, webp or gif, fetched when the post is published.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Media {
    /// A public https URL of the image.
    #[schema(format = "uri", max_length = 2048)]
    pub url: String,
    /// Alt text, required: Bluesky requires it, and screen readers need it.
    #[schema(min_length = 1, max_length = 1000)]
    pub alt: String,
}

pub fn check_media(errs: &mut Errors, field: &str, media: &[Media]) {
    if media.len() > MAX_MEDIA {
        errs.add(field, format!("at most {MAX_MEDIA} images"));
    }
    for (i, m) in media.iter().enumerate() {
        match url::Url::parse(&m.url) {
            Ok(u) if matches!(u.scheme(), "https" | "http") && u.host_str().is_some() && m.url.len() <= 2048 => {}
            _ => errs.add(format!("{field}[{i}].url"), "must be an absolute https URL of at most 2048 characters"),
        }
        errs.text(&format!("{field}[{i}].alt"), &m.alt, 1, 1000);
        if m.alt.trim().is_empty() && !m.alt.is_empty() {
            errs.add(format!("{field}[{i}].alt"), "must not be blank");
        }
    }
}

/// A schedule time: valid, after `now`, within the horizon. Returns it normalised.
pub fn check_schedule(errs: &mut Errors, value: &str, now: Now) -> Option<shared::ids::Timestamp> {
    let t = errs.timestamp("scheduled_at", value)?;
    if t <= now {
        errs.add("scheduled_at", "must be in the future");
        None
    } else if t > now + chrono::Duration::days(MAX_SCHEDULE_DAYS) {
        errs.add("scheduled_at", format!("must be within {MAX_SCHEDULE_DAYS} days"));
        None
    } else {
        Some(shared::ids::Timestamp::from(t))
    }
}

impl Post {
    /// This post once a deleted channel has left it: without the channel and its variant, and
    /// a draft again when it was scheduled for no other channel. Published variants stay.
    pub fn without_channel(&self, channel_id: &str, now: Timestamp) -> Post {
        let mut p = self.clone();
        p.channel_ids.retain(|c| c != channel_id);
        p.variants.retain(|v| v.channel_id != channel_id);
        if p.status == PostStatus::Scheduled && p.channel_ids.is_empty() {
            p.status = PostStatus::Draft;
        }
        p.updated_at = now;
        p
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
    #[schema(value_type = Vec<ChannelId>)]
    pub channel_ids: Vec<String>,
    #[serde(default)]
    #[schema(max_items = 10)]
    pub media: Vec<Media>,
    /// ISO 639-1 language of the text, e.g. `nb` or `en`.
    #[serde(default)]
    #[schema(pattern = "^[a-z]{2}$")]
    pub language: Option<String>,
    /// Planned publication time; the post stays a draft until `POST /posts/{id}/schedule`.
    #[serde(default)]
    #[schema(format = DateTime)]
    pub scheduled_at: Option<String>,
    /// Per-channel texts, for channels among `channel_ids`.
    #[serde(default)]
    pub variants: Vec<VariantInput>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdatePost {
    #[serde(default)]
    #[schema(value_type = String)]
    pub content: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<ChannelId>>)]
    pub channel_ids: Patch<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Media>>, max_items = 10)]
    pub media: Patch<Vec<Media>>,
    /// ISO 639-1; `null` clears it.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^[a-z]{2}$")]
    pub language: Patch<String>,
    /// `null` clears it (not allowed while scheduled).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub scheduled_at: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
    /// Per-channel texts to set (others keep theirs).
    #[serde(default)]
    pub variants: Option<Vec<VariantInput>>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct SchedulePost {
    /// Overrides the post's `scheduled_at`; one of the two must be set and in the future.
    #[serde(default)]
    #[schema(format = DateTime)]
    pub scheduled_at: Option<String>,
}

/// What a state change made: the post as it is now and the event it emits.
#[derive(Debug)]
pub struct Change {
    pub post: Post,
    pub event: shared::events::EventType,
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
        let channel_ids = check_channels(&mut errs, &input.channel_ids);
        check_media(&mut errs, "media", &input.media);
        check_language(&mut errs, input.language.as_deref());
        errs.metadata("metadata", &input.metadata);
        let scheduled_at = input.scheduled_at.as_deref().and_then(|v| check_schedule(&mut errs, v, now));
        let mut variants = variants_for(&channel_ids, &[]);
        apply_overrides(&mut errs, &mut variants, &input.variants);
        errs.finish()?;
        let at = shared::ids::Timestamp::from(now);
        Ok(Post {
            id: PostId::generate(),
            object: "post".into(),
            status: PostStatus::Draft,
            variants,
            content: input.content,
            channel_ids,
            media: input.media,
            language: input.language,
            scheduled_at,
            metadata: input.metadata,
            created_at: at,
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
            post.channel_ids = check_channels(&mut errs, &ids);
        }
        post.variants = variants_for(&post.channel_ids, &post.variants);
        if let Some(o) = &patch.variants {
            apply_overrides(&mut errs, &mut post.variants, o);
        }
        match patch.language {
            Patch::Absent => {}
            Patch::Null => post.language = None,
            Patch::Value(l) => {
                check_language(&mut errs, Some(&l));
                post.language = Some(l);
            }
        }
        if let Some(media) = patch.media.or_empty() {
            check_media(&mut errs, "media", &media);
            post.media = media;
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
        post.updated_at = shared::ids::Timestamp::from(now);
        Ok(Change { post, event: EventType::PostUpdated })
    }

    /// Draft -> scheduled (`post.scheduled`): at `at`, or the post's own `scheduled_at`.
    pub fn schedule(&self, at: Option<String>, now: Now) -> ApiResult<Change> {
        if self.status != PostStatus::Draft {
            return Err(ApiError::conflict(format!("only a draft can be scheduled; this post is {}", self.status.as_str())));
        }
        let mut post = self.clone();
        let mut errs = Errors::new();
        match at.or(post.scheduled_at.map(|t| t.to_string())) {
            Some(at) => post.scheduled_at = check_schedule(&mut errs, &at, now),
            None => errs.add("scheduled_at", "is required to schedule a post"),
        }
        if post.channel_ids.is_empty() {
            errs.add("channel_ids", "a post needs at least one channel to be scheduled");
        }
        errs.finish()?;
        post.status = PostStatus::Scheduled;
        post.updated_at = shared::ids::Timestamp::from(now);
        Ok(Change { post, event: EventType::PostScheduled })
    }

    /// Draft or scheduled -> scheduled for now (`post.scheduled`): the publisher takes it at once.
    pub fn publish_now(&self, now: Now) -> ApiResult<Change> {
        if !self.status.editable() {
            return Err(ApiError::conflict(format!(
                "a {} post cannot be published again; retry a failed variant instead",
                self.status.as_str()
            )));
        }
        if self.channel_ids.is_empty() {
            return Err(ApiError::validation("channel_ids", "a post needs at least one channel to be published"));
        }
        let mut post = self.clone();
        post.status = PostStatus::Scheduled;
        post.scheduled_at = Some(shared::ids::Timestamp::from(now));
        post.updated_at = shared::ids::Timestamp::from(now);
        Ok(Change { post, event: EventType::PostScheduled })
    }

    /// Scheduled -> draft (`post.unscheduled`); `scheduled_at` is kept.
    pub fn unschedule(&self, now: Now) -> ApiResult<Change> {
        if self.status != PostStatus::Scheduled {
            return Err(ApiError::conflict(format!("only a scheduled post can be cancelled; this post is {}", self.status.as_str())));
        }
        let mut post = self.clone();
        post.status = PostStatus::Draft;
        post.updated_at = shared::ids::Timestamp::from(now);
        Ok(Change { post, event: EventType::PostUnscheduled })
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
        let soon = shared::ids::Timestamp::from(now + chrono::Duration::hours(1));
        assert_eq!(check_schedule(&mut e, &soon.to_string(), now), Some(soon));
        let offset = (now + chrono::Duration::hours(2)).with_timezone(&chrono::FixedOffset::east_opt(3600).unwrap());
        assert!(check_schedule(&mut e, &offset.to_rfc3339(), now).unwrap().to_string().ends_with('Z'));
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
            (s.post.status, s.event, s.post.updated_at),
            (PostStatus::Scheduled, EventType::PostScheduled, shared::ids::Timestamp::from(later))
        );
        assert_eq!(s.post.schedule(None, now).unwrap_err().code, shared::error::ErrorCode::Conflict, "only drafts");

        // A scheduled post keeps its time and a channel; PATCH says which field.
        let e = s.post.apply(patch(serde_json::json!({"scheduled_at": null})), now).unwrap_err();
        assert_eq!(e.details[0].field.as_deref(), Some("scheduled_at"));
        let e = s.post.apply(patch(serde_json::json!({"channel_ids": []})), now).unwrap_err();
        assert_eq!(e.details[0].field.as_deref(), Some("channel_ids"));
        let u = s.post.apply(patch(serde_json::json!({"content": "changed"})), now).unwrap();
        assert_eq!((u.post.content.as_str(), u.event), ("changed", EventType::PostUpdated));
        assert_eq!(s.post.content, "hello", "the input is not changed");

        // Cancel takes it back to a draft, keeping the time; twice is a conflict.
        let c = s.post.unschedule(now).unwrap();
        assert_eq!(
            (c.post.status, c.event, c.post.scheduled_at.map(|t| t.to_string())),
            (PostStatus::Draft, EventType::PostUnscheduled, Some(at.clone()))
        );
        assert!(c.post.unschedule(now).is_err());

        // Published posts are read-only; blank content is refused with every other problem.
        let mut published = p.clone();
        published.status = PostStatus::Published;
        assert_eq!(published.apply(patch(serde_json::json!({"content": "x"})), now).unwrap_err().code, shared::error::ErrorCode::Conflict);
        let e = p.apply(patch(serde_json::json!({"content": "  ", "media": [{"url": "ftp://x", "alt": "a"}]})), now).unwrap_err();
        assert_eq!(e.details.len(), 2, "{e:?}");
    }

    #[test]
    fn a_deleted_channel_leaves_posts_and_a_scheduled_post_without_channels_is_a_draft_again() {
        let now = chrono::Utc::now();
        let mut p = draft(now);
        p.status = PostStatus::Scheduled;
        let other = "ch_01HF6Z3Q8M4W2T9K7R5N1B0C6E";
        let later = Timestamp::from(now + chrono::Duration::minutes(1));
        let kept = p.without_channel(other, later);
        assert_eq!((kept.status, kept.channel_ids.len(), kept.variants.len()), (PostStatus::Scheduled, 1, 1), "another channel");
        let left = p.without_channel(CH, later);
        assert_eq!((left.status, left.channel_ids.len(), left.variants.len(), left.updated_at), (PostStatus::Draft, 0, 0, later));
    }

    #[test]
    fn variants_follow_channels_and_keep_state() {
        let a = ChannelId::trusted("ch_01HF6Z3Q8M4W2T9K7R5N1B0C6D");
        let b = ChannelId::trusted("ch_01HF6Z3Q8M4W2T9K7R5N1B0C6E");
        let mut v = variants_for(std::slice::from_ref(&a), &[]);
        v[0].status = VariantStatus::Published;
        let v2 = variants_for(&[a, b], &v);
        assert_eq!(v2[0].status, VariantStatus::Published);
        assert_eq!(v2[1].status, VariantStatus::Pending);
        assert!(PostStatus::parse("partially_failed").is_some() && PostStatus::parse("nope").is_none());
    }
}
