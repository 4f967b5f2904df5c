//! A booking's manage link: `<pages>/p/<slug>/booking?token=<token>`, a `shared::links` token
//! for this booking and its customer that expires at the booking's end. It opens the portal's
//! page of that one booking without a sign-in, where the customer may cancel it or move it as
//! a signed-in customer may (the service's window, the resource's open slots).
//!
//! Who gets it: the customer, in each booking email (sealed with the email, as a sign-in link
//! is, so no reader of the stored email can use it), and the workspace's webhook endpoints,
//! which an admin chose, in `booking.*` deliveries (`webhooks::dispatch`, added as the delivery
//! is signed, so a stored event never holds it). Never an API answer or a stored event: a
//! read-only key does not become the customer.
//!
//! A link follows its booking: once moved, it opens the booking it became (the same customer's,
//! by `rescheduled_to`); once the customer is erased, or the booking ends, it opens nothing
//! (`booking::by_link`).

use super::Booking;
use shared::auth::WorkspaceId;
use shared::links::Claims;
use shared::store::{self, ws_pk};
use shared::{ApiResult, App};

/// The links' purpose (`shared::links`): a token for another purpose never opens a booking.
pub const PURPOSE: &str = shared::links::BOOKING.purpose;
/// The portal's page a link opens, under `/p/<slug>`.
pub const PAGE: &str = shared::links::BOOKING.page;

/// Where a workspace's links point: the pages' origin and the workspace's slug.
pub struct Pages {
    origin: String,
    slug: String,
}

impl Pages {
    /// The pages of `ws` at `origin` (the request's pages origin, else `PORTAL_PAGES_URL`): None
    /// when neither is known, and the links are left out.
    pub async fn of(app: &App, ws: &WorkspaceId, origin: Option<&str>) -> ApiResult<Option<Self>> {
        let Some(origin) = origin.or(app.cfg.portal_pages_url.as_deref()) else { return Ok(None) };
        // The workspaces area is above this one: its slug is read as stored.
        let item = app.db.get(&ws_pk(ws), &crate::keys::WORKSPACE.sk(())).await?;
        let Some(slug) = item.as_ref().and_then(|i| store::get_str(i, "slug")) else { return Ok(None) };
        Ok(Some(Self { origin: origin.trim_end_matches('/').to_string(), slug: slug.to_string() }))
    }

    /// The manage link of `b`, or None for a booking without a customer (erased).
    pub fn url(&self, secret: &shared::app::PlatformSecret, ws: &WorkspaceId, b: &Booking) -> Option<String> {
        shared::links::BOOKING.url(secret, &self.origin, &self.slug, ws, &claims(b))
    }
}

/// What `b`'s link grants: this booking of its customer, until its end.
fn claims(b: &Booking) -> Claims {
    Claims { object: b.id.to_string(), contact: b.contact_id.to_string(), expires: b.end.time().timestamp() }
}

/// The token of `b`'s link.
pub fn token(secret: &shared::app::PlatformSecret, ws: &WorkspaceId, b: &Booking) -> Option<String> {
    shared::links::sign(secret, PURPOSE, ws, &claims(b))
}
