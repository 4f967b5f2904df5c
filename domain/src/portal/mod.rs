//! The customer portal's credentials: a one-time login link (`psl_` + 43 base62 characters,
//! 256 bits, valid 15 minutes) exchanged once for a session (`pss_...`, `X-Portal-Session`,
//! sliding 1 hour up to 8 hours, revocable). Both are stored only as SHA-256 hashes in look-up
//! items (`PORTALLINK#<hash>`, `PORTALSESSION#<hash>`); GSI1 lists a contact's links and
//! sessions so that an erasure finds them.

mod store;

use crate::contacts::{Contact, ContactId};
use crate::ids::EmailId;
use serde::{Deserialize, Serialize};
use shared::ApiError;
use shared::auth::hash_api_key;
use shared::ids::Timestamp;
use shared::validate::Patch;
pub use store::{
    PRIVACY, email_link, emails_of, end_sessions, exchange, exchange_within, link_owner, me, proof, return_link, revoke, send_erasure_code,
    sign_in, update_me, verify_sign_in,
};

/// The value of `OpenPortalSession`: whose session the caller gets (the contact at the address
/// it has now) and where its link returns to.
#[derive(serde::Serialize, Clone, Debug, PartialEq)]
pub struct Opening {
    pub contact_id: crate::ids::ContactId,
    pub email: String,
    pub return_url: Option<String>,
}

impl crate::effects::Valued for crate::effects::OpenPortalSession {
    type Value = Opening;
}
pub(crate) use store::{mail_to, sender, spend_erasure_code};
use utoipa::ToSchema;

pub const LINK_PREFIX: &str = "psl_";

pub const LINK_SECS: i64 = 15 * 60;

/// How a login link reaches the customer, and so what a session proves.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
#[schema(as = PortalLinkDelivery)]
pub enum Delivery {
    /// Emailed to the contact's address from the workspace's verified sending domain: the
    /// session proves the customer reads that inbox. No token in the answer.
    #[default]
    Email,
    /// Handed to the caller (admin scope) to embed in its own signed-in pages: the session
    /// proves only that the workspace vouched for the customer.
    Return,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Email => "email",
            Self::Return => "return",
        }
    }
}

#[derive(Serialize, ToSchema, Clone)]
pub struct PortalLink {
    /// Always `portal_link`.
    pub object: String,
    pub delivery: Delivery,
    /// `return`: the one-time login token, shown once, valid 15 minutes, exchanged once.
    /// `email`: null (it went to the customer's inbox).
    pub token: Option<String>,
    /// `return`: `return_url` with `#portal_token=<token>` (in the fragment, so no server logs it).
    pub url: Option<String>,
    pub contact_id: ContactId,
    /// `email`: the email that carries the link.
    pub email_id: Option<EmailId>,
    pub expires_at: Timestamp,
}

#[derive(Serialize, ToSchema)]
pub struct PortalSession {
    /// Always `portal_session`.
    pub object: String,
    /// Send as `X-Portal-Session`; valid 1 hour from its last use, 8 hours at most.
    pub session_token: String,
    pub expires_at: Timestamp,
    pub contact: Contact,
}

fn time(secs: i64) -> shared::ids::Timestamp {
    shared::ids::Timestamp::from(chrono::DateTime::from_timestamp(secs, 0).unwrap_or_default())
}

/// Is `url` https on one of the workspace's portal origins (`scheme://host[:port]`)?
pub fn allowed_return(url: &str, origins: &[String]) -> bool {
    let Ok(u) = url::Url::parse(url) else { return false };
    u.scheme() == "https" && u.username().is_empty() && origins.iter().any(|o| u.origin().ascii_serialization() == o.trim_end_matches('/'))
}

/// How long an erasure code lives; how many codes one session may ask for, and how many
/// guesses it has in all (a new code does not give new guesses).
pub const ERASURE_CODE_SECS: i64 = 15 * 60;

pub const ERASURE_CODES_PER_SESSION: i64 = 3;

pub const ERASURE_CODE_TRIES: i64 = 5;

/// What `POST /portal/me/erasure/code` answers.
#[derive(Serialize, ToSchema)]
pub struct ErasureCode {
    /// Always `portal_erasure_code`.
    pub object: String,
    /// The email that carries the code.
    pub email_id: EmailId,
    pub expires_at: Timestamp,
}

fn code_hash(session_pk: &str, code: &str) -> String {
    hash_api_key(&format!("{session_pk}/{code}"))
}

fn link_refused() -> ApiError {
    ApiError::unauthorized("the login link is invalid, expired or already used")
}

/// The browser's (or app's) handle on one sign-in: `psi_` + 43 base62 characters.
pub const SIGN_IN_PREFIX: &str = "psi_";

/// Guesses one sign-in's code gets.
pub const SIGN_IN_CODE_TRIES: i64 = 5;

/// The least time a sign-in request takes, whether the address is a contact's or not: the
/// answer and its timing say nothing about who is a customer.
pub const SIGN_IN_FLOOR: std::time::Duration = std::time::Duration::from_millis(900);

/// What `POST /portal/sign-in` answers, the same for every address.
#[derive(Serialize, ToSchema)]
pub struct SignIn {
    /// Always `portal_sign_in`.
    pub object: String,
    /// Send it back with the emailed code to `POST /portal/sign-in/verify`; it is not a
    /// session and opens nothing by itself.
    pub attempt: String,
    pub expires_at: Timestamp,
}

/// The language of the customer's mail and pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Lang {
    #[default]
    En,
    Nb,
}

impl Lang {
    /// The first of `Accept-Language`'s languages we speak (Norwegian of any kind is Bokmål).
    pub fn from_accept_language(header: Option<&str>) -> Self {
        let mut tags: Vec<(f32, &str)> = header
            .unwrap_or_default()
            .split(',')
            .filter_map(|part| {
                let mut it = part.split(';');
                let tag = it.next()?.trim();
                let q = it.find_map(|p| p.trim().strip_prefix("q=")).and_then(|q| q.parse().ok()).unwrap_or(1.0);
                Some((q, tag))
            })
            .collect();
        tags.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, tag) in tags {
            let primary = tag.split('-').next().unwrap_or_default().to_ascii_lowercase();
            match primary.as_str() {
                "nb" | "no" | "nn" => return Lang::Nb,
                "en" => return Lang::En,
                _ => {}
            }
        }
        Lang::En
    }
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Nb => "nb",
        }
    }
}

fn sign_in_mail(lang: Lang, workspace: &str, url: &str, code: &str) -> (String, String) {
    match lang {
        Lang::En => (
            format!("Your sign-in link for {workspace}"),
            format!(
                "Sign in to {workspace} with this link (valid 15 minutes, once):\n\n{url}\n\nOr type this code where you asked to sign in: {code}\n\nIf you did not ask for it, ignore this email."
            ),
        ),
        Lang::Nb => (
            format!("Innloggingslenken din for {workspace}"),
            format!(
                "Logg inn hos {workspace} med denne lenken (gyldig i 15 minutter, én gang):\n\n{url}\n\nEller skriv inn denne koden der du ba om å logge inn: {code}\n\nHvis du ikke ba om dette, kan du se bort fra e-posten."
            ),
        ),
    }
}

/// The signed-in customer: their contact and their marketing choice.
#[derive(Serialize, ToSchema)]
pub struct Me {
    /// Always `portal_me`.
    pub object: String,
    pub contact: Contact,
    /// The newest `marketing_email` consent event's answer; null when there is none.
    pub marketing_consent: Option<bool>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateMe {
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 200)]
    pub first_name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 200)]
    pub last_name: Patch<String>,
    /// E.164.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^(\\+[1-9][0-9]{1,14})?$")]
    pub phone: Patch<String>,
    /// Records a `marketing_email` consent event with source `portal`.
    pub marketing_consent: Option<bool>,
    /// The wording the customer saw next to the choice (default: a generic portal text).
    #[schema(max_length = 10000)]
    pub consent_text: Option<String>,
    #[schema(max_length = 100)]
    pub consent_text_version: Option<String>,
}

/// An email as the customer sees it: what, from whom, when, and where it stands; no bodies.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct PortalEmail {
    #[schema(value_type = crate::ids::EmailId)]
    pub id: String,
    /// Always `email`.
    pub object: String,
    pub from: String,
    pub subject: String,
    pub status: crate::emails::EmailStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
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
