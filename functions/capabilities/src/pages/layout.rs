//! The frame of every approval page: head, the workspace's name, who is signed in, a notice.

use super::Ctx;
use maud::{DOCTYPE, Markup, html};
use shared::web::{CSRF_FIELD, Failure};

pub enum Notice {
    Done(String),
    Problem(String),
}

/// The hidden field every form carries.
pub fn csrf(ctx: &Ctx) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(ctx.csrf); }
}

fn head(title: &str, site: &str, base: Option<&str>) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="referrer" content="no-referrer";
            title { (title) " · " (site) }
            @if let Some(base) = base {
                link rel="stylesheet" href={ (base) "/style.css" };
            }
        }
    }
}

pub fn page(ctx: &Ctx, title: &str, notice: Option<Notice>, body: Markup) -> String {
    let w = ctx.w;
    html! {
        (DOCTYPE)
        html lang=(ctx.lang.tag()) {
            (head(title, &ctx.ws_name, Some(&ctx.base)))
            body {
                header.top {
                    a.brand href={ (ctx.base) "/" } { (ctx.ws_name) " · " (w.title_home) }
                    @if let Some(person) = &ctx.person {
                        form method="post" action={ (ctx.base) "/sign-out" } {
                            span.hint { (w.signed_in_as) " " (person) " " }
                            (csrf(ctx))
                            button.link type="submit" { (w.sign_out) }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    @match notice {
                        Some(Notice::Done(m)) => p.notice.done role="status" { (m) },
                        Some(Notice::Problem(m)) => p.notice.problem role="alert" { (m) },
                        None => {},
                    }
                    (body)
                }
            }
        }
    }
    .into_string()
}

/// The page of a refusal or a failure, in the visitor's language, with the way back.
pub fn failure(f: &Failure<'_>) -> String {
    let lang = domain::portal::Lang::from_accept_language(f.accept_language);
    let w = super::words::of(lang);
    let message = match f.status.as_u16() {
        404 => w.error_not_found,
        429 => w.error_busy,
        _ if !f.message.is_empty() => f.message,
        _ => w.error_generic,
    };
    // A root page's base is the site's; its style sheet is a workspace's.
    let styled = f.base.filter(|b| b.trim_end_matches('/') != super::COOKIE_PATH);
    html! {
        (DOCTYPE)
        html lang=(lang.tag()) {
            (head(w.error_title, w.title_home, styled))
            body {
                main {
                    h1 { (w.error_title) }
                    p role="alert" { (message) }
                    @if let Some(base) = styled {
                        p { a href={ (base) "/" } { (w.back) } }
                    }
                }
            }
        }
    }
    .into_string()
}
