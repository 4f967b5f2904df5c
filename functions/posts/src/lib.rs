//! Posts: content for one or more channels, drafted, then scheduled (and, with the channels
//! area, published per channel).
//!
//! Items (pk = WS#<workspace>, sk = POST#<id>):
//! - GSI1 `WS#<ws>#POST#<status>` / `POST#<id>` serves the `status` filter in O(page);
//! - GSI2 `DUE#POST` / `<scheduled_at>#<ws>#<id>` (only while scheduled) is what the
//!   publisher's schedule tick will query for due posts.

use domain::keys;
use domain::posts::*;
use serde::Deserialize;
use shared::events::Event;
use shared::outbox::Tx;
use shared::store::{self, s, ws_pk};
use shared::validate::{Errors, Patch};
use shared::{ApiError, ApiResult, App, Reply, Req};
use std::collections::BTreeMap;
use utoipa::ToSchema;

shared::area! {
    tag = "posts", description = "Posts for channels: drafts and schedules",
    operations = [list_posts, create_post, get_post, update_post, delete_post, schedule_post, cancel_post],
    schemas = [Post, PostStatus, Variant, CreatePost, UpdatePost, SchedulePost],
}

async fn load(app: &App, req: &Req) -> ApiResult<(Post, i64)> {
    let id: PostId = req.path_id("id")?;
    app.db.get_object(req.ws(), &sk(&id)).await?.ok_or_else(|| ApiError::not_found("post"))
}

async fn save(app: &App, ws: &str, post: &Post, version: i64, event: &str) -> ApiResult<()> {
    Tx::new().replace(record(ws, post)?, version).event(Event::new(ws, event, post)).commit(app).await.map_err(store::TxError::stale)
}

// ---------- routes ----------

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePost {
    /// 1 to 10,000 characters.
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

/// Create a draft post.
#[utoipa::path(post, path = "/posts", tag = "posts", request_body = CreatePost,
    responses((status = 201, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_post(app: &App, req: Req) -> ApiResult<Reply> {
    let input: CreatePost = req.json()?;
    let mut errs = Errors::new();
    errs.text("content", &input.content, 1, MAX_CONTENT_CHARS);
    if input.content.trim().is_empty() && !input.content.is_empty() {
        errs.add("content", "must not be blank");
    }
    check_channels(&mut errs, &input.channel_ids);
    check_media(&mut errs, &input.media_urls);
    errs.metadata("metadata", &input.metadata);
    let scheduled_at = input.scheduled_at.as_deref().and_then(|v| check_schedule(&mut errs, v));
    errs.finish()?;
    let now = shared::ids::now_rfc3339();
    let post = Post {
        id: shared::ids::new_id("post"),
        object: "post".into(),
        status: PostStatus::Draft,
        variants: variants_for(&input.channel_ids, &[]),
        content: input.content,
        channel_ids: input.channel_ids,
        media_urls: input.media_urls,
        scheduled_at,
        metadata: input.metadata,
        created_at: now.clone(),
        updated_at: now,
        published_at: None,
    };
    Tx::new()
        .create(record(req.ws(), &post)?.version(1))
        .event(Event::new(req.ws(), "post.created", &post))
        .commit(app)
        .await
        .map_err(store::TxError::stale)?;
    Ok(Reply::created(&post))
}

#[utoipa::path(get, path = "/posts/{id}", tag = "posts", params(("id" = String, Path, description = "post_...")),
    responses((status = 200, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors))]
pub async fn get_post(app: &App, req: Req) -> ApiResult<Reply> {
    Ok(Reply::ok(&load(app, &req).await?.0))
}

/// Posts in creation order, optionally filtered by status and/or channel.
#[utoipa::path(get, path = "/posts", tag = "posts",
    params(("limit" = Option<u32>, Query, description = "1..100, default 50"), ("cursor" = Option<String>, Query),
        ("status" = Option<PostStatus>, Query), ("channel_id" = Option<String>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<Post>), shared::openapi::CommonErrors))]
pub async fn list_posts(app: &App, req: Req) -> ApiResult<Reply> {
    let q: ListPosts = req.query_as()?;
    let status = q.status.map(PostStatus::as_str);
    let channel = q.channel_id.as_deref();
    let page = req.page(app, "posts", &[("status", status), ("channel_id", channel)]).await?;
    let mut spec = match status {
        Some(st) => keys::POSTS_BY_STATUS.query(&[req.ws(), st], &[], page.after.clone(), page.limit),
        None => keys::POSTS.query(&[req.ws()], &[], page.after.clone(), page.limit),
    };
    if let Some(c) = channel {
        spec = spec.filter("contains(channel_ids, :channel)", vec![(":channel", s(c))]);
    }
    shared::request::list_page::<Post>(app, &page, spec).await
}

/// The filters of `GET /posts` (`limit` and `cursor` are the page's).
#[derive(Deserialize)]
struct ListPosts {
    status: Option<PostStatus>,
    #[serde(default, deserialize_with = "shared::validate::prefixed_id")]
    channel_id: Option<ChannelId>,
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

/// Change a draft or scheduled post.
#[utoipa::path(patch, path = "/posts/{id}", tag = "posts", request_body = UpdatePost, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_post(app: &App, req: Req) -> ApiResult<Reply> {
    let input: UpdatePost = req.json()?;
    let (mut post, version) = load(app, &req).await?;
    if !post.status.editable() {
        return Err(not_editable(&post));
    }
    let mut errs = Errors::new();
    if let Some(c) = input.content.required(&mut errs, "content") {
        errs.text("content", &c, 1, MAX_CONTENT_CHARS);
        if c.trim().is_empty() && !c.is_empty() {
            errs.add("content", "must not be blank");
        }
        post.content = c;
    }
    if let Some(ids) = input.channel_ids.or_empty() {
        check_channels(&mut errs, &ids);
        post.channel_ids = ids;
    }
    post.variants = variants_for(&post.channel_ids, &post.variants);
    if let Some(urls) = input.media_urls.or_empty() {
        check_media(&mut errs, &urls);
        post.media_urls = urls;
    }
    match input.scheduled_at {
        Patch::Absent => {}
        Patch::Null => post.scheduled_at = None,
        Patch::Value(v) => post.scheduled_at = check_schedule(&mut errs, &v),
    }
    errs.patch_metadata("metadata", input.metadata, &mut post.metadata);
    if post.status == PostStatus::Scheduled {
        if post.scheduled_at.is_none() {
            errs.add("scheduled_at", "a scheduled post needs a time; cancel the schedule first");
        }
        if post.channel_ids.is_empty() {
            errs.add("channel_ids", "a scheduled post needs at least one channel");
        }
    }
    errs.finish()?;
    post.updated_at = shared::ids::now_rfc3339();
    save(app, req.ws(), &post, version, "post.updated").await?;
    Ok(Reply::ok(&post))
}

#[utoipa::path(delete, path = "/posts/{id}", tag = "posts", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_post(app: &App, req: Req) -> ApiResult<Reply> {
    let (post, version) = load(app, &req).await?;
    if post.status == PostStatus::Publishing {
        return Err(ApiError::conflict("a post cannot be deleted while it is publishing"));
    }
    Tx::new()
        .delete_versioned(ws_pk(req.ws()), sk(&post.id), version)
        .event(Event::new(req.ws(), "post.deleted", &post))
        .commit(app)
        .await
        .map_err(store::TxError::stale)?;
    Ok(Reply::deleted(&post.id, "post"))
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct SchedulePost {
    /// Overrides the post's `scheduled_at`; one of the two must be set and in the future.
    #[serde(default)]
    pub scheduled_at: Option<String>,
}

/// Move a draft to `scheduled`. Needs a future `scheduled_at` and at least one channel.
#[utoipa::path(post, path = "/posts/{id}/schedule", tag = "posts", request_body(content = SchedulePost, description = "optional"),
    params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn schedule_post(app: &App, req: Req) -> ApiResult<Reply> {
    let input: SchedulePost = if req.body.is_empty() { SchedulePost::default() } else { req.json()? };
    let (mut post, version) = load(app, &req).await?;
    if post.status != PostStatus::Draft {
        return Err(ApiError::conflict(format!("only a draft can be scheduled; this post is {}", post.status.as_str())));
    }
    let mut errs = Errors::new();
    match input.scheduled_at.or(post.scheduled_at.clone()) {
        Some(at) => post.scheduled_at = check_schedule(&mut errs, &at),
        None => errs.add("scheduled_at", "is required to schedule a post"),
    }
    if post.channel_ids.is_empty() {
        errs.add("channel_ids", "a post needs at least one channel to be scheduled");
    }
    errs.finish()?;
    post.status = PostStatus::Scheduled;
    post.updated_at = shared::ids::now_rfc3339();
    save(app, req.ws(), &post, version, "post.scheduled").await?;
    Ok(Reply::ok(&post))
}

/// Take a scheduled post back to `draft` (its `scheduled_at` is kept).
#[utoipa::path(post, path = "/posts/{id}/cancel", tag = "posts", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn cancel_post(app: &App, req: Req) -> ApiResult<Reply> {
    let (mut post, version) = load(app, &req).await?;
    if post.status != PostStatus::Scheduled {
        return Err(ApiError::conflict(format!("only a scheduled post can be cancelled; this post is {}", post.status.as_str())));
    }
    post.status = PostStatus::Draft;
    post.updated_at = shared::ids::now_rfc3339();
    save(app, req.ws(), &post, version, "post.unscheduled").await?;
    Ok(Reply::ok(&post))
}
