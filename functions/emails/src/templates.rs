//! Email template routes; the model and rendering are `domain::emails::templates`.

use domain::emails::templates::{Content, Template, check, load, record};
use serde::Deserialize;

use shared::outbox::Tx;
use shared::store::{TxError, ws_pk};
use shared::validate::{Errors, Patch};
use shared::{ApiError, ApiResult, App, Reply, Req};
use std::collections::BTreeMap;
use utoipa::ToSchema;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTemplate {
    pub slug: String,
    /// Default: the slug.
    #[serde(default)]
    pub name: Option<String>,
    /// Default `en`.
    #[serde(default)]
    pub locale: Option<String>,
    pub subject: String,
    #[serde(default)]
    pub html: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub variants: BTreeMap<String, Content>,
    #[serde(default)]
    pub required_variables: Vec<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// Create a template; its slug is its id (409 if taken).
#[utoipa::path(post, path = "/emails/templates", tag = "emails", request_body = CreateTemplate,
    responses((status = 201, body = shared::openapi::Data<Template>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn create_template(app: &App, req: Req) -> ApiResult<Reply> {
    let input: CreateTemplate = req.json()?;
    let now = shared::ids::now_rfc3339();
    let t = Template {
        name: input.name.unwrap_or_else(|| input.slug.clone()),
        slug: input.slug,
        object: "email_template".into(),
        locale: input.locale.unwrap_or_else(|| "en".into()),
        base: Content { subject: input.subject, html: input.html, text: input.text },
        variants: input.variants,
        required_variables: input.required_variables,
        metadata: input.metadata,
        created_at: now.clone(),
        updated_at: now,
    };
    let mut errs = Errors::new();
    check(&mut errs, &t);
    errs.finish()?;
    let ws = req.ws();
    // Versions start at the creation time in ms, not 1: a slug deleted and created again never
    // repeats a version, so an approval bound to a template cannot be met by its replacement.
    Tx::new()
        .create(record(ws, &t)?.version(shared::ids::now_ms()))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::conflict(format!("a template with slug `{}` exists", t.slug))))?;
    Ok(Reply::created(&t))
}

/// One email template by its slug.
#[utoipa::path(get, path = "/emails/templates/{slug}", tag = "emails", params(("slug" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Template>), shared::openapi::CommonErrors))]
pub async fn get_template(app: &App, req: Req) -> ApiResult<Reply> {
    Ok(Reply::ok(&load(app, req.ws(), req.param("slug")).await?.0))
}

/// Templates by slug.
#[utoipa::path(get, path = "/emails/templates", tag = "emails",
    params(shared::openapi::PageParams),
    responses((status = 200, body = shared::openapi::ListOf<Template>), shared::openapi::CommonErrors))]
pub async fn list_templates(app: &App, req: Req) -> ApiResult<Reply> {
    let page = req.page(app, "email_templates", &[]).await?;
    let spec = domain::keys::EMAIL_TEMPLATES.query(&[req.ws()], &[], page.after.clone(), page.limit);
    shared::request::list_page::<Template>(app, &page, spec).await
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateTemplate {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub locale: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub subject: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub html: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub text: Patch<String>,
    /// Replaces all variants; null removes them.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub variants: Patch<BTreeMap<String, Content>>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub required_variables: Patch<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
}

/// Change a template. Emails already accepted keep the content they were rendered with.
#[utoipa::path(patch, path = "/emails/templates/{slug}", tag = "emails", request_body = UpdateTemplate, params(("slug" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<Template>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn update_template(app: &App, req: Req) -> ApiResult<Reply> {
    let input: UpdateTemplate = req.json()?;
    let ws = req.ws();
    let (old, version) = load(app, ws, req.param("slug")).await?;
    let mut t = old.clone();
    let mut errs = Errors::new();
    for (field, patch, target) in
        [("name", input.name, &mut t.name), ("locale", input.locale, &mut t.locale), ("subject", input.subject, &mut t.base.subject)]
    {
        if let Some(v) = patch.required(&mut errs, field) {
            *target = v;
        }
    }
    input.html.apply_to(&mut t.base.html);
    input.text.apply_to(&mut t.base.text);
    if let Some(v) = input.variants.or_empty() {
        t.variants = v;
    }
    if let Some(v) = input.required_variables.or_empty() {
        t.required_variables = v;
    }
    errs.patch_metadata("metadata", input.metadata, &mut t.metadata);
    check(&mut errs, &t);
    errs.finish()?;
    if t == old {
        return Ok(Reply::ok(&t));
    }
    t.updated_at = shared::ids::now_rfc3339();
    Tx::new().replace(record(ws, &t)?, version).commit(app).await.map_err(TxError::stale)?;
    Ok(Reply::ok(&t))
}

/// Delete a template. Emails already accepted are not affected (they were rendered on accept).
#[utoipa::path(delete, path = "/emails/templates/{slug}", tag = "emails", params(("slug" = String, Path)),
    responses((status = 200, body = shared::openapi::Data<shared::openapi::Deleted>), shared::openapi::CommonErrors, shared::openapi::WriteErrors))]
pub async fn delete_template(app: &App, req: Req) -> ApiResult<Reply> {
    let ws = req.ws();
    let (t, version) = load(app, ws, req.param("slug")).await?;
    Tx::new()
        .delete_versioned(ws_pk(ws), domain::keys::EMAIL_TEMPLATE.sk(&[&t.slug]), version)
        .commit(app)
        .await
        .map_err(TxError::stale)?;
    Ok(Reply::deleted(&t.slug, "email_template"))
}
