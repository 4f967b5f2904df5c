//! The protocol side: rmcp's Streamable HTTP service (stateless, JSON answers) around a
//! handler that lists the catalog, calls tools and serves the resources.

use crate::Caller;
use crate::catalog::{AWAIT_APPROVAL, catalog};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use std::sync::{Arc, OnceLock};

pub fn service() -> &'static StreamableHttpService<Server, NeverSessionManager> {
    static SERVICE: OnceLock<StreamableHttpService<Server, NeverSessionManager>> = OnceLock::new();
    SERVICE.get_or_init(|| {
        let mut config = StreamableHttpServerConfig::default().disable_allowed_hosts();
        // No sessions: any container answers any request (protocol 2026-07-28 has none, and
        // older clients' requests are served one by one).
        config.legacy_session_mode = false;
        config.json_response = true;
        // Host checks guard a server on a developer's machine against DNS rebinding; this one
        // is reached through API Gateway, which routes by host, and a bearer credential is
        // never ambient, so a page that rebinds a name gets nothing.
        StreamableHttpService::new(|| Ok(Server), Arc::new(NeverSessionManager::default()), config)
    })
}

pub struct Server;

/// The resources: the contract and the pages an agent needs to act well.
const RESOURCES: [(&str, &str, &str, &str); 4] = [
    ("workspace-platform://openapi.json", "openapi", "application/json", include_str!("../../../openapi/openapi.json")),
    ("workspace-platform://docs/api.md", "conventions", "text/markdown", include_str!("../../../docs/api.md")),
    ("workspace-platform://docs/authority.md", "effects-and-approvals", "text/markdown", include_str!("../../../docs/authority.md")),
    ("workspace-platform://docs/agents.md", "agents", "text/markdown", include_str!("../../../docs/agents.md")),
];

fn caller(ctx: &RequestContext<RoleServer>) -> Result<&Caller, McpError> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<Caller>())
        .ok_or_else(|| McpError::internal_error("the request's credential is missing", None))
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_resources().build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("workspace-platform", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Every tool is an operation of the workspace platform's REST API, run with your credential. Writes are \
                 idempotent per call: the same tool with the same arguments runs once. A write that reaches an effect \
                 (an email, a post, an erasure, a credential) may wait for a person: the result then names an approval \
                 request and its approval_url; once approved, repeat the call unchanged (or use await_approval first).",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let cursor = request.and_then(|r| r.cursor);
        let (tools, next) =
            catalog().page(cursor.as_deref()).ok_or_else(|| McpError::invalid_params("the cursor is not one this server gave", None))?;
        let mut page = ListToolsResult::with_all_items(tools.to_vec());
        page.next_cursor = next;
        Ok(page)
    }

    async fn call_tool(&self, request: CallToolRequestParams, ctx: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        let caller = caller(&ctx)?;
        let args = request.arguments.unwrap_or_default();
        if request.name == AWAIT_APPROVAL {
            return crate::call::await_approval(caller, args).await.map(Into::into);
        }
        let op = catalog().operation(&request.name).ok_or_else(|| McpError::invalid_params(format!("no tool `{}`", request.name), None))?;
        // Declared on this request (2026-07-28), or at `initialize` as the session id carries it.
        let url_elicitation =
            caller.url_elicitation || ctx.client_capabilities().and_then(|c| c.elicitation).is_some_and(|e| e.url.is_some());
        crate::call::run(caller, op, args, url_elicitation).await.map(Into::into)
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let resources = RESOURCES
            .iter()
            .map(|(uri, name, mime, text)| {
                let mut r = Resource::new(*uri, *name);
                r.mime_type = Some((*mime).to_string());
                r.size = Some(text.len() as u64);
                r
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let (uri, _, mime, text) = RESOURCES
            .iter()
            .find(|(uri, ..)| *uri == request.uri)
            .ok_or_else(|| McpError::resource_not_found(format!("no resource {}", request.uri), None))?;
        let contents = ResourceContents::text(*text, *uri).with_mime_type(*mime);
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}
