//! The AT Protocol reference PDS (`tools/pds/run`, installed by `make deps`) as a child
//! process on 127.0.0.1, for `make dev` and the Bluesky channel tests. It stops when this
//! process drops it or dies (its stdin closes).

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

pub struct LocalPds {
    /// `http://localhost:<port>`
    pub url: String,
    http: reqwest::Client,
    _child: tokio::process::Child,
}

/// An account made through the PDS's own `createAccount`, with an app password.
pub struct Account {
    pub handle: String,
    pub did: String,
    /// The account session's access token (not the app password's).
    pub jwt: String,
    pub app_password: String,
}

impl LocalPds {
    pub async fn start() -> Result<Self, String> {
        let mut child = tokio::process::Command::new(crate::localstack::repo_root().join("tools/pds/run"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("tools/pds/run: {e}"))?;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
        let first = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .map_err(|_| "the PDS did not start within 60 s".to_string())?
            .map_err(|e| e.to_string())?
            .ok_or("the PDS exited before it was ready (run make deps)")?;
        let v: Value = serde_json::from_str(&first).map_err(|e| format!("the PDS said {first:?}: {e}"))?;
        let url = v["pds_url"].as_str().ok_or("no pds_url")?.to_string();
        Ok(Self { url, http: reqwest::Client::new(), _child: child })
    }

    /// POST an XRPC procedure; answers the status and the JSON body.
    pub async fn xrpc(&self, method: &str, jwt: Option<&str>, body: Value) -> Result<(u16, Value), String> {
        let mut req = self.http.post(format!("{}/xrpc/{method}", self.url)).json(&body);
        if let Some(t) = jwt {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.map_err(|e| e.to_string())?;
        Ok((r.status().as_u16(), r.json().await.unwrap_or_default()))
    }

    /// A new account `<name>.test` with an app password for the platform.
    pub async fn account(&self, name: &str) -> Result<Account, String> {
        let handle = format!("{name}.test");
        let body = json!({"handle": handle, "email": format!("{name}@example.test"), "password": rand_password()});
        let (s, acc) = self.xrpc("com.atproto.server.createAccount", None, body).await?;
        if s != 200 {
            return Err(format!("createAccount: {s} {acc}"));
        }
        let jwt = acc["accessJwt"].as_str().unwrap_or_default().to_string();
        let (s, ap) = self.xrpc("com.atproto.server.createAppPassword", Some(&jwt), json!({"name": "platform"})).await?;
        if s != 200 {
            return Err(format!("createAppPassword: {s} {ap}"));
        }
        Ok(Account {
            handle,
            did: acc["did"].as_str().unwrap_or_default().into(),
            jwt,
            app_password: ap["password"].as_str().unwrap_or_default().into(),
        })
    }

    /// The account's posts (`com.atproto.repo.listRecords`).
    pub async fn posts(&self, did: &str) -> Result<Vec<Value>, String> {
        let url = format!("{}/xrpc/com.atproto.repo.listRecords?repo={did}&collection=app.bsky.feed.post&limit=100", self.url);
        let v: Value = self.http.get(url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        Ok(v["records"].as_array().cloned().unwrap_or_default())
    }
}

fn rand_password() -> String {
    format!("pw-{}", shared::ids::new_id("p"))
}
