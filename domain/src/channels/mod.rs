//! Channels: the accounts and endpoints posts are published to. Each type is one adapter
//! module behind [`network::Network`]; connecting checks the credentials with the network,
//! which are then sealed at rest (as webhook secrets are) and never returned or logged.
//!
//! Items (pk = WS#<workspace>): `CHANNEL#<ch id>` (the channel, `credentials` and `session`
//! sealed, `version`), `CHANNELCOUNT` (the cap).

pub mod bluesky;
pub mod mastodon;
pub mod media;
pub mod network;
pub mod ops;
mod store;
pub mod webhook;

pub use network::{connect, http_client, publish};
pub use store::{Stored, connect_new, delete, load, of_post, record_check, update};

use network::NetError;
use serde::{Deserialize, Serialize};
use shared::ids::Timestamp;
use shared::{ApiError, ApiResult};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub use crate::posts::ChannelId;

pub const MAX_CHANNELS: i64 = 50;

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChannelType {
    Bluesky,
    Mastodon,
    Webhook,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChannelState {
    Connecting,
    Active,
    /// The network refused the credentials: reconnect (PATCH new credentials, then verify).
    Disconnected,
    /// The last check failed for another reason (`last_error`).
    Error,
}

/// What a channel accepts, read from the network when it connects.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
pub struct Limits {
    /// Longest text (Bluesky counts graphemes, Mastodon characters with links as 23).
    pub max_characters: u32,
    pub max_media: u32,
}

#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
pub struct Channel {
    /// `ch_...`
    pub id: ChannelId,
    /// Always `channel`.
    pub object: String,
    #[serde(rename = "type")]
    pub kind: ChannelType,
    pub name: Option<String>,
    /// Who posts appear as, e.g. `@ada.bsky.social`; credentials are never shown.
    pub masked_identity: String,
    pub state: ChannelState,
    pub last_error: Option<String>,
    pub last_verified_at: Option<Timestamp>,
    pub limits: Limits,
    pub metadata: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Webhook channels: the `whsec_` signing secret, in the create response only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// Credentials as stored (sealed), by type.
#[derive(Serialize, Deserialize, Clone)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Creds {
    Bluesky(bluesky::Credentials),
    Mastodon(mastodon::Credentials),
    Webhook(webhook::Credentials),
}

impl Creds {
    pub fn kind(&self) -> ChannelType {
        match self {
            Self::Bluesky(_) => ChannelType::Bluesky,
            Self::Mastodon(_) => ChannelType::Mastodon,
            Self::Webhook(_) => ChannelType::Webhook,
        }
    }

    /// The secret the channel signs in or signs with.
    fn secret(&self) -> &str {
        match self {
            Self::Bluesky(b) => &b.app_password,
            Self::Mastodon(m) => &m.access_token,
            Self::Webhook(w) => &w.secret,
        }
    }
}

/// The credentials a client sends, by `type` (the webhook secret is generated).
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // the contract's shape; `CreateChannel::credentials` parses by `type`
pub enum CredentialsInput {
    Bluesky(bluesky::Credentials),
    Mastodon(mastodon::Credentials),
    Webhook(webhook::Input),
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateChannel {
    #[serde(rename = "type")]
    pub kind: ChannelType,
    #[schema(min_length = 1, max_length = 100)]
    pub name: Option<String>,
    /// bluesky: `handle`, `app_password`, optional `service_url`; mastodon: `instance_url`,
    /// `access_token`; webhook: `url`.
    #[schema(value_type = CredentialsInput)]
    pub credentials: serde_json::Value,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// Where a channel posts and as whom: the part of `ConnectChannel`'s, `UpdateChannel`'s and
/// `DeleteChannel`'s values a person must see. A secret is never in it, not even as a hash
/// (a short password could be guessed from one): only whether it is the channel's current one,
/// a new one, or, on a change, kept or changed. The request binds the secret itself: its
/// body's hash is part of the confirmation.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Destination {
    pub network: ChannelType,
    /// Bluesky: the account.
    pub handle: Option<String>,
    /// Bluesky: the PDS it signs in to.
    pub service_url: Option<String>,
    /// Mastodon: the instance.
    pub instance_url: Option<String>,
    /// Webhook channel: where each post is sent.
    pub url: Option<String>,
    /// The app password, access token or signing secret: `current`, `new`, `kept` or `changed`.
    pub secret: &'static str,
}

impl Destination {
    pub fn of(c: &Creds, secret: &'static str) -> Self {
        let blank = Self { network: c.kind(), handle: None, service_url: None, instance_url: None, url: None, secret };
        match c {
            Creds::Bluesky(b) => Self { handle: Some(b.handle.clone()), service_url: b.service_url.clone(), ..blank },
            Creds::Mastodon(m) => Self { instance_url: Some(m.instance_url.clone()), ..blank },
            Creds::Webhook(w) => Self { url: Some(w.url.clone()), ..blank },
        }
    }

    /// Where `new` will post, said against `old`: its secret kept or changed.
    pub fn changed(old: &Creds, new: &Creds) -> Self {
        Self::of(new, if old.secret() == new.secret() { "kept" } else { "changed" })
    }
}

/// The value of `ConnectChannel`: the new channel, where it posts.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Connecting {
    pub name: Option<String>,
    pub destination: Destination,
    pub metadata: BTreeMap<String, String>,
}

impl crate::effects::Valued for crate::effects::ConnectChannel {
    type Value = Connecting;
}

/// The value of `UpdateChannel`: the channel, where it posted until now, and each change.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Changing {
    pub channel_id: ChannelId,
    pub name: Option<String>,
    /// Where it posts now.
    pub destination: Destination,
    /// Where it will post (null: unchanged).
    pub new_destination: Option<Destination>,
    /// The new name (null: unchanged).
    pub new_name: Option<String>,
    /// The new metadata (null: unchanged).
    pub new_metadata: Option<BTreeMap<String, String>>,
}

impl crate::effects::Valued for crate::effects::UpdateChannel {
    type Value = Changing;
}

/// The value of `DeleteChannel`: the channel and where it posted; draft and scheduled posts
/// lose their variant for it.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Disconnecting {
    pub channel_id: ChannelId,
    pub name: Option<String>,
    pub network: ChannelType,
    /// Null when its credentials no longer open (a retired key): it can still be deleted.
    pub destination: Option<Destination>,
}

impl crate::effects::Valued for crate::effects::DeleteChannel {
    type Value = Disconnecting;
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct UpdateChannel {
    #[schema(min_length = 1, max_length = 100)]
    pub name: Option<String>,
    /// New credentials of the channel's type (reconnects: checked with the network now).
    #[schema(value_type = Option<CredentialsInput>)]
    pub credentials: Option<serde_json::Value>,
    pub metadata: Option<BTreeMap<String, String>>,
}

/// Parse a client's credentials for `kind`; errors name `credentials.<field>`. A webhook
/// channel gets a new signing secret here (`keep_secret` keeps the old one on reconnect).
pub fn parse_credentials(
    kind: ChannelType,
    v: serde_json::Value,
    keep_secret: Option<&str>,
    policy: shared::outbound::UrlPolicy,
) -> ApiResult<Creds> {
    fn parse<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> ApiResult<T> {
        serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { "credentials".to_string() } else { format!("credentials.{path}") };
            shared::validate::validation_error(vec![shared::error::ErrorDetail::field(field, e.inner().to_string())])
        })
    }
    let mut errs = shared::validate::Errors::new();
    let creds = match kind {
        ChannelType::Bluesky => {
            let mut c: bluesky::Credentials = parse(v)?;
            c.validate(&mut errs, policy);
            Creds::Bluesky(c)
        }
        ChannelType::Mastodon => {
            let c: mastodon::Credentials = parse(v)?;
            c.validate(&mut errs, policy);
            Creds::Mastodon(c)
        }
        ChannelType::Webhook => {
            let i: webhook::Input = parse(v)?;
            check_url(&mut errs, "credentials.url", &i.url, policy);
            let secret = keep_secret.map(String::from).unwrap_or_else(shared::signing::generate_secret);
            Creds::Webhook(webhook::Credentials { url: i.url, secret })
        }
    };
    errs.finish()?;
    Ok(creds)
}

/// A URL the adapters will call: https (http only where loopback is allowed), no
/// credentials, not a private address literal; its DNS answer is checked when called.
pub fn check_url(errs: &mut shared::validate::Errors, field: &str, url: &str, policy: shared::outbound::UrlPolicy) {
    if let Err(e) = shared::outbound::check_url(url, policy) {
        errs.add(field, e.to_string());
    }
}

/// How long a text is for this channel's limit.
pub fn text_length(kind: ChannelType, text: &str) -> usize {
    match kind {
        ChannelType::Bluesky => bluesky::graphemes(text),
        ChannelType::Mastodon => mastodon::characters(text),
        ChannelType::Webhook => text.chars().count(),
    }
}

/// The answer to a refused connect: the network's reason as a 400 on `credentials`, or 503
/// when the network could not be reached. An address that does not resolve, or resolves where
/// this platform may not go, is the caller's: 400.
pub fn connect_error(e: NetError) -> ApiError {
    use network::ErrorCategory as C;
    if matches!(e.cause, Some("dns" | "blocked_address")) {
        return ApiError::validation("credentials", "the network's address does not resolve to one this platform may reach");
    }
    match e.category {
        C::Network | C::PlatformError | C::RateLimited => {
            ApiError::new(shared::error::ErrorCode::Unavailable, format!("the network did not answer: {}", e.message))
        }
        _ => ApiError::validation("credentials", e.message),
    }
}

/// Check each variant of a post against its channel: the channel is one of the workspace's and
/// active, and the text fits its limit (`variants[i].content` names the one that does
/// not). `channels` are the workspace's channels the post names, as loaded.
pub fn check_post(post: &crate::posts::Post, channels: &[Channel]) -> ApiResult<()> {
    let mut errs = shared::validate::Errors::new();
    for (i, v) in post.variants.iter().enumerate() {
        let Some(ch) = channels.iter().find(|c| c.id == v.channel_id) else {
            errs.add(format!("channel_ids[{i}]"), "no such channel in this workspace");
            continue;
        };
        if ch.state != ChannelState::Active {
            errs.add(format!("channel_ids[{i}]"), "the channel is not active (verify or reconnect it)");
            continue;
        }
        let images = post.media_for(v).len();
        // The variant is what does not fit, whether its text is its own or the post's.
        if images > ch.limits.max_media as usize {
            errs.add(
                format!("variants[{i}].media"),
                format!("{images} images; this channel ({}) takes at most {}", ch.masked_identity, ch.limits.max_media),
            );
        }
        let len = text_length(ch.kind, &post.text_for(v));
        if len > ch.limits.max_characters as usize {
            // The variant is what does not fit, whether its text is its own or the post's.
            errs.add(
                format!("variants[{i}].content"),
                format!("{len} characters; this channel ({}) takes at most {}", ch.masked_identity, ch.limits.max_characters),
            );
        }
    }
    errs.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_shows_where_and_as_whom_and_never_a_secret() {
        let bsky = |password: &str| {
            Creds::Bluesky(bluesky::Credentials {
                handle: "ada.example".into(),
                app_password: password.into(),
                service_url: Some("https://pds.example".into()),
            })
        };
        let d = Destination::of(&bsky("aaaa-bbbb-cccc-dddd"), "new");
        assert_eq!((d.handle.as_deref(), d.service_url.as_deref()), (Some("ada.example"), Some("https://pds.example")));
        let shown = serde_json::to_string(&d).unwrap();
        assert!(!shown.contains("aaaa-bbbb"), "{shown}");
        assert_eq!(Destination::changed(&bsky("aaaa-bbbb-cccc-dddd"), &bsky("eeee-bbbb-cccc-dddd")).secret, "changed");
        assert_eq!(Destination::changed(&bsky("aaaa-bbbb-cccc-dddd"), &bsky("aaaa-bbbb-cccc-dddd")).secret, "kept");
        let m = Creds::Mastodon(mastodon::Credentials { instance_url: "https://m.example".into(), access_token: "tok".into() });
        assert!(!serde_json::to_string(&Destination::of(&m, "current")).unwrap().contains("tok\""));
        let w = Creds::Webhook(webhook::Credentials { url: "https://site.example/hook".into(), secret: "whsec_x".into() });
        let d = Destination::of(&w, "new");
        assert_eq!((d.url.as_deref(), d.secret), (Some("https://site.example/hook"), "new"));
    }
}
