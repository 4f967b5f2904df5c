//! Publishing posts: the publisher (`functions/publisher`) takes a due post from its queue,
//! publishes each variant to its channel independently and concurrently, and records the
//! outcome on the post.
//!
//! Exactly one remote post per variant: each variant is claimed with a conditional write on its
//! own item (`PUBVARIANT#<post>#<channel>`, with a lease), so two copies of a message never
//! publish a variant at the same time; and every attempt of a variant carries the same
//! idempotency key (`<post id>/<channel id>`), from which Mastodon's `Idempotency-Key`,
//! Bluesky's record key and the webhook channel's `X-Service-Idempotency-Key` come. A
//! publisher that dies between the remote call and the record leaves a claim that expires;
//! the next attempt repeats the call with the same key and finds the first post.

use crate::channels::network::{ErrorCategory, NetError, Outgoing};
use crate::channels::{self, ChannelState, Stored as StoredChannel};
use crate::effects::PublishPost;
use crate::ids::{ChannelId, PostId};
use crate::keys;
use crate::posts::{self, Post, PostStatus, Variant, VariantError, VariantStatus};
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::authority::Grant;
use shared::events::Event;
use shared::events::EventType;
use shared::outbox::Tx;
use shared::sqs::{BatchResponse, SqsEvent};
use shared::store::{self, Item, TxError, n, s, ws_pk};
use shared::{ApiError, ApiResult, App};

/// How far ahead the tick queues posts (its period on AWS), with a delay until their time.
const TICK_AHEAD_SECS: i64 = 60;
/// Attempts of a variant with transient failures before it is failed.
pub const MAX_ATTEMPTS: i64 = 5;

#[derive(Serialize, Deserialize, Debug)]
pub struct PublishJob {
    #[serde(deserialize_with = "WorkspaceId::from_record")]
    pub workspace_id: WorkspaceId,
    pub post_id: PostId,
}

/// Queue a post for the publisher (after `delay` seconds, at most SQS's 15 minutes). A lost
/// message costs a delay only: the tick finds due posts again.
pub async fn enqueue(app: &App, ws: &WorkspaceId, post_id: &str, delay: i64) -> bool {
    let body =
        serde_json::to_string(&PublishJob { workspace_id: ws.clone(), post_id: crate::ids::PostId::trusted(post_id) }).expect("serializes");
    let res = app.hand_off(&app.cfg.publish_queue_url, &body, delay).await;
    if let Err(e) = &res {
        tracing::warn!(error = %e, post_id, "publish job not queued; the tick will find the post");
    }
    res.is_ok()
}

/// An UpdateItem on a variant's item; `#st` names its `state`.
fn variant_update<'a>(app: &'a App, key: &(String, String), expression: &str) -> store::Write<'a> {
    app.db.update(&key.0, &key.1, expression).name("#st", "state")
}

pub fn variant_sk(post_id: &PostId, channel_id: &ChannelId) -> String {
    keys::POST_VARIANT.sk((post_id, channel_id))
}

pub struct Publisher {
    pub app: App,
    pub http: shared::outbound::Client,
}

/// Where one variant stands after this run.
enum Step {
    Done(Variant),
    /// Another run holds it, or it waits for a retry: look again after this many seconds.
    Later(i64),
}

impl Publisher {
    pub fn new(app: App) -> Result<Self, String> {
        let http = channels::http_client(&app)?;
        Ok(Self { app, http })
    }

    /// The Lambda entry point: an SQS batch, or the schedule's event for the tick.
    pub async fn handle(&self, payload: serde_json::Value) -> Result<serde_json::Value, String> {
        if payload.get("Records").is_some() {
            let ev: SqsEvent = serde_json::from_value(payload).map_err(|e| format!("not an SQS event: {e}"))?;
            return Ok(serde_json::to_value(self.handle_sqs(ev).await).expect("serializes"));
        }
        let n = self.tick().await.map_err(|e| e.to_string())?;
        Ok(serde_json::json!({ "enqueued": n }))
    }

    pub async fn handle_sqs(&self, ev: SqsEvent) -> BatchResponse {
        let runs = ev.records.iter().map(|m| async move {
            let Ok(job) = serde_json::from_str::<PublishJob>(shared::sqs::body(m)) else {
                tracing::warn!(message_id = %shared::sqs::id(m), "not a publish job; dropped");
                return None;
            };
            match self.run(&job.workspace_id, &job.post_id).await {
                Ok(None) => None,
                Ok(Some(delay)) => (!enqueue(&self.app, &job.workspace_id, &job.post_id, delay).await).then_some(shared::sqs::id(m)),
                Err(e) => {
                    tracing::warn!(post_id = %job.post_id, error = %e, "publish run failed; message kept");
                    Some(shared::sqs::id(m))
                }
            }
        });
        let kept: Vec<Option<&str>> = futures_util::future::join_all(runs).await;
        shared::sqs::keep(kept.into_iter().flatten())
    }

    /// Queue every post whose time comes before the next tick (scheduled, or publishing with
    /// a run that died), each with a delay until its time, so it leaves on time and not a
    /// tick late. A post queued twice is harmless: variants are claimed.
    pub async fn tick(&self) -> ApiResult<usize> {
        let now = chrono::Utc::now();
        let upper = format!("{}#~", shared::ids::format_time(now + chrono::Duration::seconds(TICK_AHEAD_SECS)));
        let pk = keys::DUE_POSTS.pk(());
        let items = self.app.db.scan_range_on(Some(store::GSI2), &pk, &upper, None, 500, 10, 5000).await?;
        let mut n = 0;
        for item in &items {
            let Some(sk) = store::get_str(item, "gsi2sk") else { continue };
            let mut parts = sk.rsplitn(3, '#');
            let (Some(post), Some(ws), Some(at)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let delay = chrono::DateTime::parse_from_rfc3339(at).map_or(0, |t| (t.timestamp() - now.timestamp()).max(0));
            if enqueue(&self.app, &WorkspaceId::trusted(ws), post, delay).await {
                n += 1;
            }
        }
        if n > 0 {
            tracing::info!(enqueued = n, "publish tick queued due posts");
        }
        Ok(n)
    }

    /// Publish what is due of one post. `Some(delay)`: come back then (a variant waits).
    pub async fn run(&self, ws: &WorkspaceId, post_id: &PostId) -> ApiResult<Option<i64>> {
        let app = &self.app;
        let Some((mut post, version)) = app.db.get_object::<Post>(ws, &crate::keys::POST.sk(post_id)).await? else { return Ok(None) };
        let now = chrono::Utc::now();
        match post.status {
            PostStatus::Scheduled => {
                let at = post.scheduled_at.map(|t| t.time());
                if let Some(at) = at
                    && at > now
                {
                    return Ok(Some((at.timestamp() - now.timestamp()).max(1)));
                }
                post.status = PostStatus::Publishing;
                post.updated_at = shared::ids::Timestamp::from(now);
                let res = Tx::new()
                    .replace(posts::record(ws, &post)?, version)
                    .event(Event::new(ws, EventType::PostPublishing, &post))
                    .commit(app)
                    .await;
                match res {
                    Ok(()) => {}
                    // Changed meanwhile (cancelled, edited, or another run): look again.
                    Err(TxError::Condition(_)) => return Ok(Some(1)),
                    Err(TxError::Api(e)) => return Err(e),
                }
            }
            PostStatus::Publishing => {}
            _ => return Ok(None),
        }
        // The channels with their sealed credentials, in one read for every variant.
        let keys: Vec<(String, String)> = post.channel_ids.iter().map(|c| (ws_pk(ws), crate::keys::CHANNEL.sk(c))).collect();
        let channels: Vec<StoredChannel> =
            app.db.batch_get(&keys).await?.into_iter().map(StoredChannel::from_item).collect::<ApiResult<_>>()?;
        let steps = futures_util::future::join_all(
            post.variants.iter().filter(|v| !matches!(v.status, VariantStatus::Published | VariantStatus::Failed)).map(|v| {
                let ch = channels.iter().find(|c| c.channel.id == v.channel_id);
                self.variant(ws, &post, v, ch)
            }),
        )
        .await;
        let mut later = None::<i64>;
        let mut done = vec![];
        for s in steps {
            match s? {
                Step::Done(v) => done.push(v),
                Step::Later(d) => later = Some(later.map_or(d, |l| l.min(d))),
            }
        }
        self.record(ws, post_id, done, later.is_none()).await?;
        Ok(later)
    }

    /// Claim, publish and record one variant.
    async fn variant(&self, ws: &WorkspaceId, post: &Post, v: &Variant, ch: Option<&StoredChannel>) -> ApiResult<Step> {
        let app = &self.app;
        let now = chrono::Utc::now().timestamp();
        let key = (ws_pk(ws), variant_sk(&post.id, &v.channel_id));
        let claim =
            variant_update(app, &key, "SET #st = :publishing, claim_until = :until, attempts = if_not_exists(attempts, :zero) + :one")
                .when("attribute_not_exists(pk) OR (#st = :publishing AND claim_until < :now) OR (#st = :waiting AND retry_at <= :now)")
                .value(":publishing", s("publishing"))
                .value(":waiting", s("waiting"))
                .value(":until", n(now + app.cfg.publish_lease_secs))
                .value(":now", n(now))
                .value(":zero", n(0))
                .value(":one", n(1))
                .returning(shared::store::Returning::New)
                .apply()
                .await?;
        let attempts = match claim {
            Some(out) => store::get_i64(&out, "attempts").unwrap_or(1),
            None => {
                // Someone else's: finished (take its outcome), held, or waiting for its retry.
                let item = app.db.get(&key.0, &key.1).await?.unwrap_or_default();
                return Ok(outcome_of(&item, v).map_or_else(
                    || {
                        Step::Later(
                            store::get_i64(&item, "retry_at").or(store::get_i64(&item, "claim_until")).map_or(5, |t| (t - now).max(1)),
                        )
                    },
                    Step::Done,
                ));
            }
        };
        let result = match ch {
            None => Err(NetError::new(ErrorCategory::PlatformRejected, "the channel was deleted")),
            Some(c) if c.channel.state != ChannelState::Active => {
                Err(NetError::new(ErrorCategory::AuthExpired, format!("the channel is {}; reconnect it", state_name(c.channel.state))))
            }
            Some(c) => self.publish(ws, post, v, c).await,
        };
        let mut out = v.clone();
        let now_s = shared::ids::Timestamp::now();
        match result {
            Ok(p) => {
                out.status = VariantStatus::Published;
                out.remote_id = p.remote_id;
                out.permalink = p.permalink;
                out.published_at = Some(now_s);
                out.error = None;
            }
            Err(e) if e.category.retryable() && attempts < MAX_ATTEMPTS => {
                let delay = e.retry_after.map_or(5 << attempts.min(6), |r| r as i64).clamp(1, 900);
                tracing::info!(post_id = %post.id, channel_id = %v.channel_id, attempts, delay, reason = %e.message, "variant will be retried");
                variant_update(app, &key, "SET #st = :waiting, retry_at = :at, last_error = :err")
                    .value(":waiting", s("waiting"))
                    .value(":at", n(now + delay))
                    .value(":err", s(&e.message))
                    .required()
                    .await?;
                return Ok(Step::Later(delay));
            }
            Err(e) => {
                if e.category == ErrorCategory::AuthExpired
                    && let Some(c) = ch
                {
                    self.disconnect(ws, &c.channel.id, &e.message).await;
                }
                out.status = VariantStatus::Failed;
                out.error = Some(VariantError { category: e.category, message: e.message, retryable: e.category.retryable() });
            }
        }
        // The outcome is the record that ends the variant: kept, so a late copy of the message
        // takes it instead of publishing again.
        let outcome = serde_json::to_string(&out).map_err(|e| ApiError::internal(e))?;
        let mut tries = 0;
        loop {
            let res = variant_update(app, &key, "SET #st = :final, outcome = :o REMOVE claim_until, retry_at")
                .value(":final", s(if out.status == VariantStatus::Published { "published" } else { "failed" }))
                .value(":o", s(&outcome))
                .required()
                .await;
            match res {
                Ok(_) => break,
                // Published but not recorded: retry while the claim holds (after it expires a
                // second run would find the remote post by its key anyway).
                Err(e) if tries < 3 => {
                    tries += 1;
                    tracing::warn!(error = %e, "variant outcome not recorded; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(200 << tries)).await;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Step::Done(out))
    }

    async fn publish(
        &self,
        ws: &WorkspaceId,
        post: &Post,
        v: &Variant,
        stored: &StoredChannel,
    ) -> Result<channels::network::Published, NetError> {
        let internal = |e: ApiError| NetError::new(ErrorCategory::PlatformError, format!("could not read the channel: {e}"));
        let creds = stored.open_creds(&self.app, ws).await.map_err(internal)?;
        let session = stored.open_session(&self.app, ws).await.map_err(internal)?;
        let out = Outgoing {
            workspace_id: ws.into(),
            post_id: post.id.clone(),
            channel_id: v.channel_id.clone(),
            text: post.text_for(v),
            media: post.media_for(v),
            language: post.language.clone(),
            visibility: v.visibility,
            spoiler_text: v.spoiler_text.clone(),
            sensitive: v.sensitive,
            created_at: post.created_at.to_string(),
            idempotency_key: format!("{}/{}", post.id, v.channel_id),
        };
        let published = channels::publish(&self.http, &creds, session.clone(), &out).await?;
        if published.session.is_some() && published.session != session {
            self.save_session(ws, &stored.channel.id, &creds, published.session.as_ref()).await;
        }
        Ok(published)
    }

    /// Keep a renewed network session (best effort: the next run can log in again).
    async fn save_session(&self, ws: &WorkspaceId, channel_id: &ChannelId, creds: &channels::Creds, session: Option<&serde_json::Value>) {
        let Ok(Some(mut stored)) = channels::load(&self.app, ws, channel_id).await else { return };
        if let Ok((c, s)) = StoredChannel::seal(&self.app, ws, &stored.channel.id, creds, session).await {
            (stored.creds, stored.session) = (c, s);
            if let Ok(rec) = stored.record(ws) {
                let _ = Tx::new().replace(rec, stored.version).commit(&self.app).await;
            }
        }
    }

    /// The network refused the channel's credentials: it needs reconnecting.
    async fn disconnect(&self, ws: &WorkspaceId, channel_id: &ChannelId, why: &str) {
        for _ in 0..3 {
            let Ok(Some(mut stored)) = channels::load(&self.app, ws, channel_id).await else { return };
            if stored.channel.state == ChannelState::Disconnected {
                return;
            }
            stored.channel.state = ChannelState::Disconnected;
            stored.channel.last_error = Some(why.to_string());
            stored.channel.updated_at = shared::ids::Timestamp::now();
            let Ok(rec) = stored.record(ws) else { return };
            let res = Tx::new()
                .replace(rec, stored.version)
                .event(Event::new(ws, EventType::ChannelDisconnected, &stored.channel))
                .commit(&self.app)
                .await;
            if !matches!(res, Err(TxError::Condition(_))) {
                return;
            }
        }
    }

    /// Write finished variants onto the post, with their events; when every variant has
    /// ended (`finished`), the post's own outcome too.
    async fn record(&self, ws: &WorkspaceId, post_id: &PostId, done: Vec<Variant>, finished: bool) -> ApiResult<()> {
        let app = &self.app;
        for _ in 0..5 {
            let Some((mut post, version)) = app.db.get_object::<Post>(ws, &crate::keys::POST.sk(post_id)).await? else { return Ok(()) };
            if post.status != PostStatus::Publishing {
                return Ok(());
            }
            let mut events = vec![];
            for d in &done {
                if let Some(v) = post.variants.iter_mut().find(|v| v.channel_id == d.channel_id)
                    && v.status != d.status
                {
                    *v = d.clone();
                    let kind =
                        if d.status == VariantStatus::Published { EventType::PostVariantPublished } else { EventType::PostVariantFailed };
                    events.push(Event::new(ws, kind, &serde_json::json!({"post_id": post.id, "variant": d})));
                }
            }
            let ended = post.variants.iter().all(|v| matches!(v.status, VariantStatus::Published | VariantStatus::Failed));
            if finished && ended {
                let ok = post.variants.iter().filter(|v| v.status == VariantStatus::Published).count();
                post.status = match ok {
                    0 => PostStatus::Failed,
                    k if k == post.variants.len() => PostStatus::Published,
                    _ => PostStatus::PartiallyFailed,
                };
                if ok > 0 {
                    post.published_at = Some(shared::ids::Timestamp::now());
                }
            }
            if events.is_empty() && post.status == PostStatus::Publishing {
                return Ok(());
            }
            post.updated_at = shared::ids::Timestamp::now();
            let mut tx = Tx::new().replace(posts::record(ws, &post)?, version);
            for ev in events {
                tx = tx.event(ev);
            }
            if post.status != PostStatus::Publishing {
                let kind = match post.status {
                    PostStatus::Published => EventType::PostPublished,
                    PostStatus::PartiallyFailed => EventType::PostPartiallyFailed,
                    _ => EventType::PostFailed,
                };
                tx = tx.event(Event::new(ws, kind, &post));
            }
            match tx.commit(app).await {
                Ok(()) => return Ok(()),
                Err(TxError::Condition(_)) => continue,
                Err(TxError::Api(e)) => return Err(e),
            }
        }
        Err(ApiError::conflict("the post kept changing while its outcome was recorded"))
    }
}

/// A variant item's final outcome, if it has one.
fn outcome_of(item: &Item, _v: &Variant) -> Option<Variant> {
    let st = store::get_str(item, "state")?;
    if st != "published" && st != "failed" {
        return None;
    }
    serde_json::from_str(store::get_str(item, "outcome")?).ok()
}

fn state_name(s: ChannelState) -> &'static str {
    match s {
        ChannelState::Connecting => "connecting",
        ChannelState::Active => "active",
        ChannelState::Disconnected => "disconnected",
        ChannelState::Error => "in error",
    }
}

/// A change that leaves a post unpublished (a draft's edit, a schedule taken back).
pub async fn save_unpublished(app: &App, ws: &WorkspaceId, change: &posts::Change, version: i64) -> ApiResult<()> {
    if change.post.status != PostStatus::Draft {
        return Err(ApiError::internal("a change that publishes a post needs its authority (publishing::schedule)"));
    }
    write(app, ws, change, version, Tx::new()).await
}

/// The value of `PublishPost`: what each channel will get, and when.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Publishing {
    pub post_id: PostId,
    /// When it goes out; null for now.
    pub at: Option<shared::ids::Timestamp>,
    /// The language every channel is told (BCP 47), if any.
    pub language: Option<String>,
    pub variants: Vec<Going>,
}

/// What one channel gets.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Going {
    pub channel_id: ChannelId,
    pub text: String,
    /// Each image by its URL and alt text (fetched when it is published).
    pub media: Vec<posts::Media>,
    pub visibility: Option<posts::Visibility>,
    pub spoiler_text: Option<String>,
    /// Its images hidden behind a sensitive-media warning.
    pub sensitive: Option<bool>,
}

impl crate::effects::Valued for PublishPost {
    type Value = Publishing;
}

impl Publishing {
    /// `post` as it will go out at `at` (None: now), to every channel or to `only` one.
    pub fn of(post: &Post, at: Option<shared::ids::Timestamp>, only: Option<&ChannelId>) -> Self {
        let variants = post
            .variants
            .iter()
            .filter(|v| only.is_none_or(|c| *c == v.channel_id))
            .map(|v| Going {
                channel_id: v.channel_id.clone(),
                text: post.text_for(v),
                media: post.media_for(v),
                visibility: v.visibility,
                spoiler_text: v.spoiler_text.clone(),
                sensitive: v.sensitive,
            })
            .collect();
        Self { post_id: post.id.clone(), at, language: post.language.clone(), variants }
    }
}

/// The effect `PublishPost`, asked of `grant` for what the post will publish: a change that
/// leaves a post `scheduled` (scheduling a draft, publishing it now (`now`), or editing what a
/// scheduled post will publish); the tick or the queue message sent here (when it is due now)
/// publishes it.
pub async fn schedule(grant: &Grant, app: &App, ws: &WorkspaceId, change: &posts::Change, version: i64, now: bool) -> ApiResult<()> {
    let at = if now { None } else { change.post.scheduled_at };
    let auth = grant.authorize_value::<PublishPost>(&Publishing::of(&change.post, at, None))?;
    let sk = crate::keys::POST.sk(&change.post.id);
    write(app, ws, change, version, auth.tx(&[(&sk, version)])?).await?;
    let due = change.post.scheduled_at.map(|t| t.time());
    if due.is_some_and(|t| t.timestamp() <= chrono::Utc::now().timestamp()) {
        enqueue(app, ws, &change.post.id, 0).await;
    }
    Ok(())
}

async fn write(app: &App, ws: &WorkspaceId, change: &posts::Change, version: i64, tx: Tx) -> ApiResult<()> {
    let (post, event) = (&change.post, change.event);
    tx.replace(posts::record(ws, post)?, version).event(Event::new(ws, event, post)).commit(app).await.map_err(TxError::stale)
}

/// `POST /posts/{id}/variants/{channel_id}/retry`: a failed variant goes back to pending and
/// the post to publishing; its old outcome record is removed in the same transaction.
pub async fn retry_variant(
    grant: &Grant,
    app: &App,
    ws: &WorkspaceId,
    post: &Post,
    version: i64,
    channel_id: &ChannelId,
) -> ApiResult<Post> {
    let Some(i) = post.variants.iter().position(|v| v.channel_id == *channel_id) else {
        return Err(ApiError::not_found("variant for this channel on the post"));
    };
    if post.variants[i].status != VariantStatus::Failed {
        return Err(ApiError::conflict("only a failed variant can be retried"));
    }
    let auth = grant.authorize_value::<PublishPost>(&Publishing::of(post, None, Some(channel_id)))?;
    let mut p = post.clone();
    p.variants[i].status = VariantStatus::Pending;
    p.variants[i].error = None;
    p.status = PostStatus::Publishing;
    p.updated_at = shared::ids::Timestamp::now();
    let sk = crate::keys::POST.sk(&p.id);
    auth.tx(&[(&sk, version)])?
        .replace(posts::record(ws, &p)?, version)
        .delete_if(ws_pk(ws), variant_sk(&p.id, channel_id), "", vec![])
        .event(Event::new(ws, EventType::PostPublishing, &p))
        .commit(app)
        .await
        .map_err(TxError::stale)?;
    enqueue(app, ws, &p.id, 0).await;
    Ok(p)
}
