//! Pieces of the OpenAPI document every area shares: the envelopes, the error responses and
//! the security schemes (API key; OAuth token + x-workspace-id; portal session). `tools/src/bin/openapi.rs` merges them with each area's paths.

use crate::error::{ErrorBody, ErrorCode, ErrorDetail, ErrorEnvelope};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, ToSchema};

/// `{"data": T}`
#[derive(ToSchema)]
pub struct Data<T: ToSchema> {
    pub data: T,
}

/// `{"data": [T], "has_more": bool, "next_cursor": string|null}`
#[derive(ToSchema)]
pub struct ListOf<T: ToSchema> {
    pub data: Vec<T>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

/// `{"data": {"id", "object", "deleted": true}}`
#[derive(ToSchema)]
pub struct Deleted {
    pub id: String,
    pub object: String,
    pub deleted: bool,
}

/// Errors any authenticated route can answer.
#[derive(utoipa::IntoResponses)]
pub enum CommonErrors {
    /// Malformed JSON, invalid fields or cursor (VALIDATION_ERROR, INVALID_CURSOR)
    #[response(status = 400)]
    BadRequest(ErrorEnvelope),
    /// Authorization header missing or invalid
    #[response(status = 401)]
    Unauthorized(ErrorEnvelope),
    /// Valid credentials without access (no membership, missing scope, revoked key)
    #[response(status = 403)]
    Forbidden(ErrorEnvelope),
    /// No such route or object in this workspace
    #[response(status = 404)]
    NotFound(ErrorEnvelope),
    /// Rate limit exceeded; see Retry-After
    #[response(status = 429)]
    RateLimited(ErrorEnvelope),
    /// Internal error
    #[response(status = 500)]
    Internal(ErrorEnvelope),
    /// A dependency is unavailable
    #[response(status = 503)]
    Unavailable(ErrorEnvelope),
}

/// The paging parameters of every list: `limit` and `cursor`.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // only its contract is used; `Req::page` parses the values
pub struct PageParams {
    /// Items per page, default 50.
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u32>,
    /// `next_cursor` of the previous page, unchanged.
    #[param(min_length = 1)]
    cursor: Option<String>,
}

/// Further errors of write routes.
#[derive(utoipa::IntoResponses)]
pub enum WriteErrors {
    /// Uniqueness or state conflict, stale version, idempotent request in flight
    #[response(status = 409)]
    Conflict(ErrorEnvelope),
    /// Body above 1 MiB
    #[response(status = 413)]
    PayloadTooLarge(ErrorEnvelope),
    /// Body that is not JSON
    #[response(status = 415)]
    UnsupportedMediaType(ErrorEnvelope),
    /// Idempotency-Key reused with a different request
    #[response(status = 422)]
    IdempotencyKeyReused(ErrorEnvelope),
}

pub struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        // Two credentials share the Authorization header: an API key alone, or an OAuth
        // access token together with the workspace it acts in (x-workspace-id).
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("wsp_...")
                    .description(Some(
                        "An API key (wsp_ followed by 40+ base62 characters), scoped to one workspace; shown once at creation",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "oauth",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "An OAuth access token (RS256 or ES256 JWT) from the deployment's issuer (OAUTH_ISSUER, OAUTH_AUDIENCE); always together with x-workspace-id, and the token's subject must be a member of that workspace",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "workspace_id",
            SecurityScheme::ApiKey(utoipa::openapi::security::ApiKey::Header(utoipa::openapi::security::ApiKeyValue::with_description(
                "x-workspace-id",
                "The workspace (ws_...) an OAuth access token acts in",
            ))),
        );
        components.add_security_scheme(
            "portal_session",
            SecurityScheme::ApiKey(utoipa::openapi::security::ApiKey::Header(utoipa::openapi::security::ApiKeyValue::with_description(
                "X-Portal-Session",
                "A customer's portal session (pss_...), from POST /portal/sessions/exchange",
            ))),
        );
        // No operation answers 405 for its own method, so the answer to an undeclared method
        // on a declared path is stated once, as a reusable response.
        components.responses.insert(
            "MethodNotAllowed".into(),
            utoipa::openapi::RefOr::T(
                utoipa::openapi::ResponseBuilder::new()
                    .description("The path exists but not with this method (METHOD_NOT_ALLOWED); the Allow header lists the methods it has")
                    .header(
                        "Allow",
                        utoipa::openapi::HeaderBuilder::new()
                            .schema(Some(utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::Type::String)))
                            .build(),
                    )
                    .content(
                        "application/json",
                        utoipa::openapi::ContentBuilder::new()
                            .schema(Some(utoipa::openapi::Ref::from_schema_name("ErrorEnvelope")))
                            .build(),
                    )
                    .build(),
            ),
        );
    }
}

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Workspace Platform API",
        version = "1.0.0",
        description = "Multi-tenant workspace platform. JSON in, JSON out; errors use one envelope (an undeclared method on a declared path is 405 METHOD_NOT_ALLOWED with Allow; see components.responses); lists are cursor-paginated; writes accept Idempotency-Key."
    ),
    servers((url = "{base_url}", description = "Your deployment: the API Gateway stage URL followed by /api/v1",
        variables(("base_url" = (default = "http://127.0.0.1:3000/api/v1", description = "https://<api-id>.execute-api.<region>.amazonaws.com/api/v1 once deployed; make dev serves http://127.0.0.1:3000/api/v1"))))),
    components(schemas(ErrorEnvelope, ErrorBody, ErrorCode, ErrorDetail, Deleted)),
    modifiers(&BearerAuth),
    security(("api_key" = []), ("oauth" = [], "workspace_id" = []))
)]
pub struct BaseDoc;
