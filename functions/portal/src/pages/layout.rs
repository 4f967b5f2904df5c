//! The frame of every page: head, the workspace's name and logo, the navigation, a notice.

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

fn head(title: &str, site: &str, base: Option<&str>, version: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="referrer" content="no-referrer";
            title { (title) " · " (site) }
            @if let Some(base) = base {
                link rel="stylesheet" href={ (base) "/style.css?v=" (version) };
                script src={ (base) "/portal.js" } defer {}
            }
        }
    }
}

/// The field for a 6-digit code from the customer's inbox (sign-in, erasure).
pub fn code_field(ctx: &Ctx) -> Markup {
    html! {
        label for="code" { (ctx.w.code_label) }
        input #code type="text" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required;
    }
}

pub fn page(ctx: &Ctx, title: &str, notice: Option<Notice>, body: Markup) -> String {
    let w = ctx.w;
    let version = ctx.ws.accent_color.as_deref().unwrap_or("d").trim_start_matches('#').to_string();
    let nav = [("/account", w.nav_account), ("/bookings", w.nav_bookings), ("/emails", w.nav_emails), ("/data", w.nav_data)];
    html! {
        (DOCTYPE)
        html lang=(ctx.lang.tag()) {
            (head(title, &ctx.ws.name, Some(&ctx.base), &version))
            body {
                header.top {
                    a.brand href={ (ctx.base) "/" } {
                        @if ctx.ws.logo_url.is_some() {
                            img src={ (ctx.base) "/logo" } alt="" width="32" height="32";
                        }
                        span { (ctx.ws.name) }
                    }
                    @if ctx.signed_in {
                        nav aria-label=(w.nav_label) {
                            ul {
                                @for (path, label) in nav {
                                    li { a href={ (ctx.base) (path) } { (label) } }
                                }
                                li {
                                    form method="post" action={ (ctx.base) "/sign-out" } {
                                        (csrf(ctx))
                                        button.link type="submit" { (w.sign_out) }
                                    }
                                }
                            }
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
    html! {
        (DOCTYPE)
        html lang=(lang.tag()) {
            (head(w.error_title, "Portal", f.base, "d"))
            body {
                main {
                    h1 { (w.error_title) }
                    p role="alert" { (message) }
                    @if let Some(base) = f.base {
                        p { a href={ (base) "/" } { (w.back_home) } }
                    }
                }
            }
        }
    }
    .into_string()
}
