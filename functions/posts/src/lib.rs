//! Posts: content for one or more channels, drafted, then scheduled (and, with the channels
//! area, published per channel).
//!
//! Items (pk = WS#<workspace>, sk = POST#<id>):
//! - GSI1 `WS#<ws>#POST#<status>` / `POST#<id>` serves the `status` filter in O(page);
//! - GSI2 `DUE#POST` / `<scheduled_at>#<ws>#<id>` (only while scheduled) is what the
//!   publisher's schedule tick will query for due posts.

use domain::effects::{self as fx, Effect as _};
use domain::posts::{
    Change, ChannelId, CreatePost, Media, Post, PostId, PostStatus, SchedulePost, UpdatePost, Variant, VariantError, VariantInput,
    VariantStatus,
};
use shared::auth::WorkspaceId;
use shared::{ApiResult, App, Reply, WsReq};

shared::area! {
    tag = "posts", description = "Posts for channels: drafts and schedules",
    operations = [
        list_posts, create_post, get_post, update_post [effects = &[fx::PublishPost::INFO]], delete_post,
        schedule_post [effects = &[fx::PublishPost::INFO]], cancel_post, publish_post [effects = &[fx::PublishPost::INFO]],
        retry_variant [effects = &[fx::PublishPost::INFO]],
    ],
    schemas = [Post, PostStatus, Variant, VariantStatus, VariantError, VariantInput, Media, CreatePost, UpdatePost, SchedulePost],
}

async fn load(app: &App, req: &WsReq) -> ApiResult<(Post, i64)> {
    domain::posts::load(app, &req.ws, &req.path_id::<PostId>("id")?).await
}

/// A post's channels must be active channels of the workspace and its texts within their
/// limits (one BatchGetItem, only when it names channels).
async fn check_channels(app: &App, ws: &WorkspaceId, post: &Post) -> ApiResult<()> {
    post.check_media_urls(app.cfg.webhooks.url_policy)?;
    if post.channel_ids.is_empty() {
        return Ok(());
    }
    domain::channels::check_post(post, &domain::channels::of_post(app, ws, post).await?)
}

/// Write a change and its event.
/// A change that leaves the post scheduled is the effect `PublishPost`; any other is not.
/// `now`: it is published now (its value says so, not the moment it was asked).
async fn save(app: &App, req: &WsReq, change: &Change, version: i64, now: bool) -> ApiResult<()> {
    if change.post.status == PostStatus::Scheduled {
        domain::publishing::schedule(&req.grant, app, &req.ws, change, version, now).await
    } else {
        domain::publishing::save_unpublished(app, &req.ws, change, version).await
    }
}

// ---------- routes ----------

/// Create a draft post.
#[utoipa::path(post, path = "/posts", tag = "posts", request_body = CreatePost,
    responses((status = 201, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_post(app: &App, req: WsReq) -> ApiResult<Reply> {
    let post = Post::draft(req.json()?, chrono::Utc::now())?;
    check_channels(app, &req.ws, &post).await?;
    domain::posts::create(app, &req.ws, &post).await?;
    Ok(Reply::created(&post))
}

/// One post with its channel variants.
#[utoipa::path(get, path = "/posts/{id}", tag = "posts", params(("id" = String, Path, description = "post_...")),
    responses((status = 200, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors))]
pub async fn get_post(app: &App, req: WsReq) -> ApiResult<Reply> {
    Ok(Reply::ok(&load(app, &req).await?.0))
}

/// Posts in creation order, optionally filtered by status and/or channel.
#[utoipa::path(get, path = "/posts", tag = "posts",
    params(shared::openapi::PageParams,
        ("status" = Option<PostStatus>, Query), ("channel_id" = Option<domain::ids::ChannelId>, Query)),
    responses((status = 200, body = shared::openapi::ListOf<Post>), shared::openapi::CommonErrors))]
pub async fn list_posts(app: &App, req: WsReq) -> ApiResult<Reply> {
    let q: domain::posts::ListPosts = req.query_as()?;
    let page = req.page(app, "posts", &q.bound()).await?;
    Ok(Reply::page(&page, domain::posts::list(app, &req.ws, &q, page.after.clone(), page.limit).await?))
}

/// Change a draft or scheduled post.
#[utoipa::path(patch, path = "/posts/{id}", tag = "posts", request_body = UpdatePost, params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_post(app: &App, req: WsReq) -> ApiResult<Reply> {
    let patch: UpdatePost = req.json()?;
    let (post, version) = load(app, &req).await?;
    let change = post.apply(patch, chrono::Utc::now())?;
    check_channels(app, &req.ws, &change.post).await?;
    save(app, &req, &change, version, false).await?;
    Ok(Reply::ok(&change.post))
}

/// Delete a post that is not publishing.
#[utoipa::path(delete, path = "/posts/{id}", tag = "posts", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_post(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (post, version) = load(app, &req).await?;
    domain::posts::delete(app, &req.ws, &post, version).await?;
    Ok(Reply::deleted(&post.id, "post"))
}

/// Move a draft to `scheduled`. Needs a future `scheduled_at` and at least one channel.
#[utoipa::path(post, path = "/posts/{id}/schedule", tag = "posts", request_body(content = SchedulePost, description = "optional"),
    params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn schedule_post(app: &App, req: WsReq) -> ApiResult<Reply> {
    let input: SchedulePost = if req.body.is_empty() { SchedulePost::default() } else { req.json()? };
    let (post, version) = load(app, &req).await?;
    let change = post.schedule(input.scheduled_at, chrono::Utc::now())?;
    check_channels(app, &req.ws, &change.post).await?;
    save(app, &req, &change, version, false).await?;
    Ok(Reply::ok(&change.post))
}

/// Take a scheduled post back to `draft` (its `scheduled_at` is kept).
#[utoipa::path(post, path = "/posts/{id}/cancel", tag = "posts", params(("id" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn cancel_post(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (post, version) = load(app, &req).await?;
    let change = post.unschedule(chrono::Utc::now())?;
    save(app, &req, &change, version, false).await?;
    Ok(Reply::ok(&change.post))
}

/// Publish a draft or scheduled post now: the publisher takes it at once and publishes each
/// channel's variant (see the post's `status` and `variants` for the outcome).
#[utoipa::path(post, path = "/posts/{id}/publish", tag = "posts", params(("id" = String, Path)),
    responses((status = 202, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn publish_post(app: &App, req: WsReq) -> ApiResult<Reply> {
    let (post, version) = load(app, &req).await?;
    let change = post.publish_now(chrono::Utc::now())?;
    check_channels(app, &req.ws, &change.post).await?;
    save(app, &req, &change, version, true).await?;
    Ok(Reply::accepted(&change.post))
}

/// Try a failed variant again (the post goes back to `publishing`).
#[utoipa::path(post, path = "/posts/{id}/variants/{channel_id}/retry", tag = "posts",
    params(("id" = String, Path), ("channel_id" = domain::ids::ChannelId, Path)),
    responses((status = 202, body = shared::openapi::Data<Post>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn retry_variant(app: &App, req: WsReq) -> ApiResult<Reply> {
    let channel: ChannelId = req.path_id("channel_id")?;
    let (post, version) = load(app, &req).await?;
    let post = domain::publishing::retry_variant(&req.grant, app, &req.ws, &post, version, &channel).await?;
    Ok(Reply::accepted(&post))
}
