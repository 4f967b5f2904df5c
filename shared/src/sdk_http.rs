//! The AWS SDK's HTTP transport: the same reqwest + rustls stack the functions already carry
//! for webhooks and OAuth, instead of the SDK's default client. The default client links a
//! second HTTP stack (hyper's HTTP/2 and h2, hyper-rustls) that AWS's HTTP/1.1 endpoints
//! never use, and loads the trust store when a client is built, i.e. during init. Here a
//! reqwest client (pool, TLS config, trust store) is built on the first call that needs
//! one, once per container and timeout setting.
//!
//! Errors are classified the way the SDK's retry strategy expects: a timeout is a timeout,
//! a failed connection or a broken exchange is transient I/O (retried), anything else is
//! reported as is.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::Response;
use aws_smithy_types::body::SdkBody;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The HTTP client every SDK configuration of the project uses (functions, the dev stack,
/// the admin CLI).
pub fn client() -> SharedHttpClient {
    SharedHttpClient::new(Transport::default())
}

type Timeouts = (Option<Duration>, Option<Duration>);

#[derive(Debug, Default)]
struct Transport {
    /// One reqwest client per (connect, read) timeout pair; the SDK asks once per client
    /// configuration, and every client of a container uses the same settings.
    clients: Mutex<HashMap<Timeouts, Connector>>,
}

impl HttpClient for Transport {
    fn http_connector(&self, settings: &HttpConnectorSettings, _components: &RuntimeComponents) -> SharedHttpConnector {
        let key = (settings.connect_timeout(), settings.read_timeout());
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let connector = clients.entry(key).or_insert_with(|| Connector { settings: key, http: Arc::default() });
        SharedHttpConnector::new(connector.clone())
    }
}

#[derive(Debug, Clone)]
struct Connector {
    settings: Timeouts,
    /// Built by the first request: building it loads the trust store.
    http: Arc<std::sync::OnceLock<Result<reqwest::Client, String>>>,
}

impl Connector {
    fn http(&self) -> Result<&reqwest::Client, ConnectorError> {
        let (connect, read) = self.settings;
        let built = self.http.get_or_init(|| aws_http_client(connect, read));
        built.as_ref().map_err(|e| ConnectorError::other(e.clone().into(), None))
    }
}

/// A reqwest client for AWS endpoints (every SDK client's transport): pooled connections
/// kept under the 60 s idle cut of AWS's load balancers.
pub(crate) fn aws_http_client(connect: Option<Duration>, read: Option<Duration>) -> Result<reqwest::Client, String> {
    crate::crypto::install();
    // No redirects, as the SDK: a followed 307 would lose its signature and a 301 turn a PUT
    // into a GET.
    let mut b = reqwest::Client::builder().pool_idle_timeout(Duration::from_secs(50)).redirect(reqwest::redirect::Policy::none());
    if let Some(t) = connect {
        b = b.connect_timeout(t);
    }
    if let Some(t) = read {
        b = b.read_timeout(t);
    }
    b.build().map_err(|e| format!("AWS HTTP client: {e}"))
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let http = match self.http() {
            Ok(http) => http.clone(),
            Err(e) => return HttpConnectorFuture::ready(Err(e)),
        };
        let request = match request.try_into_http1x() {
            Ok(r) => r.map(reqwest::Body::wrap),
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(e.into()))),
        };
        let request = match reqwest::Request::try_from(request) {
            Ok(r) => r,
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(e.into()))),
        };
        HttpConnectorFuture::new(async move {
            let response = http.execute(request).await.map_err(classify)?;
            let response: http::Response<reqwest::Body> = response.into();
            Response::try_from(response.map(SdkBody::from_body_1_x)).map_err(|e| ConnectorError::other(e.into(), None))
        })
    }
}

/// True when `err` (an SDK error or anything wrapping this connector's) failed while
/// connecting, before a byte of the request left: refused, unreachable, a DNS or TLS
/// failure, a connect timeout. Only then is a request that must not run twice safe to send
/// again.
pub fn never_sent(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if e.downcast_ref::<reqwest::Error>().is_some_and(reqwest::Error::is_connect) {
            return true;
        }
        next = e.source();
    }
    false
}

/// The SDK retries I/O errors and timeouts; a request it built wrong is the caller's error.
fn classify(e: reqwest::Error) -> ConnectorError {
    if e.is_timeout() {
        ConnectorError::timeout(e.into())
    } else if e.is_builder() {
        ConnectorError::user(e.into())
    } else if e.is_connect() || e.is_request() || e.is_body() {
        ConnectorError::io(e.into())
    } else {
        ConnectorError::other(e.into(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn request(url: &str) -> HttpRequest {
        let r = http::Request::builder().method("POST").uri(url).body(SdkBody::from("{}")).unwrap();
        HttpRequest::try_from(r).unwrap()
    }

    fn connector(read: Option<Duration>) -> Connector {
        Connector { settings: (Some(Duration::from_secs(1)), read), http: Arc::default() }
    }

    #[tokio::test]
    async fn exchanges_a_request_and_streams_the_body() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\nx-amz-id: 7\r\n\r\n{\"ok\":true}").await.unwrap();
            req
        });
        let resp = connector(None).call(request(&format!("http://{addr}/x"))).await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(resp.headers().get("x-amz-id"), Some("7"));
        let body = resp.into_body();
        assert_eq!(body.bytes(), None, "the body streams rather than being buffered by the transport");
        let bytes = http_body_util::BodyExt::collect(body).await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"{\"ok\":true}");
        let seen = server.await.unwrap();
        assert!(seen.starts_with("POST /x HTTP/1.1"), "{seen}");
        assert!(seen.ends_with("{}"), "{seen}");
    }

    #[tokio::test]
    async fn a_refused_connection_is_transient_io_and_a_silent_server_a_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let e = connector(None).call(request(&format!("http://{addr}/"))).await.unwrap_err();
        assert!(e.is_io(), "{e:?}");

        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap();
        let _hold = tokio::spawn(async move {
            let (s, _) = silent.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
            drop(s);
        });
        let e = connector(Some(Duration::from_millis(200))).call(request(&format!("http://{addr}/"))).await.unwrap_err();
        assert!(e.is_timeout(), "{e:?}");
    }
}
