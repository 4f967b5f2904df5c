//! Links a delivery gains as it is signed: a `booking.*` event's booking (its data, or the
//! rescheduled event's `to`) gets `manage_url`, the customer's manage link
//! (`shared::links::BOOKING`). Added here and not to the stored event, so only the endpoints an
//! admin chose receive a customer's authority, never a reader of the stored event or of
//! a delivery's record. Made from the body alone (the booking's id, customer and end), so every
//! attempt and replay of one event carries the same link. Left out when the pages have no
//! address (`PORTAL_PAGES_URL`: the dispatcher serves no request to take one from) or the
//! booking's customer was erased. A store or secret that cannot answer fails the attempt, which
//! is retried: the link is never dropped for a passing fault.

use super::Dispatcher;
use shared::ApiResult;
use shared::auth::WorkspaceId;
use shared::events::Event;
use shared::links::{BOOKING, Claims};
use shared::store::{self, ws_pk};
use std::borrow::Cow;

/// How long a container trusts a workspace's slug it read (a renamed workspace's former slug
/// keeps working on the pages anyway).
static SLUGS: shared::cache::Ttl<Option<String>> = shared::cache::Ttl::new(std::time::Duration::from_secs(60), 256);

async fn slug(d: &Dispatcher, ws: &WorkspaceId) -> ApiResult<Option<String>> {
    if let Some(s) = SLUGS.get(ws) {
        return Ok(s);
    }
    let item = d.app.db.get(&ws_pk(ws), &crate::keys::WORKSPACE.sk(())).await?;
    let found = item.as_ref().and_then(|i| store::get_str(i, "slug")).map(String::from);
    SLUGS.put(ws, found.clone());
    Ok(found)
}

/// The booking's claims from its JSON: its id, customer and end.
fn claims(booking: &serde_json::Value) -> Option<Claims> {
    let end = chrono::DateTime::parse_from_rfc3339(booking.get("end")?.as_str()?).ok()?.timestamp();
    Some(Claims { object: booking.get("id")?.as_str()?.into(), contact: booking.get("contact_id")?.as_str()?.into(), expires: end })
}

/// `body` as it is signed and sent: with its links, when it has any.
pub async fn add<'b>(d: &Dispatcher, ws: &WorkspaceId, event_type: &str, body: &'b str) -> ApiResult<Cow<'b, str>> {
    let Some(origin) = d.app.cfg.portal_pages_url.as_deref().filter(|_| event_type.starts_with("booking.")) else {
        return Ok(Cow::Borrowed(body));
    };
    let Ok(mut ev) = serde_json::from_str::<Event>(body) else {
        tracing::warn!(event_type, "a delivery's body is not an event; sent without links");
        return Ok(Cow::Borrowed(body));
    };
    let target = if event_type == "booking.rescheduled" { ev.data.get_mut("to") } else { Some(&mut ev.data) };
    let Some(booking) = target.filter(|b| b.get("object").and_then(|o| o.as_str()) == Some("booking")) else {
        return Ok(Cow::Borrowed(body));
    };
    let Some(claims) = claims(booking) else { return Ok(Cow::Borrowed(body)) };
    let Some(slug) = slug(d, ws).await? else { return Ok(Cow::Borrowed(body)) };
    let Some(url) = BOOKING.url(d.app.platform_secret().await?, origin, &slug, ws, &claims) else { return Ok(Cow::Borrowed(body)) };
    booking["manage_url"] = url.into();
    Ok(Cow::Owned(ev.body()))
}
