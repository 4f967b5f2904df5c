//! One approval request as a person reads it: what will happen (every email as its recipients
//! will get it), the request, what it depends on, and the decision, if their role allows one.

use super::Ctx;
use super::layout::{Notice, csrf};
use domain::approvals::{ApprovalRequest, ApprovalRequestId, ApprovalState, DenyApproval, EmailPreview};
use maud::{Markup, PreEscaped, html};
use shared::error::ErrorCode;
use shared::web::{View, Visit};
use shared::{ApiError, ApiResult, App};

fn id_of(v: &Visit) -> ApiResult<ApprovalRequestId> {
    ApprovalRequestId::parse(v.param("id")).ok_or_else(|| ApiError::not_found("approval request"))
}

fn state_word(w: &super::words::Words, s: ApprovalState) -> &'static str {
    w.states[match s {
        ApprovalState::Pending => 0,
        ApprovalState::Approved => 1,
        ApprovalState::Denied => 2,
        ApprovalState::Expired => 3,
        ApprovalState::Stale => 4,
    }]
}

fn email(w: &super::words::Words, e: &EmailPreview) -> Markup {
    let list = |l: &[String]| l.join(", ");
    html! {
        div.email {
            dl.facts {
                dt { (w.from) } dd { (e.from) }
                dt { (w.to) } dd { (list(&e.to)) }
                @if !e.cc.is_empty() { dt { (w.cc) } dd { (list(&e.cc)) } }
                @if !e.bcc.is_empty() { dt { (w.bcc) } dd { (list(&e.bcc)) } }
                @if !e.reply_to.is_empty() { dt { (w.reply_to) } dd { (list(&e.reply_to)) } }
                dt { (w.subject) } dd { (e.subject) }
            }
            @if let Some(h) = &e.html {
                h3 { (w.as_html) }
                (html_body(w, h))
            }
            @if let Some(t) = &e.text {
                h3 { (w.as_text) }
                pre { (t) }
            }
        }
    }
}

/// A cleaned HTML body, with what cleaning removed and where every link goes.
fn html_body(w: &super::words::Words, h: &str) -> Markup {
    let inv = shared::html::inventory(h);
    html! {
        p.hint { (w.agent_wrote) }
        // Cleaned by ammonia's allowlist (shared::html), images left out: no script, style,
        // frame, form or image is left, links open without a referrer.
        div.email-html { (PreEscaped(shared::html::sanitise_preview(h))) }
        @if inv.remote_images + inv.inline_images + inv.scripts + inv.forms + inv.embedded + inv.styles > 0 {
            div.removed {
                h3 { (w.removed_title) }
                ul {
                    @if inv.remote_images > 0 {
                        li { (w.removed_images) ": " (inv.remote_images) " (" (inv.remote_image_hosts.join(", ")) ")" }
                    }
                    @if inv.inline_images > 0 { li { (w.removed_inline) ": " (inv.inline_images) } }
                    @if inv.scripts > 0 { li { (w.removed_scripts) ": " (inv.scripts) } }
                    @if inv.forms > 0 { li { (w.removed_forms) ": " (inv.forms) } }
                    @if inv.embedded > 0 { li { (w.removed_embedded) ": " (inv.embedded) } }
                    @if inv.styles > 0 { li { (w.removed_styles) ": " (inv.styles) } }
                }
            }
        }
        @if !inv.links.is_empty() {
            div.links {
                h3 { (w.links_title) }
                ul { @for (text, href) in &inv.links { li { (text) " \u{2192} " code { (href) } } } }
            }
        }
        details { summary { (w.source) } pre { (h) } }
    }
}

/// An effect's value, whole: every field of every object, by name, so nothing the effect will
/// do can exist without being on the page. An `html` field is shown cleaned, with its
/// inventory and source.
fn value(w: &super::words::Words, v: &serde_json::Value) -> Markup {
    use serde_json::Value;
    html! {
        @match v {
            Value::Object(m) if m.is_empty() => em { (w.none) },
            Value::Object(m) => dl.value {
                @for (k, x) in m {
                    dt { code { (k) } }
                    dd {
                        @match (k.as_str(), x) {
                            ("html", Value::String(h)) => (html_body(w, h)),
                            ("text" | "calendar", Value::String(t)) => pre { (t) },
                            _ => (value(w, x)),
                        }
                    }
                }
            },
            Value::Array(l) if l.is_empty() => em { (w.none) },
            Value::Array(l) => ol.value { @for x in l { li { (value(w, x)) } } },
            Value::Null => em { (w.none) },
            Value::String(s) => span { (s) },
            other => span { (other.to_string()) },
        }
    }
}

fn body(ctx: &Ctx, r: &ApprovalRequest, may: Result<(), ApiError>) -> Markup {
    let w = ctx.w;
    let id = r.id.as_str();
    html! {
        p.summary { (r.preview.summary) }
        dl.facts {
            dt { (w.state) } dd { (state_word(w, r.state)) }
            dt { (w.asked_by) } dd { (r.api_key_id.as_str()) }
            dt { (w.expires) } dd { (r.expires_at.to_string()) }
            @if let Some(by) = &r.decided_by { dt { (w.decided_by) } dd { (by) } }
            @if let Some(why) = &r.reason { dt { (w.reason) } dd { (why) } }
            @if !r.changed.is_empty() {
                dt { (w.changed) }
                dd { @for c in &r.changed { (c.object) " " (c.id) " " } }
            }
        }
        h2 { (w.what_happens) }
        p { (r.effect) ": " code { (r.method) " " (r.path) } }
        @if let Some(v) = &r.effect_value {
            h2 { (w.value_title) }
            p.hint { (w.value_intro) " " code.digest { (v.digest) } }
            @if !r.changed_fields.is_empty() {
                p.notice.problem { (w.changed) ": " @for f in &r.changed_fields { code { (f) } " " } }
            }
            div.effect-value { (value(w, &v.value)) }
        } @else if !r.preview.emails.is_empty() {
            h2 { (w.emails_title) }
            @for e in &r.preview.emails { (email(w, e)) }
        }
        @if !r.preview.problems.is_empty() {
            h2 { (w.problems) }
            ul { @for p in &r.preview.problems { li { (p) } } }
        }
        @if let Some(request) = &r.preview.request {
            h2 { (w.request_title) }
            pre { (serde_json::to_string_pretty(request).unwrap_or_default()) }
        }
        @if !r.bound.is_empty() {
            h2 { (w.bound_title) }
            p.hint { (w.bound_intro) }
            table {
                thead { tr { th scope="col" { (w.object) } th scope="col" { "Id" } th scope="col" { (w.seen_as) } } }
                tbody {
                    @for b in &r.bound {
                        tr { td { (b.object) } td { code { (b.id) } } td { (b.preview) } }
                    }
                }
            }
        }
        // The decision comes after everything it decides on.
        @if r.state == ApprovalState::Pending {
            @match &may {
                Ok(()) => div.decide {
                    form method="post" action={ (ctx.base) "/requests/" (id) "/approve" } {
                        (csrf(ctx))
                        button type="submit" { (w.approve) }
                    }
                    form method="post" action={ (ctx.base) "/requests/" (id) "/deny" } {
                        (csrf(ctx))
                        label for="reason" { (w.deny_reason) }
                        textarea #reason name="reason" required maxlength="500" {}
                        button.danger type="submit" { (w.deny) }
                    }
                },
                Err(e) => p.notice.problem role="alert" { (w.cannot_approve) " " (e.message) },
            }
        }
        p { a href={ (ctx.base) "/" } { (w.back) } }
    }
}

/// The request's page; signed out, the way in and back here.
pub async fn show(app: &App, v: Visit) -> ApiResult<View> {
    let id = id_of(&v)?;
    let Some(person) = &v.person else {
        return Ok(View::redirect(format!("{}/sign-in?next=/requests/{}", v.base, id.as_str())));
    };
    super::may_read(person)?;
    let r = domain::approvals::load(app, &v.ws, &id).await?;
    let ctx = Ctx::of(app, &v).await?;
    let w = ctx.w;
    let notice = match v.query("done") {
        Some("approved") => Some(Notice::Done(w.done_approved.into())),
        Some("denied") => Some(Notice::Done(w.done_denied.into())),
        Some("stale") => Some(Notice::Problem(w.done_stale.into())),
        Some("decided") => Some(Notice::Problem(w.done_decided.into())),
        _ => None,
    };
    let may = domain::capabilities::may_approve(person, &r.capability, app.cfg.oauth.as_ref(), shared::ids::now_ms() / 1000);
    let title = format!("{}: {}", w.request_title, r.effect);
    Ok(ctx.page(&title, notice, body(&ctx, &r, may)))
}

pub async fn approve(app: &App, v: Visit) -> ApiResult<View> {
    let id = id_of(&v)?;
    let person = v.person.as_ref().ok_or_else(|| ApiError::unauthorized("sign in first"))?;
    let done = match domain::approvals::approve(app, &v.ws, person, &id).await {
        Ok(_) => "approved",
        Err(e) if e.code == ErrorCode::Conflict && e.details.first().is_some_and(|d| d.message == "stale") => "stale",
        Err(e) if e.code == ErrorCode::Conflict => "decided",
        Err(e) => return Err(e),
    };
    Ok(View::redirect(format!("{}/requests/{}?done={done}", v.base, id.as_str())))
}

pub async fn deny(app: &App, v: Visit) -> ApiResult<View> {
    let id = id_of(&v)?;
    let person = v.person.as_ref().ok_or_else(|| ApiError::unauthorized("sign in first"))?;
    let reason = v.field("reason").unwrap_or_default().to_string();
    let done = match domain::approvals::deny(app, &v.ws, person, &id, DenyApproval { reason }).await {
        Ok(_) => "denied",
        Err(e) if e.code == ErrorCode::Conflict => "decided",
        Err(e) => return Err(e),
    };
    Ok(View::redirect(format!("{}/requests/{}?done={done}", v.base, id.as_str())))
}
