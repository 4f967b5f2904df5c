//! A webhook receiver on 127.0.0.1: records every request (headers, raw body, arrival time)
//! and answers with scripted statuses. Signatures are verified here with this file's own
//! HMAC code, independently of the server's signing module.

use base64::Engine;
use bytes::Bytes;
use hmac::{KeyInit, Mac};
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
    /// Unix seconds at arrival.
    pub at: i64,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("deliveries are JSON")
    }
    pub fn event_type(&self) -> String {
        self.json()["type"].as_str().unwrap_or_default().to_string()
    }
    /// For each `v1,` entry of the signature header: does it verify with `secret`?
    pub fn signature_matches(&self, secret: &str) -> Vec<bool> {
        let key = base64::engine::general_purpose::STANDARD.decode(secret.strip_prefix("whsec_").expect("whsec_ secret")).expect("base64");
        let ts = self.header("x-service-timestamp");
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
        mac.update(format!("{ts}.").as_bytes());
        mac.update(&self.body);
        let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        self.header("x-service-signature").split(' ').map(|e| e.strip_prefix("v1,") == Some(expected.as_str())).collect()
    }
    /// Whether the Standard Webhooks verifiers, `standardwebhooks` and `svix` (Python, from
    /// `.venv`), accept this delivery as received with `secret`: (standardwebhooks, svix).
    pub fn verified_by_standard_libraries(&self, secret: &str) -> (bool, bool) {
        let headers: serde_json::Map<String, Value> =
            self.headers.iter().map(|(k, v)| (k.as_str().to_string(), Value::from(v.to_str().unwrap_or_default()))).collect();
        let input =
            serde_json::json!({"secret": secret, "headers": headers, "body": base64::engine::general_purpose::STANDARD.encode(&self.body)});
        let v = crate::python("tests/verify_standard_webhooks.py", &input);
        (v["standardwebhooks"] == true, v["svix"] == true)
    }
    /// What a careful receiver checks: some signature matches and the timestamp is fresh.
    pub fn verifies(&self, secret: &str) -> bool {
        let ts: i64 = self.header("x-service-timestamp").parse().unwrap_or(0);
        (self.at - ts).abs() <= 300 && self.signature_matches(secret).contains(&true)
    }
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    /// Statuses to answer next, before `default_status`.
    script: VecDeque<u16>,
    default_status: u16,
    /// How long to take over each answer (a slow receiver).
    delay: std::time::Duration,
    /// JSON served with 200 at these paths (a stand-in identity provider, for example).
    documents: std::collections::HashMap<String, String>,
    /// Other files served with 200 at these paths: content type and bytes (images).
    files: std::collections::HashMap<String, (String, Vec<u8>)>,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl Receiver {
    /// Start on a free 127.0.0.1 port in the caller's runtime; it stops with that runtime.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State { default_status: 200, ..Default::default() }));
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let st = st.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let st = st.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body.collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
                            let path = parts.uri.path().to_string();
                            let (status, delay, document, file) = {
                                let mut s = st.lock().unwrap();
                                let document = s.documents.get(&path).cloned();
                                let file = s.files.get(&path).cloned();
                                s.received.push(Received { path, headers: parts.headers, body, at: chrono::Utc::now().timestamp() });
                                (s.script.pop_front().unwrap_or(s.default_status), s.delay, document, file)
                            };
                            tokio::time::sleep(delay).await;
                            if let Some((ct, bytes)) = file {
                                let resp = http::Response::builder().status(200).header("content-type", ct);
                                return Ok::<_, Infallible>(resp.body(Full::new(Bytes::from(bytes))).unwrap());
                            }
                            if let Some(doc) = document {
                                let resp = http::Response::builder().status(200).header("content-type", "application/json");
                                return Ok::<_, Infallible>(resp.body(Full::new(Bytes::from(doc))).unwrap());
                            }
                            let mut resp = http::Response::builder().status(status);
                            if status == 503 {
                                resp = resp.header("retry-after", "1");
                            }
                            Ok::<_, Infallible>(resp.body(Full::new(Bytes::from(format!("receiver says {status}")))).unwrap())
                        }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
        Self { url, state }
    }

    /// What arrived since the last take, forgotten here (a long run keeps its memory flat).
    pub fn take(&self) -> Vec<Received> {
        std::mem::take(&mut self.state.lock().unwrap().received)
    }

    /// Serve this JSON at `path` (replacing what was served there).
    pub fn serve(&self, path: &str, doc: &Value) {
        self.state.lock().unwrap().documents.insert(path.into(), doc.to_string());
    }
    /// Serve these bytes at `path` (an image for a post, say).
    pub fn serve_file(&self, path: &str, content_type: &str, bytes: Vec<u8>) {
        self.state.lock().unwrap().files.insert(path.into(), (content_type.into(), bytes));
    }
    /// The origin, `http://127.0.0.1:<port>`.
    pub fn origin(&self) -> String {
        self.url.trim_end_matches("/hook").to_string()
    }
    /// How many requests reached `path`.
    pub fn hits(&self, path: &str) -> usize {
        self.state.lock().unwrap().received.iter().filter(|r| r.path == path).count()
    }

    /// Answer these statuses to the next requests, then the default.
    pub fn script(&self, statuses: &[u16]) {
        self.state.lock().unwrap().script.extend(statuses);
    }
    pub fn set_delay(&self, d: std::time::Duration) {
        self.state.lock().unwrap().delay = d;
    }
    pub fn set_default(&self, status: u16) {
        self.state.lock().unwrap().default_status = status;
    }
    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }
    /// Requests of one event type.
    pub fn of_type(&self, t: &str) -> Vec<Received> {
        self.received().into_iter().filter(|r| r.event_type() == t).collect()
    }

    /// Wait (up to `secs`) until `done` holds for what was received; returns it either way.
    pub async fn wait_until(&self, secs: u64, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let got = self.received();
            if done(&got) || Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
