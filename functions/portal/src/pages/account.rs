//! The customer's profile: name, phone, their marketing choice (each change a consent entry
//! with source `portal` and the words shown), and the time zone their times are shown in.

use super::layout::{Notice, csrf};
use super::{Ctx, TZ_COOKIE, customer};

use domain::portal::{self, Me, UpdateMe};
use maud::html;
use shared::validate::Patch;
use shared::web::{View, Visit};
use shared::{ApiResult, App};

fn marketing_text(ctx: &Ctx) -> String {
    ctx.w.marketing_text.replace("{}", &ctx.ws.name)
}

fn render(ctx: &Ctx, me: &Me, notice: Option<Notice>) -> View {
    let w = ctx.w;
    let c = &me.contact;
    ctx.page(
        w.account_title,
        notice,
        html! {
            form method="post" action={ (ctx.base) "/account" } {
                (csrf(ctx))
                p { span.label { (w.email_address) } br; strong { (c.email) } }
                label for="first_name" { (w.first_name) }
                input #first_name type="text" name="first_name" autocomplete="given-name" maxlength="200" value=(c.first_name.clone().unwrap_or_default());
                label for="last_name" { (w.last_name) }
                input #last_name type="text" name="last_name" autocomplete="family-name" maxlength="200" value=(c.last_name.clone().unwrap_or_default());
                label for="phone" { (w.phone) }
                input #phone type="tel" name="phone" autocomplete="tel" aria-describedby="phone_hint" value=(c.phone.clone().unwrap_or_default());
                p.hint #phone_hint { (w.phone_hint) }
                fieldset {
                    legend { (w.marketing_legend) }
                    input #marketing type="checkbox" name="marketing" value="yes" checked[me.marketing_consent == Some(true)];
                    label.inline for="marketing" { (marketing_text(ctx)) }
                }
                label for="timezone" { (w.timezone) }
                input #timezone type="text" name="timezone" autocomplete="off" aria-describedby="tz_hint" maxlength="64" value=(ctx.zone_name);
                p.hint #tz_hint { (w.timezone_hint) }
                button type="submit" { (w.save) }
            }
        },
    )
}

pub async fn show(app: &App, v: Visit) -> ApiResult<View> {
    let ctx = Ctx::of(app, &v).await?;
    let (c, _) = customer(app, &v).await?;
    let me = portal::me(app, &v.ws, c).await?;
    let notice = (v.query("m") == Some("saved")).then(|| Notice::Done(ctx.w.saved.into()));
    Ok(render(&ctx, &me, notice))
}

fn patch(value: Option<&str>) -> Patch<String> {
    match value.map(str::trim) {
        None => Patch::Absent,
        Some("") => Patch::Null,
        Some(v) => Patch::Value(v.to_string()),
    }
}

pub async fn save(app: &App, v: Visit) -> ApiResult<View> {
    let ctx = Ctx::of(app, &v).await?;
    let current = customer(app, &v).await?;
    let zone = v.field("timezone").map(str::trim).filter(|z| !z.is_empty());
    if let Some(z) = zone
        && shared::zone::Zone::named(z).is_none()
    {
        let me = portal::me(app, &v.ws, current.0).await?;
        return Ok(render(&ctx, &me, Some(Notice::Problem(ctx.w.timezone_unknown.into()))).status(http::StatusCode::BAD_REQUEST));
    }
    let before = portal::me(app, &v.ws, current.0.clone()).await?.marketing_consent;
    let wants = v.field("marketing") == Some("yes");
    // A consent entry only when the choice changes; unticked without a choice on record
    // records nothing.
    let choice = match before {
        Some(b) if b == wants => None,
        None if !wants => None,
        _ => Some(wants),
    };
    let input = UpdateMe {
        first_name: patch(v.field("first_name")),
        last_name: patch(v.field("last_name")),
        phone: patch(v.field("phone")),
        marketing_consent: choice,
        consent_text: choice.map(|_| marketing_text(&ctx)),
        consent_text_version: choice.map(|_| format!("portal-page-1-{}", ctx.lang.tag())),
    };
    match portal::update_me(app, &v.ws, current.clone(), v.session_token(), v.header("user-agent"), input).await {
        Ok(_) => {
            let mut view = View::redirect(format!("{}/account?m=saved", v.base));
            if let Some(z) = zone {
                view = view.cookie(v.set_cookie(TZ_COOKIE, z, 400 * 86_400));
            }
            Ok(view)
        }
        Err(e) if e.status() == http::StatusCode::BAD_REQUEST => {
            let me = portal::me(app, &v.ws, current.0).await?;
            let detail = e
                .details
                .iter()
                .map(|d| {
                    let label = match d.field.as_deref().unwrap_or_default() {
                        "first_name" => ctx.w.first_name,
                        "last_name" => ctx.w.last_name,
                        "phone" => ctx.w.phone,
                        other => other,
                    };
                    format!("{label}: {}", d.message)
                })
                .collect::<Vec<_>>()
                .join("; ");
            let message = if detail.is_empty() { e.message } else { detail };
            Ok(render(&ctx, &me, Some(Notice::Problem(message))).status(http::StatusCode::BAD_REQUEST))
        }
        Err(e) => Err(e),
    }
}
