//! The customer portal's credentials: a one-time login link (`psl_` + 43 base62 characters,
//! 256 bits, valid 15 minutes) exchanged once for a session (`pss_...`, `X-Portal-Session`,
//! sliding 1 hour up to 8 hours, revocable). Both are stored only as SHA-256 hashes in look-up
//! items (`PORTALLINK#<hash>`, `PORTALSESSION#<hash>`); GSI1 lists a contact's links and
//! sessions so that an erasure finds them.

use crate::contacts::{self, Contact, ContactId};
use crate::gdpr::{Erase, Find, Rule};
use crate::keys;
use serde::Serialize;
use shared::auth::{PORTAL_SESSION_IDLE_SECS, PORTAL_SESSION_MAX_SECS, PORTAL_SESSION_PREFIX, hash_api_key, random_base62};
use shared::events::Event;
use shared::ids::PrefixedId;
use shared::outbox::Tx;
use shared::store::{self, Item, n, s};
use shared::{ApiError, ApiResult, App};
use utoipa::ToSchema;

pub const LINK_PREFIX: &str = "psl_";
pub const LINK_SECS: i64 = 15 * 60;

pub const PRIVACY: &[Rule] = &[
    Rule {
        kind: keys::PORTAL_LINK,
        area: "portal",
        find: Find::ContactIndex(keys::PORTAL_LINKS_OF_CONTACT),
        export: false,
        erase: Erase::Delete,
    },
    Rule {
        kind: keys::PORTAL_SESSION,
        area: "portal",
        find: Find::ContactIndex(keys::PORTAL_SESSIONS_OF_CONTACT),
        export: true,
        erase: Erase::Delete,
    },
];

#[derive(Serialize, ToSchema)]
pub struct PortalLink {
    /// Always `portal_link`.
    pub object: String,
    /// The one-time login token: shown once, valid 15 minutes, exchanged once.
    pub token: String,
    /// `return_url` with `#portal_token=<token>` (in the fragment, so no server logs it).
    pub url: Option<String>,
    pub contact_id: String,
    pub expires_at: String,
}

#[derive(Serialize, ToSchema)]
pub struct PortalSession {
    /// Always `portal_session`.
    pub object: String,
    /// Send as `X-Portal-Session`; valid 1 hour from its last use, 8 hours at most.
    pub session_token: String,
    pub expires_at: String,
    pub contact: Contact,
}

fn time(secs: i64) -> String {
    shared::ids::format_time(chrono::DateTime::from_timestamp(secs, 0).unwrap_or_default())
}

/// Is `url` https on one of the workspace's portal origins (`scheme://host[:port]`)?
pub fn allowed_return(url: &str, origins: &[String]) -> bool {
    let Ok(u) = url::Url::parse(url) else { return false };
    u.scheme() == "https" && u.username().is_empty() && origins.iter().any(|o| u.origin().ascii_serialization() == o.trim_end_matches('/'))
}

/// A one-time login link for a contact of the workspace.
pub async fn create_link(app: &App, ws: &str, contact_id: &ContactId, return_url: Option<String>) -> ApiResult<PortalLink> {
    if let Some(u) = &return_url {
        let (w, _) = crate::workspaces::load(app, ws).await?;
        if !allowed_return(u, &w.portal_origins) {
            return Err(ApiError::validation("return_url", "must be an https URL on one of the workspace's portal_origins"));
        }
    }
    contacts::load(app, ws, contact_id).await?;
    let token = format!("{LINK_PREFIX}{}", random_base62(43));
    let now = chrono::Utc::now().timestamp();
    let link_id = shared::ids::new_id("plink");
    let item = Item::from([
        ("pk".into(), s(keys::PORTAL_LINK.pk(&[&hash_api_key(&token)]))),
        ("sk".into(), s(keys::PORTAL_LINK.table.sk)),
        ("gsi1pk".into(), s(keys::PORTAL_LINK.gsi1_pk(&[ws, contact_id]))),
        ("gsi1sk".into(), s(keys::PORTAL_LINK.gsi1_sk(&[&link_id]))),
        ("workspace_id".into(), s(ws)),
        ("contact_id".into(), s(contact_id.to_string())),
        ("expires_at".into(), n(now + LINK_SECS)),
    ]);
    Tx::new().put_if(item, "attribute_not_exists(pk)", vec![]).commit(app).await.map_err(store::TxError::stale)?;
    let url = return_url.map(|u| format!("{}#portal_token={token}", u.split('#').next().unwrap_or_default()));
    Ok(PortalLink { object: "portal_link".into(), token, url, contact_id: contact_id.to_string(), expires_at: time(now + LINK_SECS) })
}

/// Exchange a link token for a session: the link is deleted on the way (a conditional delete
/// that returns it), so two racing exchanges get one session. Used, expired and unknown tokens
/// get the same answer.
pub async fn exchange(app: &App, token: &str) -> ApiResult<PortalSession> {
    let no = || ApiError::unauthorized("the login link is invalid, expired or already used");
    let shaped = token.strip_prefix(LINK_PREFIX).is_some_and(|t| t.len() == 43 && t.bytes().all(|b| b.is_ascii_alphanumeric()));
    if !shaped {
        return Err(no());
    }
    let now = chrono::Utc::now().timestamp();
    let res = app
        .db
        .client
        .delete_item()
        .table_name(&app.db.table)
        .key("pk", s(keys::PORTAL_LINK.pk(&[&hash_api_key(token)])))
        .key("sk", s(keys::PORTAL_LINK.table.sk))
        .condition_expression("attribute_exists(pk) AND expires_at > :now")
        .expression_attribute_values(":now", n(now))
        .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
        .send()
        .await;
    let old = match res {
        Ok(o) => o.attributes.unwrap_or_default(),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception()) => return Err(no()),
        Err(e) => return Err(store::ddb_error(e)),
    };
    let (Some(ws), Some(ct)) = (store::get_str(&old, "workspace_id"), store::get_str(&old, "contact_id").and_then(ContactId::parse)) else {
        return Err(no());
    };
    // The contact may have been erased since the link was made.
    let contact = contacts::load(app, ws, &ct).await.map_err(|_| no())?.0;
    let session = format!("{PORTAL_SESSION_PREFIX}{}", random_base62(43));
    let session_id = shared::ids::new_id("psess");
    let expires = now + PORTAL_SESSION_IDLE_SECS;
    let item = Item::from([
        ("pk".into(), s(shared::auth::portal_session_pk(&session))),
        ("sk".into(), s(keys::PORTAL_SESSION.table.sk)),
        ("gsi1pk".into(), s(keys::PORTAL_SESSION.gsi1_pk(&[ws, &ct]))),
        ("gsi1sk".into(), s(keys::PORTAL_SESSION.gsi1_sk(&[&session_id]))),
        ("workspace_id".into(), s(ws)),
        ("contact_id".into(), s(ct.to_string())),
        ("session_id".into(), s(&session_id)),
        ("created_at".into(), s(shared::ids::now_rfc3339())),
        ("expires_at".into(), n(expires)),
        ("hard_expires_at".into(), n(now + PORTAL_SESSION_MAX_SECS)),
    ]);
    let ev = Event::new(
        ws,
        "portal.session.created",
        &serde_json::json!({"id": session_id, "object": "portal_session", "contact_id": ct.to_string(), "expires_at": time(expires)}),
    );
    Tx::new().put_if(item, "attribute_not_exists(pk)", vec![]).event(ev).commit(app).await.map_err(store::TxError::stale)?;
    Ok(PortalSession { object: "portal_session".into(), session_token: session, expires_at: time(expires), contact })
}

/// End a session (logout, or the customer's own erasure): its look-up item goes.
pub async fn revoke(app: &App, session_token: &str) -> ApiResult<()> {
    app.db.delete(&shared::auth::portal_session_pk(session_token), keys::PORTAL_SESSION.table.sk).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_urls_must_be_https_on_an_allowed_origin() {
        let o = vec!["https://shop.example.com".to_string(), "https://app.example.org:8443/".to_string()];
        assert!(allowed_return("https://shop.example.com/account?x=1", &o));
        assert!(allowed_return("https://app.example.org:8443/p", &o));
        assert!(!allowed_return("http://shop.example.com/", &o));
        assert!(!allowed_return("https://shop.example.com.evil.org/", &o));
        assert!(!allowed_return("https://user@shop.example.com/", &o));
        assert!(!allowed_return("https://app.example.org/p", &o), "another port is another origin");
        assert!(!allowed_return("javascript:alert(1)", &o));
    }
}
