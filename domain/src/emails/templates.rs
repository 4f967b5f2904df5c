//! Email templates: subject, html and text with `{{variable}}` placeholders, optional per-locale
//! variants, and the variables a send must provide. Rendering HTML-escapes values in `html` and
//! inserts them as they are in `subject` and `text`.
//!
//! Item: pk = WS#<ws>, sk = ETPL#<slug>.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use shared::auth::WorkspaceId;
use shared::ids::Timestamp;
use shared::store::{self, Record, ws_pk};
use shared::validate::{Errors, Patch};
use shared::{ApiError, ApiResult, App};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub const MAX_SUBJECT_CHARS: usize = 998;
pub const MAX_HTML_BYTES: usize = 256 * 1024;
pub const MAX_TEXT_BYTES: usize = 128 * 1024;
const MAX_VARIANTS: usize = 20;
const MAX_REQUIRED: usize = 50;
/// A template item stays well below DynamoDB's 400 KB item limit.
const MAX_TEMPLATE_BYTES: usize = 350_000;

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Content {
    #[schema(min_length = 1, pattern = "\\S")]
    pub subject: String,
    pub html: Option<String>,
    pub text: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Template {
    /// Unique in the workspace: lowercase letters, digits, `-` and `_`; used as the id.
    pub slug: String,
    /// Always `email_template`.
    pub object: String,
    pub name: String,
    /// The locale of the base content; also the fallback when no variant matches.
    pub locale: String,
    /// The base content: `subject`, `html`, `text` (at least one body).
    #[serde(flatten)]
    pub base: Content,
    /// Content per locale (`de`, `de-AT`, ...). A send's `locale` picks the exact variant, then
    /// its language (`de` for `de-AT`), then the base content.
    #[schema(value_type = Object)]
    pub variants: BTreeMap<String, Content>,
    /// Sends without one of these variables are rejected, naming it.
    pub required_variables: Vec<String>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

pub fn valid_slug(slug: &str) -> bool {
    (1..=64).contains(&slug.len())
        && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && slug.as_bytes()[0].is_ascii_alphanumeric()
}

fn valid_var_name(v: &str) -> bool {
    (1..=64).contains(&v.len())
        && (v.as_bytes()[0].is_ascii_alphabetic() || v.as_bytes()[0] == b'_')
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

// ---------- rendering ----------

/// The placeholders of a template string in order, or the first malformed one.
fn placeholders(src: &str) -> Result<Vec<&str>, String> {
    let mut out = vec![];
    let mut rest = src;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| "has a `{{` without its `}}`".to_string())?;
        let name = after[..end].trim();
        if !valid_var_name(name) {
            return Err(format!("has a malformed placeholder `{{{{{}}}}}`", &after[..end]));
        }
        out.push(name);
        rest = &after[end + 2..];
    }
    Ok(out)
}

/// A variable's value: `a.b` looks up `{"a": {"b": ..}}` when there is no flat key `a.b`.
fn lookup<'v>(vars: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    if let Some(v) = vars.get(name) {
        return Some(v);
    }
    let mut parts = name.split('.');
    let mut cur = vars.get(parts.next()?)?;
    for p in parts {
        cur = cur.as_object()?.get(p)?;
    }
    Some(cur)
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Replace every `{{name}}`; unknown names become empty. Malformed placeholders are refused
/// when a template is saved, so here they stay as written.
pub fn render(src: &str, vars: &Map<String, Value>, html: bool) -> String {
    render_within(src, vars, html, usize::MAX).unwrap_or_default()
}

/// [`render`], stopping as soon as the output passes `limit` bytes (`None`): a small template
/// repeating a large variable must not build megabytes before the size check refuses them.
pub fn render_within(src: &str, vars: &Map<String, Value>, html: bool, limit: usize) -> Option<String> {
    let mut out = String::with_capacity(src.len().min(limit));
    let mut rest = src;
    while let Some(start) = rest.find("{{") {
        if out.len() > limit {
            return None;
        }
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return (out.len() <= limit).then_some(out);
        };
        let name = after[..end].trim();
        if valid_var_name(name) {
            let v = lookup(vars, name).map(value_text).unwrap_or_default();
            out.push_str(&if html { escape_html(&v) } else { v });
        } else {
            out.push_str(&rest[start..start + 2 + end + 2]);
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    (out.len() <= limit).then_some(out)
}

/// The content for a requested locale: the exact variant, its language, or the base content.
pub fn pick<'t>(t: &'t Template, locale: Option<&str>) -> (String, &'t Content) {
    let base = || (t.locale.clone(), None);
    let (used, variant) = match locale {
        Some(l) if t.variants.contains_key(l) => (l.to_string(), t.variants.get(l)),
        Some(l) => {
            let lang = l.split('-').next().unwrap_or(l);
            match t.variants.get(lang) {
                Some(c) => (lang.to_string(), Some(c)),
                None => base(),
            }
        }
        None => base(),
    };
    (used, variant.unwrap_or(&t.base))
}

/// The rendered email of a template, or the validation problems (fields under `variables`).
pub struct Rendered {
    pub locale: String,
    pub subject: String,
    pub html: Option<String>,
    pub text: Option<String>,
}

pub fn render_template(t: &Template, vars: &Map<String, Value>, locale: Option<&str>, errs: &mut Errors) -> Option<Rendered> {
    let missing: Vec<&String> = t.required_variables.iter().filter(|name| lookup(vars, name).is_none_or(|v| v.is_null())).collect();
    for name in &missing {
        errs.add(format!("variables.{name}"), format!("is required by template `{}`", t.slug));
    }
    if !missing.is_empty() {
        return None;
    }
    let (used, c) = pick(t, locale);
    // Each part stops rendering at its limit; the part is named in the error.
    let mut part = |name: &str, src: Option<&str>, html: bool, limit: usize| -> Option<String> {
        let out = render_within(src?, vars, html, limit);
        if out.is_none() {
            errs.add(name, format!("renders larger than {limit} bytes with these variables"));
        }
        out
    };
    let subject = part("subject", Some(&c.subject), false, MAX_SUBJECT_CHARS * 4);
    let html = part("html", c.html.as_deref(), true, MAX_HTML_BYTES);
    let text = part("text", c.text.as_deref(), false, MAX_TEXT_BYTES);
    if (c.html.is_some() && html.is_none()) || (c.text.is_some() && text.is_none()) || subject.is_none() {
        return None;
    }
    let r = Rendered { locale: used, subject: subject.unwrap_or_default(), html, text };
    check_rendered(errs, "variables", &r.subject, r.html.as_deref(), r.text.as_deref());
    Some(r)
}

/// Limits that apply to what is sent, whether written by the caller or rendered.
pub fn check_rendered(errs: &mut Errors, field: &str, subject: &str, html: Option<&str>, text: Option<&str>) {
    check_subject(errs, field, subject);
    check_bodies(errs, field, html, text);
}

pub fn check_subject(errs: &mut Errors, field: &str, subject: &str) {
    if subject.trim().is_empty() {
        errs.add(field, "the subject is empty");
    } else if subject.chars().count() > MAX_SUBJECT_CHARS {
        errs.add(field, format!("the subject is longer than {MAX_SUBJECT_CHARS} characters"));
    } else if subject.chars().any(char::is_control) {
        // A line break in a header is header injection.
        errs.add(field, "the subject must not contain line breaks or control characters");
    }
}

pub fn check_bodies(errs: &mut Errors, field: &str, html: Option<&str>, text: Option<&str>) {
    if html.is_some_and(|h| h.len() > MAX_HTML_BYTES) {
        errs.add(field, format!("the html body is larger than {MAX_HTML_BYTES} bytes"));
    }
    if text.is_some_and(|t| t.len() > MAX_TEXT_BYTES) {
        errs.add(field, format!("the text body is larger than {MAX_TEXT_BYTES} bytes"));
    }
}

// ---------- validation ----------

fn check_content(errs: &mut Errors, prefix: &str, c: &Content) {
    let f = |name: &str| if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") };
    errs.text(&f("subject"), &c.subject, 1, MAX_SUBJECT_CHARS);
    if c.subject.contains(['\r', '\n']) {
        errs.add(f("subject"), "must be one line");
    }
    if c.html.is_none() && c.text.is_none() {
        errs.add(f("html"), "html or text (or both) is required");
    }
    for (name, v) in [("subject", Some(&c.subject)), ("html", c.html.as_ref()), ("text", c.text.as_ref())] {
        if let Some(v) = v
            && let Err(e) = placeholders(v)
        {
            errs.add(f(name), e);
        }
    }
    if c.html.as_ref().is_some_and(|h| h.len() > MAX_HTML_BYTES) {
        errs.add(f("html"), format!("must be at most {MAX_HTML_BYTES} bytes"));
    }
    if c.text.as_ref().is_some_and(|t| t.len() > MAX_TEXT_BYTES) {
        errs.add(f("text"), format!("must be at most {MAX_TEXT_BYTES} bytes"));
    }
}

pub fn check(errs: &mut Errors, t: &Template) {
    if !valid_slug(&t.slug) {
        errs.add("slug", "must be 1 to 64 lowercase letters, digits, `-` or `_`, starting with a letter or digit");
    }
    errs.text("name", &t.name, 1, 200);
    if !shared::validate::is_locale(&t.locale) {
        errs.add("locale", "must be a language tag such as en or de-AT");
    }
    check_content(errs, "", &t.base);
    if t.variants.len() > MAX_VARIANTS {
        errs.add("variants", format!("at most {MAX_VARIANTS} locales"));
    }
    for (l, c) in &t.variants {
        if !shared::validate::is_locale(l) {
            errs.add(format!("variants.{l}"), "the key must be a language tag such as de or de-AT");
        }
        check_content(errs, &format!("variants.{l}"), c);
    }
    if t.required_variables.len() > MAX_REQUIRED {
        errs.add("required_variables", format!("at most {MAX_REQUIRED}"));
    }
    for v in &t.required_variables {
        if !valid_var_name(v) {
            errs.add("required_variables", format!("`{v}` is not a variable name (letters, digits, _ . -)"));
        }
    }
    errs.metadata("metadata", &t.metadata);
    if serde_json::to_vec(t).map(|b| b.len()).unwrap_or(0) > MAX_TEMPLATE_BYTES {
        errs.add("body", format!("the template is larger than {MAX_TEMPLATE_BYTES} bytes in all"));
    }
}

pub async fn load(app: &App, ws: &WorkspaceId, slug: &str) -> ApiResult<(Template, i64)> {
    if !valid_slug(slug) {
        return Err(ApiError::not_found("email template"));
    }
    app.db.get_object(ws, &crate::keys::EMAIL_TEMPLATE.sk(slug)).await?.ok_or_else(|| ApiError::not_found("email template"))
}

/// Templates by slug (for a batch of sends); missing ones are absent from the map.
pub async fn load_many(app: &App, ws: &WorkspaceId, slugs: &[&str]) -> ApiResult<BTreeMap<String, Template>> {
    let mut keys: Vec<(String, String)> =
        slugs.iter().filter(|s| valid_slug(s)).map(|s| (ws_pk(ws), crate::keys::EMAIL_TEMPLATE.sk(s))).collect();
    keys.sort();
    keys.dedup();
    let items = app.db.batch_get(&keys).await?;
    items.into_iter().map(|i| store::from_item::<Template>(i).map(|t| (t.slug.clone(), t))).collect()
}

pub fn record(ws: &WorkspaceId, t: &Template) -> ApiResult<Record> {
    Record::new(ws_pk(ws), crate::keys::EMAIL_TEMPLATE.sk(&t.slug), t)
}

// ---------- operations ----------

/// A new template; its slug is its id.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTemplate {
    /// 1 to 64 lowercase letters, digits, `-` and `_`, starting with a letter or digit.
    #[schema(pattern = "^[a-z0-9][a-z0-9_-]{0,63}$")]
    pub slug: String,
    /// Default: the slug.
    #[serde(default)]
    pub name: Option<String>,
    /// Default `en`.
    #[serde(default)]
    pub locale: Option<String>,
    #[schema(min_length = 1)]
    pub subject: String,
    #[serde(default)]
    pub html: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub variants: BTreeMap<String, Content>,
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")]
    pub required_variables: Vec<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// Validate and write a new template (409 when the slug is taken).
pub async fn create(app: &App, ws: &WorkspaceId, input: CreateTemplate) -> ApiResult<Template> {
    let now = shared::ids::Timestamp::now();
    let t = Template {
        name: input.name.unwrap_or_else(|| input.slug.clone()),
        slug: input.slug,
        object: "email_template".into(),
        locale: input.locale.unwrap_or_else(|| "en".into()),
        base: Content { subject: input.subject, html: input.html, text: input.text },
        variants: input.variants,
        required_variables: input.required_variables,
        metadata: input.metadata,
        created_at: now,
        updated_at: now,
    };
    let mut errs = Errors::new();
    check(&mut errs, &t);
    errs.finish()?;
    // Versions start at the creation time in ms, not 1: a slug deleted and created again never
    // repeats a version, so an approval bound to a template cannot be met by its replacement.
    shared::outbox::Tx::new()
        .create(record(ws, &t)?.version(shared::ids::now_ms()))
        .commit(app)
        .await
        .map_err(|e| e.on_condition(|_| ApiError::conflict(format!("a template with slug `{}` exists", t.slug))))?;
    Ok(t)
}

/// A change to a template; null removes an optional field.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateTemplate {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200, pattern = "\\S")]
    pub name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = String)]
    pub locale: Patch<String>,
    #[serde(default)]
    #[schema(value_type = String, min_length = 1)]
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
    #[schema(value_type = Option<Vec<String>>, pattern = "^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")]
    pub required_variables: Patch<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
}

/// Apply a change to a loaded template; emails already accepted keep what they were rendered with.
pub async fn update(app: &App, ws: &WorkspaceId, old: Template, version: i64, input: UpdateTemplate) -> ApiResult<Template> {
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
        return Ok(t);
    }
    t.updated_at = shared::ids::Timestamp::now();
    shared::outbox::Tx::new().replace(record(ws, &t)?, version).commit(app).await.map_err(store::TxError::stale)?;
    Ok(t)
}

/// Delete a template (emails already accepted are not affected).
pub async fn delete(app: &App, ws: &WorkspaceId, t: &Template, version: i64) -> ApiResult<()> {
    shared::outbox::Tx::new()
        .delete_versioned(ws_pk(ws), crate::keys::EMAIL_TEMPLATE.sk(&t.slug), version)
        .commit(app)
        .await
        .map_err(store::TxError::stale)
}

/// One page of the templates, in creation order.
pub async fn list(app: &App, ws: &WorkspaceId, after: Option<String>, limit: usize) -> ApiResult<(Vec<Template>, Option<String>)> {
    shared::request::page(app, crate::keys::EMAIL_TEMPLATES.query(ws, after, limit)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tpl() -> Template {
        Template {
            slug: "welcome".into(),
            object: "email_template".into(),
            name: "Welcome".into(),
            locale: "en".into(),
            base: Content {
                subject: "Hi {{ name }}".into(),
                html: Some("<p>{{name}} &amp; {{user.plan}}</p>".into()),
                text: Some("{{name}}".into()),
            },
            variants: BTreeMap::from([("de".into(), Content { subject: "Hallo {{name}}".into(), html: None, text: Some("Hallo".into()) })]),
            required_variables: vec!["name".into()],
            metadata: BTreeMap::new(),
            created_at: shared::ids::Timestamp::now(),
            updated_at: shared::ids::Timestamp::now(),
        }
    }

    #[test]
    fn escapes_html_only_and_looks_up_nested_names() {
        let vars = json!({"name": "<Ann & \"Bob\">", "user": {"plan": 3}}).as_object().unwrap().clone();
        let mut errs = Errors::new();
        let r = render_template(&tpl(), &vars, None, &mut errs).unwrap();
        assert!(errs.is_empty());
        assert_eq!(r.subject, "Hi <Ann & \"Bob\">");
        assert_eq!(r.html.unwrap(), "<p>&lt;Ann &amp; &quot;Bob&quot;&gt; &amp; 3</p>");
        assert_eq!(r.text.unwrap(), "<Ann & \"Bob\">");
    }

    #[test]
    fn missing_required_variable_is_named_and_locales_fall_back() {
        let mut errs = Errors::new();
        assert!(render_template(&tpl(), &Map::new(), None, &mut errs).is_none());
        let e = errs.finish().unwrap_err();
        assert_eq!(e.details[0].field.as_deref(), Some("variables.name"));
        let t = tpl();
        assert_eq!(pick(&t, Some("de-AT")).0, "de");
        assert_eq!(pick(&t, Some("de")).1.subject, "Hallo {{name}}");
        assert_eq!(pick(&t, Some("fr")).0, "en");
        assert_eq!(pick(&t, None).0, "en");
    }

    #[test]
    fn malformed_placeholders_are_refused() {
        assert!(placeholders("a {{ b").is_err());
        assert!(placeholders("a {{ b c }}").is_err());
        assert_eq!(placeholders("{{a}} {{ b.c }}").unwrap(), vec!["a", "b.c"]);
        assert_eq!(render("x {{ }} y", &Map::new(), false), "x {{ }} y");
        // 50,000 copies of a 64 KB value would be 3.2 GB: stopped just past the limit.
        let big = Map::from_iter([("a".to_string(), Value::String("x".repeat(64 * 1024)))]);
        let src = "{{a}}".repeat(50_000);
        let started = std::time::Instant::now();
        assert_eq!(render_within(&src, &big, false, MAX_HTML_BYTES), None);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(render_within("{{a}}", &big, false, MAX_HTML_BYTES).map(|s| s.len()), Some(64 * 1024));
    }
}
