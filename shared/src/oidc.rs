//! Signing a person in to the hosted approval pages with the workspace's OpenID provider: the
//! authorization code flow with PKCE (S256) and `state`, as a public client, against the
//! provider's discovery document. The `oauth2` crate builds the authorization URL and the
//! token request and reads the answer; its HTTP goes through [`crate::outbound`] (the checked
//! addresses, no redirects, bounded time) rather than an HTTP client of its own. The access
//! token it yields is then verified exactly as the API verifies a bearer token
//! (`crate::oauth`, its audience asked for with the `resource` parameter, RFC 8707), so the
//! pages trust nothing the API would not.

use crate::config::OAuthConfig;
use crate::outbound::{self, UrlPolicy};
use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, TokenResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The scopes a person's token for the pages asks for; the API caps them by the person's role.
pub const SCOPES: &[&str] = &["openid", "read", "write", "admin", "confirm"];

/// The endpoints of the provider's discovery document that the flow needs.
#[derive(Deserialize, Clone, Debug)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
}

/// What the browser keeps (sealed, in a short-lived cookie) between leaving for the provider
/// and coming back.
#[derive(Serialize, Deserialize, Debug, PartialEq, Eq)]
pub struct Pending {
    pub state: String,
    pub verifier: String,
    /// The page to return to: a path under the site, checked when it is set.
    pub next: String,
}

/// One provider, for one container: its discovery document is read on first use.
pub struct Provider {
    cfg: OAuthConfig,
    client_id: String,
    http: outbound::Client,
    discovery: tokio::sync::OnceCell<Discovery>,
}

#[derive(Debug)]
pub struct Failed(pub String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Failed {}

impl Provider {
    /// None when the deployment has no pages client (`OAUTH_PAGES_CLIENT_ID`).
    pub fn new(cfg: &OAuthConfig, policy: UrlPolicy, timeout: Duration) -> Result<Option<Self>, String> {
        let Some(client_id) = cfg.pages_client_id.clone() else { return Ok(None) };
        let http = outbound::Client::new(policy, timeout, "workspace-platform-approvals")?;
        Ok(Some(Self { cfg: cfg.clone(), client_id, http, discovery: tokio::sync::OnceCell::new() }))
    }

    async fn discovery(&self) -> Result<&Discovery, Failed> {
        self.discovery
            .get_or_try_init(|| async {
                let url = format!("{}/.well-known/openid-configuration", self.cfg.issuer.trim_end_matches('/'));
                let req = self.http.request(reqwest::Method::GET, &url).map_err(|e| Failed(format!("discovery: {e}")))?;
                let resp = req.send().await.map_err(|e| Failed(format!("discovery: {}", outbound::error_kind(&e))))?;
                if !resp.status().is_success() {
                    return Err(Failed(format!("discovery: HTTP {}", resp.status())));
                }
                let d: Discovery = resp.json().await.map_err(|e| Failed(format!("discovery: {e}")))?;
                // The document must be the configured issuer's (OpenID Connect Discovery §4.3).
                if d.issuer.trim_end_matches('/') != self.cfg.issuer.trim_end_matches('/') {
                    return Err(Failed("discovery: the document names another issuer".into()));
                }
                Ok(d)
            })
            .await
    }

    fn client(
        &self,
        d: &Discovery,
        redirect: &str,
    ) -> Result<
        BasicClient<oauth2::EndpointSet, oauth2::EndpointNotSet, oauth2::EndpointNotSet, oauth2::EndpointNotSet, oauth2::EndpointSet>,
        Failed,
    > {
        let bad = |what: &str| Failed(format!("{what} is not a URL"));
        Ok(BasicClient::new(ClientId::new(self.client_id.clone()))
            .set_auth_uri(AuthUrl::new(d.authorization_endpoint.clone()).map_err(|_| bad("authorization_endpoint"))?)
            .set_token_uri(TokenUrl::new(d.token_endpoint.clone()).map_err(|_| bad("token_endpoint"))?)
            .set_redirect_uri(RedirectUrl::new(redirect.to_string()).map_err(|_| bad("the redirect URI"))?))
    }

    /// Where to send the browser, and what to keep until it comes back to `redirect`.
    pub async fn start(&self, redirect: &str, next: &str) -> Result<(String, Pending), Failed> {
        let d = self.discovery().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let client = self.client(d, redirect)?;
        let mut req = client.authorize_url(CsrfToken::new_random).set_pkce_challenge(challenge);
        for s in SCOPES {
            req = req.add_scope(Scope::new(s.to_string()));
        }
        // `prompt=login` and `max_age=0` ask the provider for a fresh sign-in each time, so a
        // session left at the provider in a shared browser does not sign someone else in to
        // approve (a provider may ignore them: the ID token's `auth_time` is not checked).
        let (url, state) = req
            .add_extra_param("resource", self.cfg.audience.clone())
            .add_extra_param("prompt", "login")
            .add_extra_param("max_age", "0")
            .url();
        Ok((url.to_string(), Pending { state: state.secret().clone(), verifier: verifier.secret().clone(), next: next.to_string() }))
    }

    /// The person's access token for `code`, once the provider answered (not yet verified: the
    /// caller verifies it as the API does).
    pub async fn finish(&self, redirect: &str, code: &str, pending: &Pending) -> Result<(String, Option<Duration>), Failed> {
        let d = self.discovery().await?;
        let http = Transport(self);
        let token = self
            .client(d, redirect)?
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier.clone()))
            .add_extra_param("resource", self.cfg.audience.clone())
            .request_async(&http)
            .await
            .map_err(|e| Failed(format!("token request: {e}")))?;
        Ok((token.access_token().secret().clone(), token.expires_in()))
    }

    /// `oauth2`'s request, sent through the platform's checked client (see [`Transport`]).
    async fn send(&self, req: oauth2::HttpRequest) -> Result<oauth2::HttpResponse, Failed> {
        let (parts, body) = req.into_parts();
        let method = reqwest::Method::from_bytes(parts.method.as_str().as_bytes()).map_err(|e| Failed(e.to_string()))?;
        let mut r = self.http.request(method, &parts.uri.to_string()).map_err(|e| Failed(e.to_string()))?;
        for (k, v) in &parts.headers {
            r = r.header(k.as_str(), v.as_bytes());
        }
        let resp = r.body(body).send().await.map_err(|e| Failed(outbound::error_kind(&e).to_string()))?;
        let mut out = http::Response::builder().status(resp.status().as_u16());
        for (k, v) in resp.headers() {
            out = out.header(k.as_str(), v.as_bytes());
        }
        let bytes = resp.bytes().await.map_err(|e| Failed(outbound::error_kind(&e).to_string()))?;
        out.body(bytes.to_vec()).map_err(|e| Failed(e.to_string()))
    }
}

/// `oauth2`'s HTTP client: the provider's checked one. A named type, so the future it returns
/// is `Send` (a closure's would be generic over the request's lifetime).
struct Transport<'a>(&'a Provider);

impl<'c> oauth2::AsyncHttpClient<'c> for Transport<'_> {
    type Error = Failed;
    type Future = futures_util::future::BoxFuture<'c, Result<oauth2::HttpResponse, Failed>>;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(self.0.send(request))
    }
}
