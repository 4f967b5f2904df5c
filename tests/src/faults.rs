//! A fault proxy in front of a dependency of the local stack (DynamoDB Local, moto, a PDS, a
//! webhook receiver): it passes requests through until a test sets a fault, for every request
//! or only those of one AWS service (named in the request's SigV4 credential scope, so one
//! proxy in front of moto can fail SQS alone). Bound to 127.0.0.1.
//!
//! Every dependency here speaks HTTP, and half the faults are answers only an HTTP-aware
//! proxy can give (a 5xx with the service's error body, its own throttling error), so it is
//! one small HTTP proxy rather than a TCP one (Toxiproxy, noxious) beside a second for those.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy does to the requests a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The connection closes before any answer (a refused or crashed peer, as a pooled client
    /// sees it).
    Reset,
    /// The request is taken and never answered.
    Hang,
    /// Answered, this much later.
    Latency(Duration),
    /// The request reaches the service at once (its work is done), the answer this much
    /// later: the window in which a caller that dies has made an effect it never recorded.
    SlowAnswer(Duration),
    /// The answer starts (status, headers, half the body) and the connection closes.
    Cut,
    /// A 500 with the service's own error body.
    ServerError,
    /// The service's own throttling error (`ProvisionedThroughputExceededException`,
    /// `RequestThrottled`, `TooManyRequestsException`, `SlowDown`, `ThrottlingException`).
    Throttle,
}

impl Fault {
    /// Every fault, in the order the reports list them.
    pub const ALL: [Fault; 6] =
        [Fault::Reset, Fault::Hang, Fault::Latency(Duration::from_millis(1500)), Fault::Cut, Fault::ServerError, Fault::Throttle];

    /// The faults a row runs: all of them under `make chaos`, the cut answer alone in `make test`.
    pub fn under_test() -> Vec<Fault> {
        if full() { Fault::ALL.to_vec() } else { vec![Fault::Cut] }
    }

    pub fn name(self) -> String {
        match self {
            Fault::Reset => "connection reset".into(),
            Fault::Hang => "hang".into(),
            Fault::Latency(d) => format!("latency {} ms", d.as_millis()),
            Fault::SlowAnswer(d) => format!("answer {} ms late", d.as_millis()),
            Fault::Cut => "answer cut midway".into(),
            Fault::ServerError => "500".into(),
            Fault::Throttle => "throttling error".into(),
        }
    }
}

/// `make chaos` runs the tests with `CHAOS=full`: every fault, more kills, longer faults.
pub fn full() -> bool {
    std::env::var("CHAOS").is_ok_and(|v| v == "full")
}

#[derive(Clone, Default)]
struct State {
    /// The fault, the service it is limited to (`None`: every request) and the operations
    /// (empty: all of the service's).
    fault: Option<(Fault, Option<String>, Vec<String>)>,
    /// Requests the fault would apply to that still pass first.
    pass: u64,
    /// Requests the fault applied to.
    hit: u64,
}

pub struct FaultProxy {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl FaultProxy {
    pub async fn start(upstream: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fault proxy");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let (st, upstream) = (state.clone(), upstream.trim_end_matches('/').to_string());
        let client = reqwest::Client::builder().no_proxy().build().expect("client");
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (st, upstream, client) = (st.clone(), upstream.clone(), client.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let (st, upstream, client) = (st.clone(), upstream.clone(), client.clone());
                        async move { handle(req, &upstream, &client, &st).await }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
        Self { url, state }
    }

    /// Apply `fault` to every request (`service` `None`) or to one AWS service's (`dynamodb`,
    /// `sqs`, `s3`, `ses`, `secretsmanager`).
    pub fn set(&self, fault: Fault, service: Option<&str>) {
        self.set_on(fault, service, &[]);
    }

    /// Apply `fault` to some operations only: a JSON-protocol AWS service's, named in the
    /// request's `X-Amz-Target` (DynamoDB's `TransactWriteItems`), or an XRPC method's, named
    /// by its path's last part (`/xrpc/com.atproto.repo.createRecord`: `createRecord`).
    pub fn set_on(&self, fault: Fault, service: Option<&str>, operations: &[&str]) {
        self.set_after(fault, service, operations, 0);
    }

    /// As [`FaultProxy::set_on`], after the first `pass` requests it applies to went through
    /// (a write that fails part-way: its first parts land, the next one fails).
    pub fn set_after(&self, fault: Fault, service: Option<&str>, operations: &[&str], pass: u64) {
        let mut s = self.state.lock().expect("state");
        s.fault = Some((fault, service.map(String::from), operations.iter().map(|o| o.to_string()).collect()));
        s.pass = pass;
        s.hit = 0;
    }

    /// How many requests the fault has applied to so far.
    pub fn hits(&self) -> u64 {
        self.state.lock().expect("state").hit
    }

    /// Pass everything through again; how many requests the fault applied to.
    pub fn clear(&self) -> u64 {
        let mut s = self.state.lock().expect("state");
        s.fault = None;
        s.hit
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

/// The AWS service a request is signed for: `Credential=<key>/<date>/<region>/<service>/aws4_request`.
fn service_of(headers: &http::HeaderMap) -> Option<String> {
    let auth = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let scope = auth.split("Credential=").nth(1)?.split(',').next()?;
    scope.split('/').nth(3).map(String::from)
}

async fn handle(
    req: http::Request<hyper::body::Incoming>,
    upstream: &str,
    client: &reqwest::Client,
    state: &Mutex<State>,
) -> Result<http::Response<Body>, std::io::Error> {
    let service = service_of(req.headers());
    let operation = req
        .headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().path().strip_prefix("/xrpc/"))
        .and_then(|t| t.rsplit('.').next())
        .map(String::from);
    let fault = {
        let mut s = state.lock().expect("state");
        let f = s
            .fault
            .clone()
            .filter(|(_, only, ops)| {
                (only.is_none() || *only == service) && (ops.is_empty() || ops.iter().any(|o| Some(o) == operation.as_ref()))
            })
            .map(|(f, _, _)| f);
        if f.is_some() && s.pass > 0 {
            s.pass -= 1;
            None
        } else {
            if f.is_some() {
                s.hit += 1;
            }
            f
        }
    };
    match fault {
        // hyper closes the connection when the service fails.
        Some(Fault::Reset) => return Err(std::io::Error::other("reset by the fault proxy")),
        Some(Fault::Hang) => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return Err(std::io::Error::other("hung"));
        }
        Some(Fault::ServerError) => return Ok(error_answer(service.as_deref(), false)),
        Some(Fault::Throttle) => return Ok(error_answer(service.as_deref(), true)),
        Some(Fault::Latency(d)) => tokio::time::sleep(d).await,
        Some(Fault::Cut | Fault::SlowAnswer(_)) | None => {}
    }
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let path = parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
    let mut fwd = client.request(parts.method.clone(), format!("{upstream}{path}")).body(body.to_vec());
    for (k, v) in &parts.headers {
        if k != http::header::HOST && k != http::header::CONTENT_LENGTH {
            fwd = fwd.header(k, v);
        }
    }
    let resp = fwd.send().await.map_err(std::io::Error::other)?;
    let mut out = http::Response::builder().status(resp.status().as_u16());
    for (k, v) in resp.headers() {
        if k != http::header::CONTENT_LENGTH && k != http::header::TRANSFER_ENCODING {
            out = out.header(k.as_str(), v.as_bytes());
        }
    }
    let bytes = resp.bytes().await.map_err(std::io::Error::other)?;
    if let Some(Fault::SlowAnswer(d)) = fault {
        tokio::time::sleep(d).await;
    }
    if fault == Some(Fault::Cut) {
        // The full length is announced, half is sent, then the stream fails and hyper drops
        // the connection.
        let half = bytes.slice(..bytes.len() / 2);
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![Ok(Frame::data(half)), Err(std::io::Error::other("cut"))];
        let body = StreamBody::new(futures_util::stream::iter(frames));
        return Ok(out.header(http::header::CONTENT_LENGTH, bytes.len()).body(BodyExt::boxed(body)).expect("response"));
    }
    Ok(out.body(Full::new(bytes).map_err(|never| match never {}).boxed()).expect("response"))
}

/// The error each service answers, in its protocol.
fn error_answer(service: Option<&str>, throttle: bool) -> http::Response<Body> {
    let json = |status: u16, content_type: &str, kind: &str| {
        let body = serde_json::json!({"__type": kind, "message": "injected by the fault proxy"}).to_string();
        (status, content_type.to_string(), vec![("x-amzn-errortype", kind.rsplit('#').next().unwrap_or(kind).to_string())], body)
    };
    let (status, content_type, headers, body) = match (service, throttle) {
        (Some("dynamodb"), true) => {
            json(400, "application/x-amz-json-1.0", "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException")
        }
        (Some("dynamodb"), false) => json(500, "application/x-amz-json-1.0", "com.amazonaws.dynamodb.v20120810#InternalServerError"),
        (Some("sqs"), true) => {
            let mut a = json(400, "application/x-amz-json-1.0", "com.amazonaws.sqs#RequestThrottled");
            a.2.push(("x-amzn-query-error", "RequestThrottled;Sender".into()));
            a
        }
        (Some("sqs"), false) => json(500, "application/x-amz-json-1.0", "com.amazonaws.sqs#InternalError"),
        (Some("secretsmanager"), true) => json(400, "application/x-amz-json-1.1", "ThrottlingException"),
        (Some("secretsmanager"), false) => json(500, "application/x-amz-json-1.1", "InternalServiceError"),
        (Some("ses"), true) => json(429, "application/json", "TooManyRequestsException"),
        (Some("ses"), false) => json(500, "application/json", "InternalFailure"),
        (Some("s3"), t) => {
            let (status, code) = if t { (503, "SlowDown") } else { (500, "InternalError") };
            let body = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>injected by the fault proxy</Message></Error>"
            );
            (status, "application/xml".into(), vec![], body)
        }
        // Anything else (a PDS, a webhook receiver): a plain HTTP error.
        (_, true) => (429, "application/json".into(), vec![("retry-after", "1".into())], "{\"error\":\"RateLimitExceeded\"}".into()),
        (_, false) => (500, "application/json".into(), vec![], "{\"error\":\"InternalServerError\"}".into()),
    };
    let mut out = http::Response::builder().status(status).header(http::header::CONTENT_TYPE, content_type);
    for (k, v) in headers {
        out = out.header(k, v);
    }
    out.body(Full::new(Bytes::from(body)).map_err(|never| match never {}).boxed()).expect("response")
}
