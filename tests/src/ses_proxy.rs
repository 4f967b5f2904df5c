//! SES as AWS documents it where moto differs, in front of moto: `CreateEmailIdentity` of a name
//! that exists answers `AlreadyExistsException` (moto overwrites it); an identity can be held
//! unverified (moto verifies every identity at once); and the answer to the next create can be
//! dropped after SES acted on it (the connection closes), as a network that loses a reply does.
//! Everything else is passed to moto unchanged. Bound to 127.0.0.1.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct SesProxy {
    pub url: String,
    /// Names whose identity answers PENDING (their DNS records not seen yet).
    pending: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    drop_next_create: Arc<AtomicBool>,
    /// Creates answered `AlreadyExistsException`.
    pub refused: Arc<std::sync::atomic::AtomicU32>,
}

impl SesProxy {
    pub async fn start(moto: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let drop_next_create = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let pending = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
        let (flag, moto, count) = (drop_next_create.clone(), moto.trim_end_matches('/').to_string(), refused.clone());
        let held = pending.clone();
        let client = reqwest::Client::new();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (flag, moto, client, count, held) = (flag.clone(), moto.clone(), client.clone(), count.clone(), held.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let (flag, moto, client, count, held) = (flag.clone(), moto.clone(), client.clone(), count.clone(), held.clone());
                        async move { handle(req, &moto, &client, &flag, &count, &held).await }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
        Self { url, pending, drop_next_create, refused }
    }

    /// SES creates the next identity, and its answer never arrives.
    pub fn drop_next_create(&self) {
        self.drop_next_create.store(true, Ordering::SeqCst);
    }

    /// Hold (or release) an identity unverified.
    pub fn hold_pending(&self, name: &str, held: bool) {
        let mut p = self.pending.lock().unwrap();
        if held {
            p.insert(name.to_string());
        } else {
            p.remove(name);
        }
    }

    /// Was the dropped answer dropped (the flag consumed)?
    pub fn dropped(&self) -> bool {
        !self.drop_next_create.load(Ordering::SeqCst)
    }
}

async fn handle(
    req: http::Request<hyper::body::Incoming>,
    moto: &str,
    client: &reqwest::Client,
    drop_next: &AtomicBool,
    refused: &std::sync::atomic::AtomicU32,
    held: &std::sync::Mutex<std::collections::HashSet<String>>,
) -> Result<http::Response<Full<Bytes>>, String> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let path_q = parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
    let create = parts.method == http::Method::POST && parts.uri.path() == "/v2/email/identities";
    if create {
        let name = serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|v| v["EmailIdentity"].as_str().map(String::from));
        let name = name.unwrap_or_default();
        let auth = parts.headers.get("authorization").cloned();
        let mut probe = client.get(format!("{moto}/v2/email/identities/{name}"));
        if let Some(a) = auth {
            probe = probe.header("authorization", a);
        }
        if probe.send().await.is_ok_and(|r| r.status().is_success()) {
            refused.fetch_add(1, Ordering::SeqCst);
            let body = serde_json::json!({"message": format!("Email identity {name} already exist.")}).to_string();
            return Ok(http::Response::builder()
                .status(400)
                .header("content-type", "application/json")
                .header("x-amzn-errortype", "AlreadyExistsException")
                .body(Full::new(Bytes::from(body)))
                .unwrap());
        }
    }
    let mut fwd = client.request(parts.method.clone(), format!("{moto}{path_q}")).body(body.to_vec());
    for (k, v) in &parts.headers {
        if k != http::header::HOST && k != http::header::CONTENT_LENGTH {
            fwd = fwd.header(k, v);
        }
    }
    let resp = fwd.send().await.map_err(|e| e.to_string())?;
    if create && drop_next.swap(false, Ordering::SeqCst) {
        // SES did it; the caller never hears (hyper closes the connection on a service error).
        return Err("reply dropped".into());
    }
    let mut out = http::Response::builder().status(resp.status().as_u16());
    for (k, v) in resp.headers() {
        if k != http::header::CONTENT_LENGTH && k != http::header::TRANSFER_ENCODING {
            out = out.header(k.as_str(), v.as_bytes());
        }
    }
    let mut bytes = resp.bytes().await.map_err(|e| e.to_string())?;
    let name = parts.uri.path().strip_prefix("/v2/email/identities/").map(percent_decode);
    if parts.method == http::Method::GET
        && let Some(name) = name
        && held.lock().unwrap().contains(&name)
        && let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&bytes)
    {
        v["VerificationStatus"] = "PENDING".into();
        v["VerifiedForSendingStatus"] = false.into();
        bytes = Bytes::from(v.to_string());
    }
    Ok(out.body(Full::new(bytes)).unwrap())
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes()).next().map(|(_, v)| v.into_owned()).unwrap_or_default()
}
