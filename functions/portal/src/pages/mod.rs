//! The portal as web pages, `/p/<workspace slug>/...`: server-rendered HTML that works without
//! JavaScript, on the same domain functions as the portal's API routes. `shared::web` is the
//! pipeline (session cookie, CSRF, rate limit, security headers, the grant); this module is
//! the site: its pages, their words in English and Norwegian Bokmål, the workspace's look.
//!
//! Templates are maud: HTML written in Rust and checked by the compiler, every interpolated
//! value escaped unless a page says `PreEscaped` (none does), and nothing to ship beside the
//! binary. askama would have kept the HTML in files, at the price of a second language to read
//! and templates the compiler checks less directly.

mod account;
mod assets;
mod bookings;
mod data;
mod layout;
mod manage;
mod sign_in;
mod unsubscribe;
pub mod words;

use domain::effects::{self as fx, Effect as _};
use domain::portal::Lang;
use domain::workspaces::Workspace;
use shared::cache::Ttl;
use shared::ratelimit::Class;
use shared::reexports::BoxFuture;
use shared::web::{Page, Site, View, Visit};
use shared::{ApiResult, App};
use words::Words;

use shared::page;

/// Every page, declared once.
pub static PAGES: &[Page] = &[
    page!(GET "/" => sign_in::home),
    page!(POST "/sign-in" => sign_in::start, effects = &[fx::EmailSignInLink::INFO], class = Class::PortalSignIn),
    page!(GET "/code" => sign_in::code_form),
    page!(POST "/code" => sign_in::code, class = Class::PortalSignIn),
    page!(GET "/link" => sign_in::link_form),
    page!(POST "/link" => sign_in::link, class = Class::PortalSignIn),
    page!(POST "/sign-out" => sign_in::sign_out, signed_in = true),
    page!(GET "/account" => account::show, signed_in = true),
    page!(POST "/account" => account::save, signed_in = true),
    page!(GET "/bookings" => bookings::list, signed_in = true),
    page!(POST "/bookings/{id}/cancel" => bookings::cancel, signed_in = true, effects = &[fx::SendEmail::INFO]),
    page!(GET "/bookings/{id}/move" => bookings::move_form, signed_in = true),
    page!(POST "/bookings/{id}/move" => bookings::move_to, signed_in = true, effects = &[fx::SendEmail::INFO]),
    page!(GET "/emails" => data::emails, signed_in = true),
    page!(GET "/data" => data::show, signed_in = true),
    page!(POST "/data/export" => data::export, signed_in = true, effects = &[fx::ExportSubject::INFO], class = Class::GdprExport),
    page!(GET "/data/exports/{id}" => data::export_status, signed_in = true),
    page!(POST "/data/exports/{id}/send" => data::export_send, signed_in = true, effects = &[fx::SendEmail::INFO], class = Class::GdprExport),
    page!(POST "/data/erasure/code" => data::erasure_code, signed_in = true, effects = &[fx::SendEmail::INFO]),
    page!(GET "/data/erasure" => data::erasure_form, signed_in = true),
    page!(POST "/data/erasure" => data::erase, signed_in = true, effects = &[fx::EraseSubject::INFO]),
    page!(GET "/booking" => manage::show, link = domain::bookings::manage::PURPOSE),
    page!(POST "/booking/cancel" => manage::cancel, effects = &[fx::SendEmail::INFO], link = domain::bookings::manage::PURPOSE),
    page!(GET "/booking/move" => manage::move_form, link = domain::bookings::manage::PURPOSE),
    page!(POST "/booking/move" => manage::move_to, effects = &[fx::SendEmail::INFO], link = domain::bookings::manage::PURPOSE),
    page!(GET "/unsubscribe" => unsubscribe::show, class = Class::Unsubscribe, bearer = true),
    page!(POST "/unsubscribe" => unsubscribe::post, class = Class::Unsubscribe, bearer = true),
    page!(GET "/style.css" => assets::style),
    page!(GET "/portal.js" => assets::script),
    page!(GET "/logo" => assets::logo),
];

/// How long a container trusts what it read of a workspace (its slug, name, look, zone): a
/// page then costs its route's reads and no more. A changed slug or look shows within this.
const WORKSPACE_TTL: std::time::Duration = std::time::Duration::from_secs(30);

/// Entries a container keeps of each (a function serves few workspaces at a time).
const KEPT: usize = 256;
static SLUGS: Ttl<Option<shared::web::Resolved>> = Ttl::new(WORKSPACE_TTL, KEPT);
static WORKSPACES: Ttl<Workspace> = Ttl::new(WORKSPACE_TTL, KEPT);

fn resolve<'a>(app: &'a App, slug: &'a str) -> BoxFuture<'a, ApiResult<Option<shared::web::Resolved>>> {
    Box::pin(async move {
        if let Some(ws) = SLUGS.get(slug) {
            return Ok(ws);
        }
        let ws = domain::workspaces::by_slug(app, slug).await?;
        SLUGS.put(slug, ws.clone());
        Ok(ws)
    })
}

/// The workspace's settings as the pages show them (cached as [`WORKSPACE_TTL`] says).
pub async fn workspace(app: &App, ws: &shared::auth::WorkspaceId) -> ApiResult<Workspace> {
    if let Some(w) = WORKSPACES.get(ws) {
        return Ok(w);
    }
    let (w, _) = domain::workspaces::load(app, ws).await?;
    WORKSPACES.put(ws, w.clone());
    Ok(w)
}

pub static SITE: Site = Site {
    prefix: "/p/",
    sessions: shared::web::Sessions::Portal,
    cookie_path: None,
    root: &[],
    pages: PAGES,
    resolve,
    failure: layout::failure,
};

/// What every page of one visit renders with.
pub struct Ctx {
    pub base: String,
    pub lang: Lang,
    pub w: &'static Words,
    pub ws: Workspace,
    pub csrf: String,
    pub signed_in: bool,
    pub zone: shared::zone::Zone,
    pub zone_name: String,
}

/// Where a visitor's times are shown: the zone they chose, the one their browser told the
/// optional script, or the workspace's.
pub const TZ_COOKIE: &str = "portal_tz";
pub const TZ_AUTO_COOKIE: &str = "portal_tz_auto";

impl Ctx {
    pub async fn of(app: &App, v: &Visit) -> ApiResult<Self> {
        let ws = workspace(app, &v.ws).await?;
        let lang = Lang::from_accept_language(v.header("accept-language"));
        let chosen = [v.cookie(TZ_COOKIE), v.cookie(TZ_AUTO_COOKIE)]
            .into_iter()
            .flatten()
            .map(percent_decode)
            .find_map(|name| shared::zone::Zone::named(&name).map(|z| (name, z)));
        let (zone_name, zone) = chosen
            .or_else(|| shared::zone::Zone::named(&ws.timezone).map(|z| (ws.timezone.clone(), z)))
            .unwrap_or(("UTC".into(), shared::zone::Zone::utc()));
        Ok(Self {
            base: v.base.clone(),
            lang,
            w: words::of(lang),
            ws,
            csrf: v.csrf.clone(),
            signed_in: v.session.is_some(),
            zone,
            zone_name,
        })
    }

    /// A time as the customer reads it: weekday, date and time in their zone.
    pub fn when(&self, t: &shared::ids::Timestamp) -> String {
        use chrono::{Datelike, Timelike};
        let local = t.time().with_timezone(&self.zone);
        let (wd, mo) = (self.w.weekdays[local.weekday().num_days_from_monday() as usize], self.w.months[local.month0() as usize]);
        match self.lang {
            Lang::En => format!("{wd} {} {mo} {}, {:02}:{:02}", local.day(), local.year(), local.hour(), local.minute()),
            Lang::Nb => format!("{wd} {}. {mo} {} kl. {:02}:{:02}", local.day(), local.year(), local.hour(), local.minute()),
        }
    }

    /// The date alone.
    pub fn day(&self, t: &shared::ids::Timestamp) -> String {
        use chrono::Datelike;
        let local = t.time().with_timezone(&self.zone);
        let (wd, mo) = (self.w.weekdays[local.weekday().num_days_from_monday() as usize], self.w.months[local.month0() as usize]);
        match self.lang {
            Lang::En => format!("{wd} {} {mo} {}", local.day(), local.year()),
            Lang::Nb => format!("{wd} {}. {mo} {}", local.day(), local.year()),
        }
    }

    /// A view in this visit's language.
    pub fn page(&self, title: &str, notice: Option<layout::Notice>, body: maud::Markup) -> View {
        View::html(layout::page(self, title, notice, body)).lang(self.lang.tag())
    }
}

/// The signed-in customer's contact, loaded: every signed-in page starts here, so a session
/// whose contact was deleted or erased reaches nothing (401, as the portal's API routes answer).
/// Answers the contact and its version.
pub async fn customer(app: &App, v: &Visit) -> ApiResult<(domain::contacts::Contact, i64)> {
    let id = session_contact_id(v)?;
    match domain::contacts::load(app, &v.ws, &id).await {
        Ok(c) => Ok(c),
        Err(e) if e.status() == http::StatusCode::NOT_FOUND => {
            Err(shared::ApiError::unauthorized("this session's contact no longer exists"))
        }
        Err(e) => Err(e),
    }
}

/// The session's contact id without loading it: only for ending the session's sessions.
fn session_contact_id(v: &Visit) -> ApiResult<domain::contacts::ContactId> {
    domain::contacts::ContactId::parse(v.contact()?).ok_or_else(|| shared::ApiError::unauthorized("sign in first"))
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}
