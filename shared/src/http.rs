//! The request pipeline every area function runs, in the order of docs/architecture.md, as named
//! stages: route -> [`admit`] (authenticate, scope, rate limit) -> [`read_body`] (size, media
//! type) -> [`Idempotency`] around the handler -> response with `Request-Id` and rate-limit
//! headers. Each stage answers `Result<_, ApiError>`; [`handle`] is the one place that turns
//! results into responses, so every failure, a panic included, leaves as the error envelope.

use crate::app::App;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::idempotency::{self, Begin, Reservation};
use crate::request::{Reply, Req, to_bytes};
use crate::routing::{Matched, Route, match_route};
use bytes::Bytes;
use futures_util::FutureExt;
use http::{HeaderValue, Method, StatusCode, request::Parts};
use lambda_http::Body;
use std::panic::AssertUnwindSafe;
use std::time::Instant;
use tracing::Instrument;

const JSON: &str = "application/json; charset=utf-8";

type Headers = Vec<(&'static str, String)>;

/// What the pipeline measured about one request.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub ddb_calls: u32,
    pub status: u16,
}

pub type Response = http::Response<Body>;

/// Response headers the pipeline sets, as the contract declares them (`components.headers`).
pub const REQUEST_ID_HEADER: &str = "request-id";
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// Serve one request of an area.
pub async fn serve(app: &App, routes: &'static [Route], req: http::Request<Body>) -> Response {
    serve_with_stats(app, routes, req).await.0
}

pub async fn serve_with_stats(app: &App, routes: &'static [Route], req: http::Request<Body>) -> (Response, Stats) {
    let request_id = request_id_of(&req);
    // The route's template names its metrics (`GET /posts/{id}`), never the raw path.
    let matched = match_route(routes, req.method(), req.uri().path());
    let route = matched.as_ref().map_or_else(|_| "unmatched".to_string(), |m| format!("{} {}", m.route.method, m.route.path));
    let deprecation = matched.as_ref().ok().and_then(|m| m.route.deprecation);
    let span = tracing::info_span!("request", request_id = %request_id, method = %req.method(), path = %req.uri().path());
    async move {
        let started = Instant::now();
        let fut = AssertUnwindSafe(handle(app, matched, req, &request_id)).catch_unwind();
        let budget = std::time::Duration::from_millis(app.cfg.timeouts.request_ms);
        let (res, ddb_calls) = crate::metrics::count_ddb_calls(tokio::time::timeout(budget, fut)).await;
        let mut resp = match res {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => error_response(&ApiError::internal("handler panicked"), &request_id, &[]),
            // A dependency slower than its own timeouts allow, or many slow calls in a row.
            Err(_) => error_response(&ApiError::unavailable("the request ran past its time budget"), &request_id, &[]),
        };
        resp.headers_mut().insert(REQUEST_ID_HEADER, header_value(&request_id));
        for (name, value) in deprecation.iter().flat_map(|d| d.headers()) {
            resp.headers_mut().insert(name, header_value(&value));
        }
        let status = resp.status().as_u16();
        let duration_ms = started.elapsed().as_millis() as u64;
        tracing::info!(status, ddb_calls, duration_ms, "request done");
        crate::metrics::request(&route, status, duration_ms, ddb_calls);
        (resp, Stats { ddb_calls, status })
    }
    .instrument(span)
    .await
}

/// A successful end of the pipeline: the handler's answer or an idempotent replay.
struct Answer {
    status: StatusCode,
    body: Bytes,
    replayed: bool,
}

/// The pipeline, stage by stage; the only place that builds responses.
async fn handle(app: &App, matched: ApiResult<Matched<'static>>, req: http::Request<Body>, request_id: &str) -> Response {
    let (parts, body) = req.into_parts();
    let admitted = async {
        let m = matched?;
        let (principal, rate_headers) = admit(app, m.route, &parts.headers, crate::request::source_ip(&parts)).await?;
        Ok::<_, ApiError>((m, principal, rate_headers))
    };
    let (m, principal, rate_headers) = match admitted.await {
        Ok(a) => a,
        Err(e) => return error_response(&e, request_id, &[]),
    };
    // From here on every response carries the caller's rate-limit headers.
    match run(app, m, principal, parts, body, request_id).await {
        Ok(a) => {
            let mut headers = rate_headers;
            if a.replayed {
                headers.push((REPLAYED_HEADER, "true".into()));
            }
            json_response(a.status, a.body, &headers)
        }
        Err(e) => error_response(&e, request_id, &rate_headers),
    }
}

/// Stage 1: who is calling, may they use this route, and is there a token in their bucket.
/// Answers the principal and the rate-limit headers for the response.
async fn admit(app: &App, route: &Route, headers: &http::HeaderMap, source: String) -> ApiResult<(Principal, Headers)> {
    use crate::routing::Auth;
    let principal = match route.auth {
        Auth::Workspace => crate::auth::authenticate(&app.db, &app.keys, app.jwt.as_ref(), headers, route.needs_workspace).await?,
        Auth::PortalSession => crate::auth::authenticate_portal(&app.db, headers).await?,
        Auth::Public => Principal::public(&source),
    };
    // Scopes belong to workspace credentials; a portal session or a public route is limited by
    // what its handlers reach (one contact, one token).
    if route.auth == Auth::Workspace && !principal.scopes.contains(&route.needs) {
        return Err(ApiError::forbidden(format!("this credential lacks the {} scope", route.needs.name())));
    }
    // The lazy last-used write runs beside the bucket call, so it adds no latency.
    let bucket = principal.tenant_scope();
    let (decision, ()) =
        tokio::join!(app.limiter.acquire(&app.db, &bucket, route.class), crate::auth::touch_last_used(&app.db, &principal),);
    let decision = decision?;
    if !decision.allowed {
        return Err(decision.into_error());
    }
    Ok((principal, decision.headers()))
}

/// Stages 2 to 4 for an admitted caller: body, idempotency, handler.
async fn run(app: &App, m: Matched<'_>, principal: Principal, parts: Parts, body: Body, request_id: &str) -> ApiResult<Answer> {
    let body = read_body(m.route, &parts.headers, body)?;
    let query_string = parts.uri.query().unwrap_or("").to_string();
    // An empty query value is refused by name on every route (the contract says `minLength:
    // 1`): read as a filter it matches nothing, read as "no filter" it hides a client's bug.
    let query: Vec<(String, String)> = url::form_urlencoded::parse(query_string.as_bytes()).into_owned().collect();
    if let Some((name, _)) = query.iter().find(|(_, v)| v.is_empty()) {
        return Err(ApiError::validation(name, "must not be empty: leave the parameter out for no filter"));
    }
    let idempotency = match Idempotency::begin(app, &parts, &m, &body, &principal, request_id).await? {
        Begin::Replay(stored) => {
            let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
            let body = if status.is_success() { Bytes::from(stored.body) } else { with_request_id(stored.body, request_id) };
            return Ok(Answer { status, body, replayed: true });
        }
        Begin::Proceed(r) => r,
    };
    // For the approval request a 428 records.
    let (asker, method, relative_path) = (principal.clone(), parts.method.clone(), m.relative_path.clone());
    let idempotency_key = parts.headers.get(crate::idempotency::HEADER).and_then(|v| v.to_str().ok()).map(String::from);
    let grant = crate::authority::Grant::new(
        principal.clone(),
        m.route.effects,
        idempotency.confirmation.clone(),
        parts.method.as_str(),
        &m.relative_path,
        body.clone(),
    );
    let pages_origin = crate::request::pages_origin(app, &parts);
    let origin = pages_origin.clone();
    let req = Req {
        pages_origin,
        grant,
        principal,
        method: parts.method,
        params: m.params,
        query,
        query_string,
        headers: parts.headers,
        body: body.clone(),
        request_id: request_id.to_string(),
    };
    // The handler gets most of the request's budget, so the key is still released or its
    // answer stored within it (a budget that ran out mid-handler would leave the key held).
    let handler_budget = std::time::Duration::from_millis(app.cfg.timeouts.request_ms * 8 / 10);
    let handler = AssertUnwindSafe((m.route.handler)(app, req)).catch_unwind();
    let result = match tokio::time::timeout(handler_budget, idempotency::witnessed(idempotency.reservation.as_ref(), handler)).await {
        Ok(r) => r.unwrap_or_else(|_| Err(ApiError::internal("handler panicked"))),
        Err(_) => Err(ApiError::unavailable("the request ran past its time budget")),
    };
    match idempotency.finish(app, result, request_id).await {
        // A restricted key's request that reached its effect without a person's approval: a
        // person is asked (an approval request, the same one for the same request again).
        Err(mut e) if e.code == ErrorCode::ConfirmationRequired && reason(&e) == Some("missing") && idempotency_key.is_some() => {
            let capability = e.details.first().and_then(|d| d.meta.as_ref()).and_then(|m| m["capability"].as_str()).unwrap_or_default();
            let Some(capability) = crate::authority::restricted_capabilities(m.route.effects, &asker.requires_confirmation)
                .into_iter()
                .find(|c| *c == capability)
            else {
                return Err(e);
            };
            let shown = e.effect.take();
            let asked = crate::approvals::Asked {
                capability,
                method: method.as_str(),
                path: &relative_path,
                idempotency_key: idempotency_key.as_deref().unwrap_or_default(),
                body: &body,
                origin: origin.as_deref(),
                effect: shown.as_deref(),
            };
            Err(crate::approvals::annotate(app, &asker, asked, e).await)
        }
        // An approved value that is not what the run would do now.
        Err(e) if e.code == ErrorCode::ConfirmationRequired && reason(&e) == Some("stale") && e.effect.is_some() => {
            Err(crate::approvals::changed(app, &asker, e).await)
        }
        other => other,
    }
}

/// The `reason` of a 428's detail.
fn reason(e: &ApiError) -> Option<&str> {
    e.details.first()?.meta.as_ref()?["reason"].as_str()
}

/// A replayed error envelope names this request (as every error's `request_id` matches its
/// `Request-Id` header); the rest of the stored answer is unchanged.
fn with_request_id(body: Vec<u8>, request_id: &str) -> Bytes {
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(mut v) if v["error"].is_object() => {
            v["error"]["request_id"] = request_id.into();
            Bytes::from(serde_json::to_vec(&v).unwrap_or(body))
        }
        _ => Bytes::from(body),
    }
}

/// Stage 2: the body within the route's size limit, and JSON when there is one.
fn read_body(route: &Route, headers: &http::HeaderMap, body: Body) -> ApiResult<Bytes> {
    let body: Bytes = match body {
        Body::Empty => Bytes::new(),
        Body::Text(t) => Bytes::from(t),
        Body::Binary(b) => Bytes::from(b),
        _ => Bytes::new(),
    };
    if body.len() > route.max_body {
        return Err(ApiError::new(ErrorCode::PayloadTooLarge, format!("the body exceeds {} bytes", route.max_body)));
    }
    if !body.is_empty() && !is_json(headers.get(http::header::CONTENT_TYPE)) {
        return Err(ApiError::new(ErrorCode::UnsupportedMediaType, "the body must be JSON sent as Content-Type: application/json"));
    }
    Ok(body)
}

fn is_json(ct: Option<&HeaderValue>) -> bool {
    let Some(ct) = ct.and_then(|v| v.to_str().ok()) else { return false };
    let mime = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// Stage 3, around the handler: a write with `Idempotency-Key` reserves the key first (or
/// replays the stored answer), and stores the handler's answer after it.
struct Idempotency {
    reservation: Option<Reservation>,
    /// The confirmation consumed with the reservation, for the grant.
    confirmation: Option<crate::confirmation::Consumed>,
}

impl Idempotency {
    async fn begin(
        app: &App,
        parts: &Parts,
        m: &Matched<'_>,
        body: &[u8],
        principal: &Principal,
        request_id: &str,
    ) -> ApiResult<Begin<Self>> {
        let relative_path = m.relative_path.as_str();
        let header = |name: &str| parts.headers.get(name).map(|v| v.to_str().unwrap_or("\u{7f}"));
        // A token for a route reaching an effect this credential is restricted for is consumed
        // with the reservation (crate::confirmation); a request without one runs on and is
        // refused at the first restricted effect it reaches (`crate::authority::Grant::authorize`).
        // A confirmation header that is not a token is refused on every route that takes one,
        // whoever calls (the contract gives its form), rather than ignored for a credential
        // that needs none.
        if !m.route.effects.is_empty()
            && let Some(v) = parts.headers.get(crate::confirmation::HEADER)
            && v.to_str().ok().and_then(crate::confirmation::confirmation_id).is_none()
        {
            return Err(ApiError::validation(
                "X-Capability-Confirmation",
                "must be a token (cct_...) as POST /capability-confirmations answers it",
            ));
        }
        let restricted = crate::authority::restricted_capabilities(m.route.effects, &principal.requires_confirmation);
        // Credential-less routes share no workspace to keep replays in.
        let key = header(crate::idempotency::HEADER).filter(|_| parts.method != Method::GET && principal.workspace_id.is_some());
        // A non-ASCII key fails validation.
        if let Some(key) = key {
            idempotency::validate_key(key)?;
        }
        // The proof of a person's approval: a token, or for a request without one, the
        // approval a person gave its approval request (one look-up, only for a restricted key
        // on a route to its restricted effects).
        let confirm = match (restricted.first().copied(), header(crate::confirmation::HEADER), key) {
            (Some(capability), Some(token), _) => Some((capability, crate::confirmation::Proof::Token(token))),
            (Some(capability), None, Some(key)) => {
                let asked = crate::approvals::Asked {
                    capability,
                    method: parts.method.as_str(),
                    path: relative_path,
                    idempotency_key: key,
                    body,
                    origin: None,
                    effect: None,
                };
                crate::approvals::approved(app, principal, &asked).await?.map(|a| {
                    let proof = crate::confirmation::Proof::Approval {
                        confirmation_id: a.confirmation_id,
                        approval_request_id: a.approval_request_id,
                    };
                    (capability, proof)
                })
            }
            _ => None,
        };
        let fingerprint = || {
            let path_q = match parts.uri.query() {
                Some(q) => format!("{relative_path}?{q}"),
                None => relative_path.to_string(),
            };
            idempotency::fingerprint(&principal.subject, parts.method.as_str(), &path_q, body)
        };
        let mut confirmation = None;
        let begun = if let Some((capability, proof)) = confirm {
            let req = crate::confirmation::Request { capability, method: parts.method.as_str(), path: relative_path, body };
            let (begun, consumed) =
                crate::confirmation::begin(app, principal, &req, &restricted, proof, key, fingerprint(), request_id).await?;
            confirmation = Some(consumed);
            begun
        } else if let Some(key) = key {
            // A portal customer's keys live apart from the workspace's own.
            let key = match &principal.credential {
                crate::auth::Credential::Portal { session_id, .. } => format!("portal:{session_id}:{key}"),
                _ => key.to_string(),
            };
            idempotency::begin(&app.db, principal.workspace_or_none(), &key, fingerprint(), idempotency::lease_ms(&app.cfg.timeouts))
                .await?
        } else {
            return Ok(Begin::Proceed(Self { reservation: None, confirmation: None }));
        };
        Ok(match begun {
            Begin::Proceed(r) => Begin::Proceed(Self { reservation: Some(r), confirmation }),
            Begin::Replay(stored) => Begin::Replay(stored),
        })
    }

    /// A 4xx is stored like a success (the same request gets the same answer); a 5xx frees
    /// the key so the client's retry runs again if the request wrote nothing, and keeps it done
    /// otherwise (`idempotency::release`). After a person's confirmation was consumed the 5xx
    /// is stored and replayed: that request may have had its effect, and a confirmation runs
    /// one execution (as Stripe does for every 5xx).
    async fn finish(self, app: &App, result: ApiResult<Reply>, request_id: &str) -> ApiResult<Answer> {
        let Some(r) = &self.reservation else {
            return result.map(|r| Answer { status: r.status, body: r.body, replayed: false });
        };
        match result {
            Ok(reply) => {
                let stored = reply.replay_body.as_ref().unwrap_or(&reply.body);
                if let Err(e) = idempotency::complete(&app.db, r, reply.status.as_u16(), stored).await {
                    // The write happened; failing the response now would invite a duplicate retry.
                    tracing::warn!(error = %e, "could not store idempotent response");
                }
                Ok(Answer { status: reply.status, body: reply.body, replayed: false })
            }
            // A 428 too: the same key comes back with the person's token.
            Err(e) if (e.status().is_server_error() && self.confirmation.is_none()) || e.code == ErrorCode::ConfirmationRequired => {
                idempotency::release(&app.db, r, e.status().as_u16()).await;
                Err(e)
            }
            Err(e) => {
                if let Err(err) = idempotency::complete(&app.db, r, e.status().as_u16(), &to_bytes(&e.body(request_id))).await {
                    tracing::warn!(error = %err, "could not store idempotent error response");
                }
                Err(e)
            }
        }
    }
}

fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

fn request_id_of(req: &http::Request<Body>) -> String {
    use lambda_http::RequestExt;
    use lambda_http::request::RequestContext;
    if let Some(RequestContext::ApiGatewayV2(ctx)) = req.request_context_ref()
        && let Some(id) = ctx.request_id.as_deref().filter(|s| !s.is_empty())
    {
        return id.to_string();
    }
    crate::ids::new_id("req")
}

fn json_response(status: StatusCode, body: Bytes, headers: &[(&'static str, String)]) -> Response {
    let mut b = http::Response::builder().status(status);
    if !body.is_empty() {
        b = b.header(http::header::CONTENT_TYPE, JSON);
    }
    for (k, v) in headers {
        b = b.header(*k, header_value(v));
    }
    // Text: API Gateway then passes the JSON on as is, without base64 (it always is UTF-8).
    let body = if body.is_empty() {
        Body::Empty
    } else {
        String::from_utf8(body.to_vec()).map_or_else(|e| Body::Binary(e.into_bytes()), Body::Text)
    };
    b.body(body).expect("status and headers are valid")
}

pub fn error_response(e: &ApiError, request_id: &str, extra: &[(&'static str, String)]) -> Response {
    // Every answered error passes here: logged once, with its cause and where it was made.
    e.log();
    let mut headers = e.headers.clone();
    headers.extend(extra.iter().filter(|(k, _)| !e.headers.iter().any(|(ek, _)| ek == k)).cloned());
    json_response(e.status(), to_bytes(&e.body(request_id)), &headers)
}
