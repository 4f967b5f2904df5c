//! The project's common crate: every mechanism two areas need lives here once.

pub mod app;
pub mod auth;
pub mod config;
pub mod crypto;
pub mod cursor;
pub mod error;
pub mod events;
pub mod http;
pub mod idempotency;
pub mod ids;
pub mod keys;
pub mod lambda;
pub mod metrics;
pub mod openapi;
pub mod outbound;
pub mod ratelimit;
pub mod routing;
pub mod signing;
pub mod sqs;
pub mod store;
pub mod telemetry;
pub mod validate;
pub mod worker;

pub use app::App;
pub use error::{ApiError, ApiResult};
pub use http::{Reply, Req};

/// Used by the `area!` macro so area crates need no extra dependencies.
pub mod reexports {
    pub use futures_util::future::BoxFuture;
    pub use http;
    pub use paste;
}
