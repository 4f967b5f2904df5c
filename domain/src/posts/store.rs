//! Posts in the table: their record and keys, the writes of a post's life that are not an
//! effect (`publishing` holds those), its look-up and its list.

use super::{ChannelId, Post, PostId, PostStatus};
use crate::keys;
use serde::Deserialize;
use shared::auth::WorkspaceId;
use shared::events::EventType;
use shared::ids::Timestamp;
use shared::store::{Record, ws_pk};
use shared::{ApiError, ApiResult};

pub fn record(ws: &WorkspaceId, post: &Post) -> ApiResult<Record> {
    let mut rec = Record::new(ws_pk(ws), keys::POST.sk(&post.id), post)?
        .gsi1(keys::POST.gsi1_pk((ws, post.status.as_str())), keys::POST.gsi1_sk(&post.id));
    // Due while scheduled, and while publishing, so the tick hands a post whose publisher died
    // to another one.
    if matches!(post.status, PostStatus::Scheduled | PostStatus::Publishing)
        && let Some(at) = &post.scheduled_at
    {
        rec = rec.gsi2(keys::POST.gsi2_pk(()), keys::POST.gsi2_sk((&at.to_string(), ws, &post.id)));
    }
    Ok(rec)
}

/// A deleted channel leaves the draft and scheduled posts that named it (`post.updated`; a
/// scheduled post left without channels goes back to draft). Published variants stay.
pub async fn detach_channel(app: &shared::App, ws: &WorkspaceId, channel_id: &str) -> ApiResult<()> {
    for status in [PostStatus::Draft, PostStatus::Scheduled] {
        let mut after = None;
        loop {
            let spec = keys::POSTS_BY_STATUS
                .query((ws, status.as_str()), after.clone(), 100)
                .filter("contains(channel_ids, :channel)", vec![(":channel", shared::store::s(channel_id))]);
            let page = app.db.query_page(spec).await?;
            for item in page.items {
                let key = shared::store::get_str(&item, "id").map(PostId::trusted);
                let Some(id) = key else { continue };
                for _ in 0..3 {
                    let Some((post, version)) = app.db.get_object::<Post>(ws, &keys::POST.sk(&id)).await? else { break };
                    let p = post.without_channel(channel_id, Timestamp::now());
                    let res = shared::outbox::Tx::new()
                        .replace(record(ws, &p)?, version)
                        .event(shared::events::Event::new(ws, EventType::PostUpdated, &p))
                        .commit(app)
                        .await;
                    match res {
                        Ok(()) => break,
                        Err(shared::store::TxError::Condition(_)) => continue,
                        Err(shared::store::TxError::Api(e)) => return Err(e),
                    }
                }
            }
            match page.next_after {
                Some(a) => after = Some(a),
                None => break,
            }
        }
    }
    Ok(())
}

/// A post of the workspace with its version; 404 when there is none.
pub async fn load(app: &shared::App, ws: &WorkspaceId, id: &PostId) -> ApiResult<(Post, i64)> {
    app.db.get_object(ws, &keys::POST.sk(id)).await?.ok_or_else(|| ApiError::not_found("post"))
}

/// Write a new draft and its `post.created`.
pub async fn create(app: &shared::App, ws: &WorkspaceId, post: &Post) -> ApiResult<()> {
    shared::outbox::Tx::new()
        .create(record(ws, post)?.version(1))
        .event(shared::events::Event::new(ws, EventType::PostCreated, post))
        .commit(app)
        .await
        .map_err(shared::store::TxError::stale)
}

/// Delete a post that is not publishing (a publisher holds it), with `post.deleted`.
pub async fn delete(app: &shared::App, ws: &WorkspaceId, post: &Post, version: i64) -> ApiResult<()> {
    if post.status == PostStatus::Publishing {
        return Err(ApiError::conflict("a post cannot be deleted while it is publishing"));
    }
    shared::outbox::Tx::new()
        .delete_versioned(ws_pk(ws), keys::POST.sk(&post.id), version)
        .event(shared::events::Event::new(ws, EventType::PostDeleted, post))
        .commit(app)
        .await
        .map_err(shared::store::TxError::stale)
}

/// The filters of `GET /posts` (`limit` and `cursor` are the page's); they combine.
#[derive(Deserialize)]
pub struct ListPosts {
    pub status: Option<PostStatus>,
    #[serde(default)]
    pub channel_id: Option<ChannelId>,
}

impl ListPosts {
    /// The filters as a page's cursor binds them.
    pub fn bound(&self) -> [(&'static str, Option<&str>); 2] {
        [("status", self.status.map(PostStatus::as_str)), ("channel_id", self.channel_id.as_deref())]
    }
}

/// One page of posts in creation order after `after` (by status when asked; a channel as the
/// query's filter), and the key to go on from.
pub async fn list(
    app: &shared::App,
    ws: &WorkspaceId,
    q: &ListPosts,
    after: Option<String>,
    limit: usize,
) -> ApiResult<(Vec<Post>, Option<String>)> {
    let mut spec = match q.status {
        Some(st) => keys::POSTS_BY_STATUS.query((ws, st.as_str()), after, limit),
        None => keys::POSTS.query(ws, after, limit),
    };
    if let Some(c) = &q.channel_id {
        spec = spec.filter("contains(channel_ids, :channel)", vec![(":channel", shared::store::s(c.as_str()))]);
    }
    shared::request::page::<Post>(app, spec).await
}
