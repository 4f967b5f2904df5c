//! The project's common crate: every mechanism two areas need lives here once.
//!
//! Modules form layers; each uses only modules of its own or a lower layer (checked by
//! `tools/tests/layout.rs`), so the crate reads bottom-up:
//!
//! 1. foundations: `error`, `effect_value`, `ids`, `keys`, `crypto`, `validate`, `cursor`,
//!    `signing`, `cache`, `metrics`, `telemetry`, `outbound`, `sdk_http`, `aws`, `sqs`, `zone`, `html`
//! 2. data: `store` (the table: [`store::Db`], records, queries, transactions)
//! 3. `events` (what an event is; its outbox item)
//! 4. request mechanisms, each taking the [`store::Db`] it needs, and their settings:
//!    `config`, `auth`, `idempotency`, `ratelimit`, `oauth` and `oidc` (a person's tokens)
//! 5. `app`: the per-container state holding the clients and the above; `links` (links that
//!    carry a customer's authority over one object, made under the platform's key)
//! 6. built on `App`: `approvals` (requests a person approves), `authority` (the proof an
//!    effect demands), `outbox` (transactions with events, publishing, sweep), `worker`,
//!    `request` (what handlers receive and return), `confirmation` (capability tokens
//!    consumed with the idempotency reservation)
//! 7. serving: `routing`, `http` (the pipeline), `web` (the hosted pages), `lambda`, `openapi`

// 1. foundations
pub mod aws;
pub mod cache;
pub mod crypto;
pub mod cursor;
pub mod effect_value;
pub mod error;
pub mod html;
pub mod ids;
pub mod keys;
pub mod metrics;
pub mod outbound;
pub mod sdk_http;
pub mod signing;
pub mod sqs;
pub mod telemetry;
pub mod validate;
pub mod zone;
// 2. data
pub mod store;
// 3. events
pub mod events;
// 4. request mechanisms
pub mod auth;
pub mod config;
pub mod idempotency;
pub mod oauth;
pub mod oidc;
pub mod ratelimit;
// 5. container state
pub mod app;
pub mod links;
// 6. built on App
pub mod approvals;
pub mod authority;
pub mod confirmation;
pub mod outbox;
pub mod request;
pub mod worker;
// 7. serving
pub mod http;
pub mod lambda;
pub mod openapi;
pub mod routing;
pub mod web;

pub use app::App;
pub use error::{ApiError, ApiResult};
pub use request::{Reply, Req, WsReq};

/// Used by the `area!` macro so area crates need no extra dependencies.
pub mod reexports {
    pub use futures_util::future::BoxFuture;
    pub use http;
    pub use paste;
    pub use utoipa;
}
