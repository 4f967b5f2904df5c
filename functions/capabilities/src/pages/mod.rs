//! The hosted approval pages, `/approvals/<workspace slug>/...`: a person of the workspace signs
//! in with the workspace's OpenID provider (`shared::oidc`), sees what an agent asks to do
//! exactly as it will happen (the emails as their recipients get them, what the request
//! changes, what it depends on) and approves or denies it. Server-rendered HTML that works
//! without JavaScript, through the pipeline the portal's pages use (`shared::web`: cookies,
//! CSRF, rate limits, security headers). Who may approve is the API's rule
//! (`domain::capabilities::may_approve`): a page for a request the person's role cannot approve
//! says why and offers nothing to click.
//!
//! Templates are maud, as the portal's: every interpolated value is escaped, except an email's
//! HTML, which is first cleaned by `shared::html::sanitise` (ammonia's allowlist; no script,
//! style, frame or remote image survives) and shown as such.

mod layout;
mod requests;
mod sign_in;
pub mod words;

use domain::portal::Lang;
use shared::page;
use shared::reexports::BoxFuture;
use shared::web::{Page, Site, View, Visit};
use shared::{ApiResult, App};
use words::Words;

/// Every page, declared once. Approving is not an effect (it mints a confirmation), so no page
/// declares one; `domain::approvals` checks the approver.
pub static PAGES: &[Page] = &[
    page!(GET "/" => sign_in::home),
    page!(GET "/sign-in" => sign_in::start),
    page!(POST "/sign-out" => sign_in::sign_out),
    page!(GET "/requests/{id}" => requests::show),
    page!(POST "/requests/{id}/approve" => requests::approve, signed_in = true),
    page!(POST "/requests/{id}/deny" => requests::deny, signed_in = true),
    page!(GET "/style.css" => style),
];

/// The provider's one redirect URI, for every workspace: `/approvals/callback`.
pub static ROOT: &[Page] = &[page!(GET "/callback" => sign_in::callback)];

pub static SITE: Site = Site {
    prefix: "/approvals/",
    sessions: shared::web::Sessions::Person,
    // A person's sign-in serves every workspace they belong to (each page checks membership).
    cookie_path: Some(COOKIE_PATH),
    root: ROOT,
    pages: PAGES,
    resolve,
    failure: layout::failure,
};

pub const COOKIE_PATH: &str = "/approvals";

fn resolve<'a>(app: &'a App, slug: &'a str) -> BoxFuture<'a, ApiResult<Option<shared::web::Resolved>>> {
    Box::pin(domain::workspaces::by_slug(app, slug))
}

/// What the API asks of `GET /approval-requests`: the pages show no more than it would.
pub fn may_read(p: &shared::auth::Principal) -> ApiResult<()> {
    if p.scopes.contains(&shared::auth::Scope::Read) {
        Ok(())
    } else {
        Err(shared::ApiError::forbidden("reading approval requests needs the read scope (your role and your token)"))
    }
}

const CSS: &str = include_str!("static/approvals.css");

async fn style(_app: &App, _v: Visit) -> ApiResult<View> {
    Ok(View::asset("text/css; charset=utf-8", CSS.as_bytes().to_vec(), 300))
}

/// What every page of one visit renders with.
pub struct Ctx {
    pub base: String,
    pub lang: Lang,
    pub w: &'static Words,
    pub ws_name: String,
    pub csrf: String,
    /// The signed-in person's subject.
    pub person: Option<String>,
}

impl Ctx {
    pub async fn of(app: &App, v: &Visit) -> ApiResult<Self> {
        let (ws, _) = domain::workspaces::load(app, &v.ws).await?;
        let lang = Lang::from_accept_language(v.header("accept-language"));
        Ok(Self {
            base: v.base.clone(),
            lang,
            w: words::of(lang),
            ws_name: ws.name,
            csrf: v.csrf.clone(),
            person: v.person.as_ref().map(|p| p.subject.clone()),
        })
    }

    pub fn page(&self, title: &str, notice: Option<layout::Notice>, body: maud::Markup) -> View {
        View::html(layout::page(self, title, notice, body)).lang(self.lang.tag())
    }
}
