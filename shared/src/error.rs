//! The error envelope of docs/api.md: every failure, however it arises, leaves as
//! `{"error": {"code", "message", "details", "request_id"}}` with the documented status.

use http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

/// Every error code of the contract. The status is a function of the code, so the two can never disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    ValidationError,
    InvalidCursor,
    Conflict,
    IdempotencyKeyReused,
    PayloadTooLarge,
    UnsupportedMediaType,
    ConfirmationRequired,
    RateLimited,
    Internal,
    Unavailable,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 14] = [
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::ValidationError,
        Self::InvalidCursor,
        Self::Conflict,
        Self::IdempotencyKeyReused,
        Self::PayloadTooLarge,
        Self::UnsupportedMediaType,
        Self::ConfirmationRequired,
        Self::RateLimited,
        Self::Internal,
        Self::Unavailable,
    ];

    pub fn status(self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::ValidationError | Self::InvalidCursor => StatusCode::BAD_REQUEST,
            Self::Conflict => StatusCode::CONFLICT,
            Self::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::ConfirmationRequired => StatusCode::PRECONDITION_REQUIRED,
            Self::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unauthorized => "UNAUTHORIZED",
            Self::Forbidden => "FORBIDDEN",
            Self::NotFound => "NOT_FOUND",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::ValidationError => "VALIDATION_ERROR",
            Self::InvalidCursor => "INVALID_CURSOR",
            Self::Conflict => "CONFLICT",
            Self::IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
            Self::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            Self::UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            Self::ConfirmationRequired => "CONFIRMATION_REQUIRED",
            Self::RateLimited => "RATE_LIMITED",
            Self::Internal => "INTERNAL",
            Self::Unavailable => "UNAVAILABLE",
        }
    }
}

/// One entry of `details`: which field, what is wrong with it (or other structured context).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorDetail {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
    /// Extra machine-readable context, e.g. the id of the object a conflict is with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<serde_json::Value>,
}

impl ErrorDetail {
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: Some(field.into()), message: message.into(), meta: None }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Vec<ErrorDetail>,
    /// Extra headers (Allow, Retry-After).
    pub headers: Vec<(&'static str, String)>,
    /// What went wrong inside, for the log (an internal or unavailable error): never answered.
    /// The error is logged once, with it, where it is answered ([`ApiError::log`]: the API's
    /// pipeline, the pages) or by the worker that meets it (its `Display`), not where it is made.
    pub cause: Option<String>,
    /// Where it was made (`#[track_caller]`: the line that called [`ApiError::internal`] or
    /// [`ApiError::unavailable`]; call them in a closure, not as a path, to keep it).
    pub at: Option<&'static std::panic::Location<'static>>,
    /// The value of the effect a 428 refused (`crate::authority::Grant::authorize_value`), for
    /// the approval request the pipeline records: never answered.
    pub effect: Option<Box<crate::effect_value::Shown>>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), details: Vec::new(), headers: Vec::new(), cause: None, at: None, effect: None }
    }
    pub fn with_details(mut self, details: Vec<ErrorDetail>) -> Self {
        self.details = details;
        self
    }
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
    /// The same error with its field names under `parent` (`text_shown` -> `consent.text_shown`).
    pub fn prefixed(mut self, parent: &str) -> Self {
        for d in &mut self.details {
            d.field = Some(match d.field.take() {
                Some(f) => format!("{parent}.{f}"),
                None => parent.to_string(),
            });
        }
        self
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }
    pub fn not_found(what: &str) -> Self {
        Self::new(ErrorCode::NotFound, format!("no such {what} in this workspace"))
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
    pub fn validation(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(ErrorCode::ValidationError, format!("{field}: {message}")).with_details(vec![ErrorDetail::field(field, message)])
    }
    pub fn invalid_cursor() -> Self {
        Self::new(ErrorCode::InvalidCursor, "the cursor is malformed, was tampered with, or belongs to another list")
    }
    /// A bug or an unexpected dependency answer: the cause is kept for the log, never returned.
    #[track_caller]
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::Internal, "an internal error occurred; the request id identifies it in our logs").caused(cause)
    }
    #[track_caller]
    pub fn unavailable(cause: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::Unavailable, "a dependency is temporarily unavailable; retry shortly")
            .with_header("retry-after", "1")
            .caused(cause)
    }
    #[track_caller]
    fn caused(mut self, cause: impl std::fmt::Display) -> Self {
        self.cause = Some(cause.to_string());
        self.at = Some(std::panic::Location::caller());
        self
    }

    /// Log an error that is being answered, once: a server error with its cause and where it
    /// was made; a client's error is the client's and is not logged.
    pub fn log(&self) {
        if self.status().is_server_error() {
            let at = self.at.map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
            tracing::error!(code = self.code.as_str(), error = self.cause.as_deref().unwrap_or(&self.message), at = %at, "request failed");
        }
    }

    pub fn status(&self) -> StatusCode {
        self.code.status()
    }

    pub fn body(&self, request_id: &str) -> serde_json::Value {
        serde_json::json!({
            "error": {
                "code": self.code,
                "message": self.message,
                "details": self.details,
                "request_id": request_id,
            }
        })
    }
}

/// The code and message, and for an internal or unavailable error its cause and where it was
/// made: what a log line needs (the answer's body carries the message alone).
impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.cause, self.at) {
            (Some(cause), Some(at)) => write!(f, "{}: {cause} (at {}:{})", self.code.as_str(), at.file(), at.line()),
            (Some(cause), None) => write!(f, "{}: {cause}", self.code.as_str()),
            _ => write!(f, "{}: {}", self.code.as_str(), self.message),
        }
    }
}

/// The envelope as documented in OpenAPI.
#[derive(Serialize, ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    pub details: Vec<ErrorDetail>,
    pub request_id: String,
}

#[cfg(test)]
mod tests {
    /// The cause stays out of the answer and in the log line, with the line that made it.
    #[test]
    fn an_internal_error_keeps_its_cause_and_where_it_was_made_for_the_log() {
        let line = line!() + 1;
        let e: Result<(), _> = Err("disk on fire").map_err(|c| ApiError::internal(c));
        let e = e.unwrap_err();
        assert!(!e.body("r").to_string().contains("disk on fire"), "never answered");
        assert_eq!(e.at.map(|l| (l.file(), l.line())), Some((file!(), line)));
        assert_eq!(e.to_string(), format!("INTERNAL: disk on fire (at {}:{line})", file!()));
        assert_eq!(ApiError::not_found("x").to_string(), "NOT_FOUND: no such x in this workspace");
    }

    use super::*;

    #[test]
    fn every_code_has_its_documented_status_and_name() {
        let table = [
            ("UNAUTHORIZED", 401),
            ("FORBIDDEN", 403),
            ("NOT_FOUND", 404),
            ("METHOD_NOT_ALLOWED", 405),
            ("VALIDATION_ERROR", 400),
            ("INVALID_CURSOR", 400),
            ("CONFLICT", 409),
            ("IDEMPOTENCY_KEY_REUSED", 422),
            ("PAYLOAD_TOO_LARGE", 413),
            ("UNSUPPORTED_MEDIA_TYPE", 415),
            ("CONFIRMATION_REQUIRED", 428),
            ("RATE_LIMITED", 429),
            ("INTERNAL", 500),
            ("UNAVAILABLE", 503),
        ];
        for (code, (name, status)) in ErrorCode::ALL.iter().zip(table) {
            assert_eq!(code.as_str(), name);
            assert_eq!(code.status().as_u16(), status, "{name}");
            assert_eq!(serde_json::to_value(code).unwrap(), name);
        }
    }

    #[test]
    fn body_has_the_envelope_shape() {
        let e = ApiError::validation("name", "must not be empty");
        let b = e.body("req_1");
        assert_eq!(b["error"]["code"], "VALIDATION_ERROR");
        assert_eq!(b["error"]["request_id"], "req_1");
        assert_eq!(b["error"]["details"][0]["field"], "name");
        assert!(b["error"]["details"][0].get("meta").is_none());
    }

    #[test]
    fn internal_never_leaks_the_cause() {
        let e = ApiError::internal("dynamodb: secret table name xyz");
        assert!(!e.message.contains("xyz"));
        assert_eq!(e.status(), 500);
    }
}
