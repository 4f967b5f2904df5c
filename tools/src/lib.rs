//! Local-only tooling: the emulators, the admin operations, the dev gateway, and `DevStack`,
//! which puts them together for `make dev` and for the end-to-end tests.

pub mod admin;
pub mod contract_diff;
pub mod event_types;
pub mod gateway;
pub mod iam;
pub mod localstack;
pub mod mcp_tools;
pub mod oidc;
pub mod pds;
pub mod runtime_api;
pub mod rust_client;
pub mod sites;
pub mod stack;
pub mod worker;

use admin::{Names, Resources};
use localstack::LocalStack;
use shared::App;
use shared::config::Config;
use std::path::Path;
use std::sync::Arc;

pub struct DevStack {
    pub emulators: LocalStack,
    pub resources: Resources,
    pub sdk: aws_config::SdkConfig,
    pub ddb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    /// The gateway's App, for operations with no HTTP route (create workspace, add member).
    pub app: Arc<App>,
    /// `http://127.0.0.1:<port>/api/v1`
    pub base_url: String,
    /// Gateways and workers, aborted by `stop`.
    gateways: Vec<tokio::task::JoinHandle<()>>,
    /// The configuration its functions run with ([`DevStack::config`]).
    cfg: Config,
}

impl DevStack {
    /// Start the emulators, bootstrap, and serve the API on `port` (0 = any free port).
    pub async fn start(log_dir: &Path, port: u16) -> Result<Self, String> {
        Self::start_with(log_dir, port, |_| {}).await
    }

    /// [`DevStack::start`], with the configuration adjusted (tests: limits, caches).
    pub async fn start_with(log_dir: &Path, port: u16, adjust: impl FnOnce(&mut Config)) -> Result<Self, String> {
        let emulators = LocalStack::start(log_dir).await?;
        let sdk = admin::local_sdk_config(&emulators.moto_endpoint).await;
        let ddb = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&sdk).endpoint_url(&emulators.dynamodb_endpoint).build(),
        );
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let sm = aws_sdk_secretsmanager::Client::new(&sdk);
        let aws = shared::aws::Aws::new(&sdk);
        let resources = admin::bootstrap(&ddb, &sqs, &sm, aws.s3(), &Names::default()).await?;
        let mut cfg = admin::local_config(&resources)?;
        let listener = gateway::bind(port).await?;
        // The portal's pages email links to this gateway.
        cfg.portal_pages_url = Some(format!("http://{}", listener.local_addr().map_err(|e| e.to_string())?));
        adjust(&mut cfg);
        let app = Arc::new(App::with_dynamodb_endpoint(cfg.clone(), &sdk, Some(&emulators.dynamodb_endpoint))?);
        let mut stack = Self { emulators, resources, sdk, ddb, sqs, app: app.clone(), base_url: String::new(), gateways: vec![], cfg };
        let (addr, task) = gateway::serve(listener, app)?;
        stack.gateways.push(task);
        stack.base_url = format!("http://{addr}{}", gateway::BASE_PATH);
        Ok(stack)
    }

    /// The configuration the functions run with here.
    pub fn config(&self) -> Config {
        self.cfg.clone()
    }

    /// An App for this stack with the given configuration (a new "container").
    pub fn new_app(&self, cfg: Config) -> Result<App, String> {
        App::with_dynamodb_endpoint(cfg, &self.sdk, Some(&self.emulators.dynamodb_endpoint))
    }

    /// Another gateway with its own App: a second "container" with its own caches, sharing the
    /// same table and queues. Returns its base URL.
    pub async fn extra_gateway(&mut self, cfg: Config) -> Result<String, String> {
        let app = self.new_app(cfg)?;
        self.gateway_for(app).await
    }

    pub async fn gateway_for(&mut self, app: App) -> Result<String, String> {
        let (addr, task) = gateway::start(Arc::new(app), 0).await?;
        self.gateways.push(task);
        Ok(format!("http://{addr}{}", gateway::BASE_PATH))
    }

    /// The event source mappings and schedules of the queue-driven functions: the dispatcher
    /// (events and deliveries queues, outbox sweep every `sweep_every`), the contact import
    /// worker, the GDPR worker, the helpdesk's inbound mail (queue, snooze tick every
    /// `sweep_every`), the email sender (emails and feedback queues, tick every
    /// `sweep_every`), and the publisher (publish queue, tick every `sweep_every`).
    pub fn start_worker(&mut self, cfg: Config, sweep_every: std::time::Duration) -> Result<(), String> {
        let d = Arc::new(domain::webhooks::dispatch::Dispatcher::new(self.new_app(cfg.clone())?)?);
        // The local event source mappings poll with the SDK (ReceiveMessage, DeleteMessage).
        let sqs = self.sqs.clone();
        let dispatch: worker::Handler = {
            let d = d.clone();
            Arc::new(move |ev| {
                let d = d.clone();
                Box::pin(shared::metrics::as_function("dispatcher", async move { d.handle_sqs(ev).await }))
            })
        };
        self.gateways.push(worker::poll(sqs.clone(), self.resources.events_queue_url.clone(), dispatch.clone()));
        self.gateways.push(worker::poll(sqs.clone(), self.resources.deliveries_queue_url.clone(), dispatch));
        self.gateways.push(worker::sweep(d, sweep_every));
        let importer = Arc::new(self.new_app(cfg.clone())?);
        let import: worker::Handler = Arc::new(move |ev| {
            let app = importer.clone();
            Box::pin(shared::metrics::as_function("contact-import", async move { domain::contacts::import::handle_sqs(&app, ev).await }))
        });
        self.gateways.push(worker::poll(sqs.clone(), self.resources.contact_imports_queue_url.clone(), import));
        let gdpr_app = Arc::new(self.new_app(cfg.clone())?);
        let gdpr: worker::Handler = Arc::new(move |ev| {
            let app = gdpr_app.clone();
            Box::pin(shared::metrics::as_function("gdpr-worker", async move { domain::gdpr::worker::handle_sqs(&app, ev).await }))
        });
        self.gateways.push(worker::poll(sqs.clone(), self.resources.gdpr_queue_url.clone(), gdpr));
        let scanner_app = Arc::new(self.new_app(cfg.clone())?);
        let scan: worker::Handler = Arc::new(move |ev| {
            let app = scanner_app.clone();
            Box::pin(shared::metrics::as_function("scanner", async move { domain::scans::scanner::handle_sqs(&app, ev).await }))
        });
        self.gateways.push(worker::poll(sqs.clone(), self.resources.scans_queue_url.clone(), scan));
        let helpdesk_app = Arc::new(self.new_app(cfg.clone())?);
        let inbound: worker::Handler = {
            let app = helpdesk_app.clone();
            Arc::new(move |ev| {
                let app = app.clone();
                Box::pin(shared::metrics::as_function("inbound-mail", async move { domain::helpdesk::mail::handle_sqs(&app, ev).await }))
            })
        };
        self.gateways.push(worker::poll(sqs.clone(), self.resources.inbound_mail_queue_url.clone(), inbound));
        self.gateways.push(worker::tick("helpdesk snooze tick", sweep_every, move || {
            let app = helpdesk_app.clone();
            Box::pin(shared::metrics::as_function("inbound-mail", async move {
                domain::helpdesk::snooze::tick(&app).await.map(|_| ()).map_err(|e| e.to_string())
            }))
        }));
        let sender = Arc::new(domain::sending::Sender::new(self.new_app(cfg.clone())?));
        let send: worker::Handler = {
            let sender = sender.clone();
            Arc::new(move |ev| {
                let sender = sender.clone();
                Box::pin(shared::metrics::as_function("email-sender", async move { sender.handle_sqs(ev).await }))
            })
        };
        self.gateways.push(worker::poll(sqs.clone(), self.resources.emails_queue_url.clone(), send.clone()));
        self.gateways.push(worker::poll(sqs.clone(), self.resources.email_feedback_queue_url.clone(), send));
        let publisher = Arc::new(domain::publishing::Publisher::new(self.new_app(cfg)?)?);
        let publish: worker::Handler = {
            let p = publisher.clone();
            Arc::new(move |ev| {
                let p = p.clone();
                Box::pin(shared::metrics::as_function("publisher", async move { p.handle_sqs(ev).await }))
            })
        };
        self.gateways.push(worker::poll(sqs, self.resources.publish_queue_url.clone(), publish));
        self.gateways.push(worker::tick("publish tick", sweep_every, move || {
            let p = publisher.clone();
            Box::pin(shared::metrics::as_function("publisher", async move { p.tick().await.map(|_| ()).map_err(|e| e.to_string()) }))
        }));
        self.gateways.push(worker::tick("email tick", sweep_every, move || {
            let sender = sender.clone();
            Box::pin(shared::metrics::as_function("email-sender", async move {
                domain::sending::tick::tick(&sender).await.map(|_| ()).map_err(|e| e.to_string())
            }))
        }));
        Ok(())
    }

    /// The environment the Lambda binaries and the admin CLI need to reach this stack.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("API_BASE_URL", self.base_url.clone()),
            ("PORTAL_PAGES_URL", self.cfg.portal_pages_url.clone().unwrap_or_default()),
            ("AWS_ENDPOINT_URL", self.emulators.moto_endpoint.clone()),
            ("AWS_ENDPOINT_URL_DYNAMODB", self.emulators.dynamodb_endpoint.clone()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "local".into()),
            ("AWS_SECRET_ACCESS_KEY", "local".into()),
            ("TABLE_NAME", self.resources.table.clone()),
            ("EVENTS_QUEUE_URL", self.resources.events_queue_url.clone()),
            ("DELIVERIES_QUEUE_URL", self.resources.deliveries_queue_url.clone()),
            ("CONTACT_IMPORTS_QUEUE_URL", self.resources.contact_imports_queue_url.clone()),
            ("EMAILS_QUEUE_URL", self.resources.emails_queue_url.clone()),
            ("PUBLISH_QUEUE_URL", self.resources.publish_queue_url.clone()),
            ("GDPR_QUEUE_URL", self.resources.gdpr_queue_url.clone()),
            ("SCANS_QUEUE_URL", self.resources.scans_queue_url.clone()),
            ("EXPORTS_BUCKET", self.resources.exports_bucket.clone()),
            ("MAIL_BUCKET", self.resources.mail_bucket.clone()),
            ("INBOUND_MAIL_QUEUE_URL", self.resources.inbound_mail_queue_url.clone()),
            ("WEBHOOK_ALLOW_LOOPBACK", "true".into()),
            ("PLATFORM_SECRET_ID", self.resources.secret_id.clone()),
        ]
        .into_iter()
        .chain(self.oauth_env())
        .collect()
    }

    /// The OAuth variables: the hand-made development JWKS, or (`make dev`) its OpenID provider.
    fn oauth_env(&self) -> Vec<(&'static str, String)> {
        let Some(o) = &self.cfg.oauth else { return vec![] };
        let mut env = vec![("OAUTH_ISSUER", o.issuer.clone()), ("OAUTH_AUDIENCE", o.audience.clone())];
        if let shared::config::JwksSource::Document(_) = o.jwks {
            env.push(("OAUTH_JWKS_FILE", localstack::repo_root().join("tools/dev-keys/oauth-dev-jwks.json").display().to_string()));
        }
        if let Some(client) = &o.pages_client_id {
            env.push(("OAUTH_PAGES_CLIENT_ID", client.clone()));
        }
        env.push(("OAUTH_APPROVER_CLIENT_IDS", o.approver_clients.join(",")));
        env.push(("OAUTH_APPROVER_MAX_AUTH_AGE_SECS", o.approver_max_auth_age_secs.to_string()));
        env
    }

    /// This stack's outputs, as `sam list stack-outputs --output json` prints a deployed
    /// stack's: what the admin CLI's `--outputs` reads.
    pub fn outputs_json(&self) -> String {
        admin::outputs_json(&self.env())
    }

    pub async fn stop(self) {
        for g in &self.gateways {
            g.abort();
        }
        self.emulators.stop().await;
    }
}

/// `cargo` as a user's shell runs it, from inside a process cargo started (`cargo run`, a
/// test). Cargo sets `CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR` and the like for that process,
/// and build scripts that declare them with `rerun-if-env-changed` (ring's does) would see
/// them change: ring, and everything above it, rebuilt (1.5 min of a fresh `make test`).
pub fn cargo() -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    as_a_user_shell(&mut cmd);
    cmd
}

const CRATE_ENV: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "OUT_DIR",
];

/// Remove the variables cargo sets for a running crate from `cmd`'s environment.
pub fn as_a_user_shell(cmd: &mut std::process::Command) {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_") || CRATE_ENV.contains(&name.as_ref()) {
            cmd.env_remove(name.as_ref());
        }
    }
}

/// Every function the template deploys, by binary name: the crates under `functions/`, which
/// are the workspace's function members and the Makefile's `FUNCTIONS` (`make package`, `make
/// bench`); `tools/tests/template.rs` checks them against the binaries and template.yaml.
pub fn functions() -> Vec<String> {
    stack::functions(&localstack::repo_root()).unwrap_or_else(|e| panic!("{e}")).into_iter().map(|f| f.folder).collect()
}

/// `capability-confirmations`, `send_email` -> `CapabilityConfirmations`, `SendEmail`: a name's
/// words joined, each capitalised (generated Rust types, the template's resource names).
pub(crate) fn camel(s: &str) -> String {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// The OAuth subject `make dev` makes owner of its demo workspace, for
/// `admin mint-token --subject dev-user`.
pub const DEV_USER: &str = "dev-user";

/// The demo workspace's verified sending domain (one workspace per stack can own it).
pub const DEMO_SENDING_DOMAIN: &str = "example.com";

/// The demo workspace of `make dev` (and of the tour's test, tests/tests/tour.rs): a workspace with an API
/// key, and `DEV_USER` as its owner so that development access tokens reach it. Returns the
/// workspace id and the key.
pub async fn demo_workspace(app: &App) -> Result<(String, String), String> {
    let (ws, key) = domain::workspaces::create_workspace(app, "Demo workspace").await.map_err(|e| e.to_string())?;
    domain::workspaces::add_member(app, &ws.id, DEV_USER, "owner").await.map_err(|e| e.to_string())?;
    // moto verifies an identity as soon as it exists: reading the domain once makes it
    // `verified`, so the demo can send from example.com at once.
    use domain::emails::domains;
    let d = domains::create(
        &shared::authority::Grant::operator("dev", &[<domain::effects::CreateSendingDomain as shared::authority::Effect>::INFO]),
        app,
        &ws.id,
        DEMO_SENDING_DOMAIN,
    )
    .await
    .map_err(|e| format!("sending domain {DEMO_SENDING_DOMAIN}: {e}"))?;
    domains::refresh(app, &ws.id, d, 2).await.map_err(|e| e.to_string())?;
    Ok((ws.id.to_string(), key))
}

/// Start the local PDS, make `platformdemo.test` with an app password, connect it to the demo
/// workspace over the API; answers the PDS and the lines for dev.env.
pub async fn demo_bluesky(base: &str, key: &str) -> Result<(crate::pds::LocalPds, String), String> {
    let pds = crate::pds::LocalPds::start().await?;
    let a = pds.account("platformdemo").await?;
    let body = serde_json::json!({"type": "bluesky", "name": "demo", "credentials": {"handle": a.handle, "app_password": a.app_password, "service_url": pds.url}});
    let r = reqwest::Client::new().post(format!("{base}/channels")).bearer_auth(key).json(&body).send().await.map_err(|e| e.to_string())?;
    let v: serde_json::Value = r.json().await.map_err(|e| e.to_string())?;
    let id = v["data"]["id"].as_str().ok_or_else(|| format!("connecting the demo channel: {v}"))?.to_string();
    let lines = format!("BLUESKY_PDS_URL={}\nBLUESKY_HANDLE={}\nBLUESKY_DID={}\nBLUESKY_CHANNEL_ID={id}\n", pds.url, a.handle, a.did);
    Ok((pds, lines))
}

/// The text of `.local/dev.env`: a stack's environment (`DevStack::env`) and the demo
/// workspace's `API_KEY` and `WORKSPACE_ID`, one `NAME=value` a line.
pub fn dev_env_file(stack_env: &[(&str, String)], workspace_id: &str, api_key: &str) -> String {
    let demo = [("API_KEY", api_key), ("WORKSPACE_ID", workspace_id)];
    stack_env.iter().map(|(k, v)| (*k, v.as_str())).chain(demo).map(|(k, v)| format!("{k}={v}\n")).collect()
}

/// An API area as the tools see it: its function's binary name, its routes and its part of
/// the contract.
pub struct Area {
    pub name: &'static str,
    pub routes: fn() -> &'static [shared::routing::Route],
    pub doc: fn() -> utoipa::openapi::OpenApi,
}

/// The one list of API areas (each a crate under `functions/` declaring `shared::area!`): the
/// dev gateway's routes, the contract and the template's checks read it; the workspace takes
/// every crate under `functions/`, the Makefile's `FUNCTIONS` every folder there, and
/// `tools/tests/template.rs` fails when a crate declaring an area is missing here.
macro_rules! api_areas {
    ($($area:ident),* $(,)?) => {
        pub fn api_areas() -> Vec<Area> {
            vec![$(Area { name: stringify!($area), routes: $area::routes, doc: <$area::ApiDoc as utoipa::OpenApi>::openapi }),*]
        }
    };
}
// BEGIN generated from the crates of functions/ declaring `shared::area!` (`make generate`).
api_areas!(bookings, capabilities, channels, contacts, deals, emails, gdpr, helpdesk, portal, posts, scans, webhooks, workspaces);
// END generated

/// Every area's part of the contract, by area.
pub fn area_docs() -> Vec<(&'static str, utoipa::openapi::OpenApi)> {
    api_areas().into_iter().map(|a| (a.name, (a.doc)())).collect()
}

/// The whole contract: shared pieces plus every area's paths, as generated from the code.
pub fn openapi_doc() -> serde_json::Value {
    use utoipa::OpenApi;
    let mut doc = shared::openapi::BaseDoc::openapi();
    for (_, area) in area_docs() {
        doc.merge(area);
    }
    // The contract's reading order (a documentation's sections); an area it does not name follows
    // in the order of the areas.
    const READING_ORDER: &[&str] = &[
        "workspaces",
        "posts",
        "channels",
        "bookings",
        "webhooks",
        "contacts",
        "deals",
        "emails",
        "gdpr",
        "portal",
        "helpdesk",
        "capabilities",
        "scans",
    ];
    if let Some(tags) = doc.tags.as_mut() {
        tags.sort_by_key(|t| READING_ORDER.iter().position(|n| *n == t.name).unwrap_or(READING_ORDER.len()));
    }
    annotate_access(&mut doc);
    finish(doc)
}

/// Request-body examples by operationId: documentation, kept beside the generator. Every key
/// must name an operation with a JSON body and every such operation must have one (checked
/// below); redocly validates each against its schema in `make test`, and schemathesis sends
/// them to the running API in its examples phase.
fn request_examples() -> serde_json::Map<String, serde_json::Value> {
    let path = localstack::repo_root().join("tools/src/request_examples.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not a JSON object: {e}", path.display()))
}

/// What the annotations cannot say, applied to the whole document:
/// - `{"data": T}` and list envelopes refer to T's component instead of repeating it inline,
///   so generated client types name `Post` rather than an anonymous object;
/// - every response has a description (OpenAPI requires one; utoipa leaves 2xx without);
/// - every JSON request body carries its example.
fn finish(doc: utoipa::openapi::OpenApi) -> serde_json::Value {
    let mut v = serde_json::to_value(&doc).expect("the document serializes");
    inline_scalars(&mut v);
    let schemas = v["components"]["schemas"].as_object().cloned().expect("components.schemas");
    for (name, schema) in v["components"]["schemas"].as_object_mut().expect("components.schemas") {
        let (inner, at) = match (name.strip_prefix("Data_"), name.strip_prefix("ListOf_")) {
            (Some(t), _) => (t, "/properties/data"),
            (_, Some(t)) => (t, "/properties/data/items"),
            _ => continue,
        };
        if let (Some(component), Some(slot)) = (schemas.get(inner), schema.pointer_mut(at)) {
            // Only an exact copy is replaced: a wrapper of anything else keeps its own schema.
            if slot == component {
                *slot = serde_json::json!({"$ref": format!("#/components/schemas/{inner}")});
            }
        }
    }
    let mut examples = request_examples();
    for (path, item) in v["paths"].as_object_mut().expect("paths") {
        for (method, op) in item.as_object_mut().expect("path item") {
            let Some(op) = op.as_object_mut() else { continue };
            // An empty query value is refused (400 naming it), never read as "no filter": the
            // contract says so, so generated clients leave an unset filter out.
            for p in op.get_mut("parameters").and_then(|p| p.as_array_mut()).into_iter().flatten() {
                if p["in"] == "query" && p["schema"]["type"] == "string" && p["schema"].get("minLength").is_none() {
                    p["schema"]["minLength"] = 1.into();
                }
            }
            let id = op.get("operationId").and_then(|i| i.as_str()).unwrap_or_default().to_string();
            for (status, response) in op.get_mut("responses").and_then(|r| r.as_object_mut()).into_iter().flatten() {
                if response.get("$ref").is_none() && response.get("description").is_none_or(|d| d == "") {
                    response["description"] = success_description(method, status, response).into();
                }
            }
            if let Some(media) = op.get_mut("requestBody").and_then(|b| b.pointer_mut("/content/application~1json")) {
                let example =
                    examples.remove(&id).unwrap_or_else(|| panic!("{method} {path} ({id}) has no example in request_examples.json"));
                media["example"] = example;
            }
        }
    }
    assert!(examples.is_empty(), "request_examples.json names operations without a JSON body: {:?}", examples.keys());
    bound_metadata(&mut v);
    link_creates(&mut v);
    // Lists whose items the code refuses twice (`is listed twice`); utoipa has no attribute
    // for `uniqueItems`.
    for (schema, property) in [("ServiceInput", "resource_ids"), ("CreateContact", "labels"), ("UpdateContact", "labels")] {
        let p = v["components"]["schemas"][schema]["properties"].get_mut(property).unwrap_or_else(|| panic!("{schema}.{property}"));
        p["uniqueItems"] = true.into();
    }
    // A template's variants: content by locale (`value_type = Object` hides the map's values).
    for schema in ["CreateTemplate", "UpdateTemplate"] {
        let p = v["components"]["schemas"][schema]["properties"].get_mut("variants").unwrap_or_else(|| panic!("{schema}.variants"));
        p["additionalProperties"] = serde_json::json!({"$ref": "#/components/schemas/Content"});
    }
    closed_sets(&mut v);
    exactly_one(&mut v);
    declare_headers(&mut v);
    constants_and_path_ids(&mut v);
    describe_operations(&mut v);
    open_enums(&mut v);
    event_types::add_to_contract(&mut v);
    // Written from JSON from here on: utoipa's model would drop what it has no field for (a
    // `oneOf` beside an object's properties).
    let _: utoipa::openapi::OpenApi = serde_json::from_value(v.clone()).expect("the finished document is still an OpenAPI document");
    v
}

/// Ids and times are types with their own schemas (`shared::ids`), which utoipa refers to by
/// name. Those marked `x-inline` are written where they are used instead, as a string with a
/// pattern or format (nullable where the field is optional), and their components dropped:
/// a generated client reads a field's rule beside it, and the contract keeps its shape.
fn inline_scalars(v: &mut serde_json::Value) {
    use serde_json::Value;
    let schemas = v["components"]["schemas"].as_object_mut().expect("components.schemas");
    let scalars: std::collections::BTreeMap<String, Value> = schemas
        .iter()
        .filter(|(_, s)| s.get("x-inline") == Some(&Value::Bool(true)))
        .map(|(name, s)| {
            let mut s = s.clone();
            s.as_object_mut().expect("a schema").remove("x-inline");
            (format!("#/components/schemas/{name}"), s)
        })
        .collect();
    schemas.retain(|_, s| s.get("x-inline").is_none());
    fn walk(node: &mut Value, scalars: &std::collections::BTreeMap<String, Value>) {
        match node {
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, scalars)),
            Value::Object(map) => {
                map.values_mut().for_each(|i| walk(i, scalars));
                map.remove("x-inline");
                // `{"$ref": id, ...}`: the id's schema with the use's own keys (a description).
                if let Some(scalar) = map.get("$ref").and_then(|r| r.as_str()).and_then(|r| scalars.get(r)) {
                    let mut merged = scalar.as_object().expect("a schema").clone();
                    map.remove("$ref");
                    merged.extend(std::mem::take(map));
                    *map = merged;
                }
                // `{"oneOf": [scalar, {"type": "null"}], ...}` (an optional field): the scalar, nullable.
                let nullable_scalar = map.get("oneOf").and_then(|o| o.as_array()).filter(|o| o.len() == 2).and_then(|o| {
                    let null = o.iter().position(|i| i == &serde_json::json!({"type": "null"}))?;
                    let other = o[1 - null].as_object()?;
                    (other.get("type") == Some(&Value::String("string".into()))).then(|| other.clone())
                });
                if let Some(mut scalar) = nullable_scalar {
                    map.remove("oneOf");
                    scalar.insert("type".into(), serde_json::json!(["string", "null"]));
                    scalar.extend(std::mem::take(map));
                    *map = scalar;
                }
            }
            _ => {}
        }
    }
    walk(v, &scalars);
}

/// The finished document with its top-level keys in the order readers expect (`openapi`,
/// `info`, ... `paths`, then `components`); below that, keys are sorted.
struct Ordered<'a>(&'a serde_json::Value);

impl serde::Serialize for Ordered<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        const FIRST: [&str; 7] = ["openapi", "info", "jsonSchemaDialect", "servers", "paths", "components", "security"];
        let doc = self.0.as_object().expect("the document is an object");
        let mut map = s.serialize_map(Some(doc.len()))?;
        for k in FIRST.iter().filter(|k| doc.contains_key(**k)) {
            map.serialize_entry(k, &doc[*k])?;
        }
        for (k, v) in doc.iter().filter(|(k, _)| !FIRST.contains(&k.as_str())) {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// The headers every client needs, declared once in components from the pipeline's own
/// constants and referenced by each operation: `Idempotency-Key` on every write; `Request-Id`
/// on every success; `Retry-After` on 429 and 503; `Idempotent-Replayed` on a write's success;
/// the rate-limit headers on every admitted answer.
fn declare_headers(v: &mut serde_json::Value) {
    use serde_json::json;
    use shared::idempotency as idem;
    v["components"]["parameters"]["IdempotencyKey"] = json!({
        "name": idem::HEADER, "in": "header", "required": false,
        "description": format!("Makes the write safe to repeat: the first completed answer is kept {} hours and replayed (with Idempotent-Replayed: true); the same key with another method, path, body or credential (an API key; an OAuth token's subject) is 422 IDEMPOTENCY_KEY_REUSED, and one still running is 409 with Retry-After. A credential that needs confirmations names its approval request by this key.", idem::WINDOW_HOURS),
        "schema": {"type": "string", "minLength": 1, "maxLength": idem::KEY_MAX_LEN, "pattern": idem::KEY_PATTERN},
    });
    let headers = &mut v["components"]["headers"];
    headers["RequestId"] = json!({"description": "This request's id (req_...), on every answer (an error's is also its envelope's request_id): quote it when asking about a request", "schema": {"type": "string"}});
    headers["RetryAfter"] = json!({"description": "Seconds to wait before trying again (on a 409: the request with the same Idempotency-Key is still running)", "schema": {"type": "integer", "minimum": 0}});
    headers["IdempotentReplayed"] = json!({"description": "Present (true) when this answer is the replay of an earlier request with the same Idempotency-Key", "schema": {"type": "string", "enum": ["true"]}});
    headers["RateLimitPolicy"] = json!({"description": "The rate-limit class and its burst and window (`\"write\";q=30;w=30`), as the IETF RateLimit header fields draft writes it", "schema": {"type": "string"}});
    headers["Deprecation"] = json!({"description": "On a deprecated operation's every answer: when it was deprecated (RFC 9745, `@<unix seconds>`)", "schema": {"type": "string", "pattern": "^@[0-9]+$"}});
    headers["Sunset"] = json!({"description": "On a deprecated operation's every answer: from when it may stop answering (RFC 8594, an HTTP date)", "schema": {"type": "string"}});
    headers["RateLimit"] = json!({"description": "Tokens remaining in the class's bucket and seconds until the next one (`\"write\";r=29;t=0`)", "schema": {"type": "string"}});
    let r = |name: &str| json!({"$ref": format!("#/components/headers/{name}")});
    for (_, item) in v["paths"].as_object_mut().expect("paths") {
        for (method, op) in item.as_object_mut().expect("path item") {
            let Some(op) = op.as_object_mut() else { continue };
            let write = method != "get";
            // A route without a credential (`security: [{}]`: the portal's sign-in) keeps no
            // idempotency record: there is no workspace or session to keep it under.
            let public = takes_no_credential(op.get("security"));
            // The route's declaration (what the pipeline sends by), not utoipa's own flag.
            let deprecated = op.get("x-access").and_then(|a| a.get("deprecation")).is_some();
            if write && !public {
                op.entry("parameters")
                    .or_insert_with(|| json!([]))
                    .as_array_mut()
                    .expect("parameters")
                    .push(json!({"$ref": "#/components/parameters/IdempotencyKey"}));
            }
            for (status, response) in op.get_mut("responses").and_then(|r| r.as_object_mut()).into_iter().flatten() {
                if response.get("$ref").is_some() {
                    continue;
                }
                let h = response.as_object_mut().expect("a response").entry("headers").or_insert_with(|| json!({}));
                // An error's id is in its envelope (`request_id`); the header is on it too.
                if status.starts_with('2') {
                    h["Request-Id"] = r("RequestId");
                }
                // 409: a request with the same key still running says when to look again.
                if status == "429" || status == "503" || (status == "409" && write && !public) {
                    h["Retry-After"] = r("RetryAfter");
                }
                // A write's stored answer, success or refusal, is what a replay repeats.
                if write && !public && !matches!(status.as_str(), "401" | "403" | "429") {
                    h["Idempotent-Replayed"] = r("IdempotentReplayed");
                }
                // Every admitted request took a token from a bucket (the credential's, or the
                // caller's address on a public route).
                if status.starts_with('2') || status == "429" {
                    h["RateLimit-Policy"] = r("RateLimitPolicy");
                    h["RateLimit"] = r("RateLimit");
                }
                if deprecated {
                    h["Deprecation"] = r("Deprecation");
                    h["Sunset"] = r("Sunset");
                }
            }
        }
    }
}

/// Fields that go together: a property marked `x-exactly-one = [fields]` on the type
/// (`#[schema(extensions(...))]`, beside the check that enforces it) makes a `oneOf` whose
/// branches each require one of those fields, present and not null, and a sentence in the
/// schema's description. utoipa's model carries no `oneOf` beside an object's properties, and
/// keeps no extension on a field that is a reference, hence one mark naming the group.
fn exactly_one(v: &mut serde_json::Value) {
    use serde_json::json;
    const MARK: &str = "x-exactly-one";
    const TYPED: [(&str, &[&str]); 1] = [("CreateBooking", &["contact_id", "contact"])];
    for (name, schema) in v["components"]["schemas"].as_object_mut().expect("schemas") {
        let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) else { continue };
        let mut groups: Vec<Vec<String>> = props
            .values_mut()
            .filter_map(|p| p.as_object_mut().and_then(|o| o.remove(MARK)))
            .map(|g| serde_json::from_value(g).unwrap_or_else(|e| panic!("{name}: {MARK} lists field names: {e}")))
            .collect();
        // Where every field of the group is typed (an id, an object), utoipa writes references,
        // which carry no extension: the group is named here.
        groups.extend(TYPED.iter().filter(|(s, _)| s == name).map(|(_, fields)| fields.iter().map(|f| f.to_string()).collect()));
        for f in groups.iter().flatten() {
            assert!(props.contains_key(f), "{name}: {MARK} names {f}, which it does not have");
        }
        let mut all = Vec::new();
        for fields in groups {
            assert!(fields.len() >= 2, "{name}: {MARK} names two fields or more");
            let listed: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
            let sentence = format!("Exactly one of {} (not null).", listed.join(" and "));
            let description = match schema.get("description").and_then(|d| d.as_str()) {
                Some(d) => format!("{d}\n\n{sentence}"),
                None => sentence,
            };
            schema["description"] = description.into();
            let branches: Vec<_> = fields.iter().map(|f| json!({"required": [f], "properties": {f: {"not": {"type": "null"}}}})).collect();
            all.push(json!({"oneOf": branches}));
        }
        assert!(
            all.is_empty() || (schema.get("oneOf").is_none() && schema.get("allOf").is_none()),
            "{name} has a oneOf or allOf of its own"
        );
        match all.len() {
            0 => {}
            1 => schema["oneOf"] = all.remove(0)["oneOf"].take(),
            _ => schema["allOf"] = all.into(),
        }
    }
}

/// `security: [{}]`: the operation takes no credential (the portal's sign-in).
fn takes_no_credential(security: Option<&serde_json::Value>) -> bool {
    security.and_then(|s| s.as_array()).is_some_and(|s| s.iter().all(|r| r.as_object().is_some_and(|o| o.is_empty())))
}

/// Every operation's description says what it needs, the effect it reaches and the errors it
/// can answer, from the same route declaration the pipeline enforces (`x-access`) and the
/// operation's own responses: generated docs and agents (the MCP tools) read one paragraph,
/// not a summary line.
fn describe_operations(v: &mut serde_json::Value) {
    for (_, item) in v["paths"].as_object_mut().expect("paths") {
        for (_, op) in item.as_object_mut().expect("path item") {
            let Some(op) = op.as_object_mut() else { continue };
            let access = op.get("x-access").cloned().unwrap_or_default();
            let class = access["rate_limit_class"].as_str().unwrap_or("read").to_string();
            let security = op.get("security").cloned().unwrap_or(serde_json::Value::Null);
            let public = takes_no_credential(Some(&security));
            let portal = security.as_array().is_some_and(|s| s.iter().any(|r| r.get("portal_session").is_some()));
            let mut text = if public {
                format!("Needs no credential; rate-limit class `{class}`, per caller address.")
            } else if portal {
                format!("Needs a customer's portal session (X-Portal-Session); rate-limit class `{class}`.")
            } else {
                format!("Needs the `{}` scope; rate-limit class `{class}`.", access["scope"].as_str().unwrap_or("read"))
            };
            if let Some(d) = access.get("deprecation") {
                let (since, sunset, instead) = (&d["since"], &d["sunset"], &d["instead"]);
                text = format!(
                    "Deprecated since {}: use {} instead. It keeps answering until {} at least; every answer carries Deprecation and Sunset headers. {text}",
                    since.as_str().unwrap_or_default(),
                    instead.as_str().unwrap_or_default(),
                    sunset.as_str().unwrap_or_default()
                );
            }
            if let Some(caps) = access["capabilities"].as_array().filter(|c| !c.is_empty() && !public && !portal) {
                let names: Vec<&str> = caps.iter().filter_map(|c| c.as_str()).collect();
                text.push_str(&format!(
                    " Reaches the effect {}: a credential created with `requires_confirmation` gets 428 CONFIRMATION_REQUIRED and an approval request for a person, until approved or confirmed.",
                    names.join(", ")
                ));
            }
            let mut errors: Vec<String> = op
                .get("responses")
                .and_then(|r| r.as_object())
                .into_iter()
                .flatten()
                .filter(|(status, _)| status.starts_with('4') || status.starts_with('5'))
                .map(|(status, _)| status.clone())
                .collect();
            errors.sort();
            if !errors.is_empty() {
                text.push_str(&format!(" Can answer {} (each below, in the error envelope).", errors.join(", ")));
            }
            let description = match op.get("description").and_then(|d| d.as_str()) {
                Some(d) if !d.trim().is_empty() => format!("{}\n\n{text}", d.trim_end()),
                _ => text,
            };
            op.insert("description".into(), description.into());
        }
    }
}

/// Enums that may gain values in version 1 (a new status, error code, channel type, event) say
/// so: `x-extensible-enum: true` and a sentence, so a client keeps a value it does not know
/// (docs/api.md, "Changes to version 1"). The closed ones are what a request may send and the
/// server checks against a fixed list: the delimiters, conflict policies and languages.
fn open_enums(v: &mut serde_json::Value) {
    const CLOSED: [&str; 4] = ["Delimiter", "OnConflict", "Lang", "Scope"];
    for (name, schema) in v["components"]["schemas"].as_object_mut().expect("schemas") {
        if schema.get("enum").is_none() || CLOSED.contains(&name.as_str()) {
            continue;
        }
        schema["x-extensible-enum"] = true.into();
        let note = "Open: later versions may add values; treat one you do not know as its own case.";
        schema["description"] = match schema["description"].as_str() {
            Some(d) => format!("{}\n\n{note}", d.trim_end()),
            None => note.to_string(),
        }
        .into();
    }
}

/// `object` is one value per schema (`"Always \`contact\`."`): a constant, so a typed client can
/// narrow on it; a path's id parameter carries the pattern of its kind (`apr_...`).
fn constants_and_path_ids(v: &mut serde_json::Value) {
    for (_, schema) in v["components"]["schemas"].as_object_mut().expect("schemas") {
        let Some(object) = schema.pointer_mut("/properties/object") else { continue };
        let constant =
            object["description"].as_str().and_then(|d| d.strip_prefix("Always `")).and_then(|d| d.split('`').next()).map(str::to_string);
        // A one-value `enum` (utoipa's model has no `const`): the same to a validator, and
        // generated clients type it as that literal.
        if let Some(c) = constant {
            object["enum"] = serde_json::json!([c]);
        }
    }
    // A path parameter's kind, by the path up to it (`/contacts/{id}`), from whichever
    // operation of any path sharing that stem describes it (`ct_...`, with or without
    // backticks): every operation under the stem gets the pattern.
    let prefix_of = |p: &serde_json::Value| -> Option<String> {
        let d = p["description"].as_str()?.trim_matches('`');
        let prefix = d.strip_suffix("_...")?;
        (!prefix.is_empty() && prefix.chars().all(|c| c.is_ascii_lowercase())).then(|| prefix.to_string())
    };
    let stem = |path: &str, name: &str| path.find(&format!("{{{name}}}")).map(|i| path[..i + name.len() + 2].to_string());
    let mut kinds: std::collections::BTreeMap<String, String> = Default::default();
    for (path, item) in v["paths"].as_object().expect("paths") {
        for (_, op) in item.as_object().expect("path item") {
            for p in op["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "path") {
                if let (Some(prefix), Some(stem)) = (prefix_of(p), stem(path, p["name"].as_str().unwrap_or_default())) {
                    kinds.entry(stem).or_insert(prefix);
                }
            }
        }
    }
    for (path, item) in v["paths"].as_object_mut().expect("paths") {
        for (_, op) in item.as_object_mut().expect("path item") {
            for p in op.get_mut("parameters").and_then(|p| p.as_array_mut()).into_iter().flatten() {
                if p["in"] != "path" || p["schema"].get("pattern").is_some() {
                    continue;
                }
                let Some(stem) = stem(path, p["name"].as_str().unwrap_or_default()) else { continue };
                if let Some(prefix) = kinds.get(&stem) {
                    p["schema"]["pattern"] = shared::ids::id_pattern(prefix).into();
                    if p.get("description").is_none() {
                        p["description"] = format!("{prefix}_...").into();
                    }
                }
            }
        }
    }
}

/// The closed sets the code checks against lists rather than Rust enums: a member's role, an
/// API key's scopes (never `confirm`), the capabilities a key may require confirmation of, and
/// the event types (or `<noun>.*` patterns) an endpoint subscribes to.
fn closed_sets(v: &mut serde_json::Value) {
    let schemas = &mut v["components"]["schemas"];
    let roles = serde_json::json!({"type": "string", "enum": shared::auth::ROLES});
    for schema in ["SetMember", "Member"] {
        let role = &mut schemas[schema]["properties"]["role"];
        assert!(role.is_object(), "{schema}.role");
        role["enum"] = roles["enum"].clone();
    }
    let scopes = &mut schemas["CreateApiKey"]["properties"]["scopes"];
    scopes["items"] = serde_json::json!({"type": "string", "enum": ["read", "write", "admin"]});
    scopes["minItems"] = 1.into();
    let mut capabilities: Vec<String> = capability_list().into_iter().map(|c| c.capability).collect();
    capabilities.dedup();
    let only = schemas["RequiresConfirmation"]["oneOf"]
        .as_array_mut()
        .and_then(|o| o.iter_mut().find(|s| s["type"] == "array"))
        .expect("RequiresConfirmation has a list form");
    only["items"] = serde_json::json!({"type": "string", "enum": capabilities});
    let mut patterns: Vec<String> = shared::events::EVENT_TYPES.iter().map(|t| t.to_string()).collect();
    for t in shared::events::EVENT_TYPES {
        patterns.extend(t.match_indices('.').map(|(i, _)| format!("{}.*", &t[..i])));
    }
    patterns.sort();
    patterns.dedup();
    schemas["EventTypePattern"] = serde_json::json!({
        "type": "string",
        "description": "An event type, or `<noun>.*` for every type under that noun.",
        "enum": patterns,
    });
    for schema in ["CreateEndpoint", "UpdateEndpoint", "Endpoint", "CreateReplay", "Replay"] {
        let types = &mut schemas[schema]["properties"]["event_types"];
        assert!(types.is_object(), "{schema}.event_types");
        types["items"] = serde_json::json!({"$ref": "#/components/schemas/EventTypePattern"});
        types["uniqueItems"] = true.into();
        types["maxItems"] = domain::webhooks::ops::MAX_EVENT_TYPES.into();
    }
}

/// Every `metadata` map says what `Errors::metadata` enforces (at most 50 keys of 1 to 40
/// characters, values of at most 500), and every `custom_fields` map what contacts enforce.
fn bound_metadata(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(o) => {
            if let Some(m) = o.get_mut("properties").and_then(|p| p.get_mut("metadata")).and_then(|m| m.as_object_mut())
                && m.get("additionalProperties").is_some_and(|a| a["type"] == "string")
            {
                m.insert("maxProperties".into(), 50.into());
                m.insert("propertyNames".into(), serde_json::json!({"type": "string", "minLength": 1, "maxLength": 40}));
                m["additionalProperties"]["maxLength"] = 500.into();
            }
            // A contact's custom fields: at most 50, keys of 1 to 40 characters, scalar values.
            if let Some(m) = o.get_mut("properties").and_then(|p| p.get_mut("custom_fields")).and_then(|m| m.as_object_mut())
                && m.get("properties").is_none()
            {
                m.insert("maxProperties".into(), 50.into());
                m.insert("propertyNames".into(), serde_json::json!({"type": "string", "minLength": 1, "maxLength": 40}));
                m.insert("additionalProperties".into(), serde_json::json!({"type": ["string", "number", "boolean", "null"]}));
            }
            o.values_mut().for_each(bound_metadata);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(bound_metadata),
        _ => {}
    }
}

/// OpenAPI links from each create to the operations on what it made: `POST /posts` answers
/// `data.id`, which `GET`, `PATCH` and `DELETE /posts/{id}` (and the actions below it) take.
/// Generated clients and schemathesis's stateful phase follow them.
fn link_creates(v: &mut serde_json::Value) {
    let paths = v["paths"].as_object().cloned().expect("paths");
    for (path, item) in &paths {
        let Some((status, created)) = ["201", "202"].iter().find_map(|s| item.pointer(&format!("/post/responses/{s}")).map(|r| (*s, r)))
        else {
            continue;
        };
        let schema = created.pointer("/content/application~1json/schema/$ref").and_then(|r| r.as_str()).unwrap_or_default();
        let object = v["components"]["schemas"][schema.rsplit('/').next().unwrap_or_default()].clone();
        let object = match object.pointer("/properties/data/$ref").and_then(|r| r.as_str()) {
            Some(r) => v["components"]["schemas"][r.rsplit('/').next().unwrap_or_default()].clone(),
            None => object["properties"]["data"].clone(),
        };
        let mut links = serde_json::Map::new();
        for (other, other_item) in &paths {
            let Some(rest) = other.strip_prefix(path.as_str()).and_then(|r| r.strip_prefix("/{")) else { continue };
            let Some((param, _)) = rest.split_once('}') else { continue };
            // The created object must carry what the path takes (`id`, or a template's `slug`).
            if object["properties"].get(param).is_none() {
                continue;
            }
            for op in other_item.as_object().into_iter().flatten().map(|(_, op)| op) {
                let Some(op_id) = op.get("operationId").and_then(|i| i.as_str()) else { continue };
                let mut parameters = serde_json::Map::new();
                parameters.insert(param.to_string(), format!("$response.body#/data/{param}").into());
                links.insert(op_id.to_string(), serde_json::json!({"operationId": op_id, "parameters": parameters}));
            }
        }
        if !links.is_empty() {
            v["paths"][path]["post"]["responses"][status]["links"] = serde_json::Value::Object(links);
        }
    }
}

/// A 2xx's description, from its status and body.
fn success_description(method: &str, status: &str, response: &serde_json::Value) -> String {
    let schema = response.pointer("/content/application~1json/schema/$ref").and_then(|r| r.as_str()).unwrap_or_default();
    let list = schema.contains("/ListOf_");
    match status {
        "200" if list => "A page of results: data, has_more and next_cursor (pass it as cursor for the next page)".into(),
        "200" if method == "delete" => "Deleted".into(),
        "200" => "The object, in data".into(),
        "201" => "Created: the new object, in data".into(),
        "202" => "Accepted: the work goes on in the background; the object in data tells its state".into(),
        "204" => "Done; no body".into(),
        other => format!("HTTP {other}"),
    }
}

/// Each operation states what the pipeline enforces, taken from the same routes the
/// functions serve: `x-access: {scope: read | write | admin | confirm, rate_limit_class,
/// capabilities?}`. One key, since utoipa keeps extensions in a HashMap (two keys would come out
/// in a random order). A confirmable operation also documents `X-Capability-Confirmation` and
/// its 428, and the document lists every capability under `x-capabilities`.
fn annotate_access(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::{ContentBuilder, ObjectBuilder, Ref, RefOr, Required, ResponseBuilder, Type};
    for r in gateway::all_routes() {
        let item = doc.paths.paths.get_mut(r.path).unwrap_or_else(|| panic!("{} is in the contract", r.path));
        let op = match r.method.as_str() {
            "GET" => item.get.as_mut(),
            "POST" => item.post.as_mut(),
            "PUT" => item.put.as_mut(),
            "PATCH" => item.patch.as_mut(),
            "DELETE" => item.delete.as_mut(),
            _ => None,
        };
        let op = op.unwrap_or_else(|| panic!("{} {} is in the contract", r.method, r.path));
        let mut access = serde_json::json!({"scope": r.needs.name(), "rate_limit_class": r.class.name()});
        if !r.effects.is_empty() {
            let names: Vec<&str> = r.effects.iter().map(|e| e.capability).collect();
            let capability = names.join(", ");
            access["capabilities"] = serde_json::json!(names);
            let envelope = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorEnvelope"))).build();
            let refused = ResponseBuilder::new()
                .description(format!(
                    "CONFIRMATION_REQUIRED: this credential needs a person's confirmation of {capability} for this exact request (details[0].meta names it)"
                ))
                .content("application/json", envelope)
                .build();
            op.responses.responses.insert("428".into(), RefOr::T(refused));
            op.parameters.get_or_insert_with(Vec::new).push(RefOr::T(
                ParameterBuilder::new()
                    .name("X-Capability-Confirmation")
                    .parameter_in(ParameterIn::Header)
                    .required(Required::False)
                    .description(Some(format!(
                        "A confirmation token (cct_...) for {capability}, minted at POST /capability-confirmations; required for credentials created with requires_confirmation, with the confirmed Idempotency-Key"
                    )))
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String).pattern(Some("^cct_[0-7][0-9A-HJKMNP-TV-Z]{25}[0-9A-Za-z]{43}$"))))
                    .build(),
            ));
        }
        if let Some(d) = r.deprecation {
            d.check();
            op.deprecated = Some(utoipa::openapi::Deprecated::True);
            access["deprecation"] = serde_json::json!({"since": d.since, "sunset": d.sunset, "instead": d.instead});
        }
        let ext = op.extensions.get_or_insert_with(Default::default);
        ext.insert("x-access".into(), access);
    }
    let list = serde_json::to_value(capability_list()).expect("capabilities serialize");
    doc.extensions.get_or_insert_with(Default::default).insert("x-capabilities".into(), list);
}

/// The confirmable writes: one row per effect a route declares (`[effects = ...]`), sorted by
/// capability, then path and method.
pub fn capability_list() -> Vec<domain::capabilities::Capability> {
    let docs = {
        use utoipa::OpenApi;
        let mut doc = shared::openapi::BaseDoc::openapi();
        for (_, area) in area_docs() {
            doc.merge(area);
        }
        doc
    };
    let mut out: Vec<domain::capabilities::Capability> = gateway::all_routes()
        .iter()
        // A public effect (anyone may cause it, no credential) is nothing a person confirms.
        .flat_map(|r| r.effects.iter().filter(|e| !e.public).map(move |e| (r, e)))
        .filter_map(|(r, effect)| {
            let capability = effect.capability;
            let item = docs.paths.paths.get(r.path)?;
            let op = match r.method.as_str() {
                "POST" => item.post.as_ref(),
                "PUT" => item.put.as_ref(),
                "PATCH" => item.patch.as_ref(),
                "DELETE" => item.delete.as_ref(),
                _ => item.get.as_ref(),
            };
            Some(domain::capabilities::Capability {
                capability: capability.into(),
                method: r.method.to_string(),
                path: r.path.into(),
                // The first sentence of the operation's summary, on one line.
                summary: op
                    .and_then(|o| o.summary.as_deref())
                    .map(|s| s.replace('\n', " ").split_inclusive(". ").next().unwrap_or_default().trim().to_string())
                    .unwrap_or_default(),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.capability, &a.path, &a.method).cmp(&(&b.capability, &b.path, &b.method)));
    out
}

/// `domain/src/capabilities/capabilities.json`: what the capabilities function serves and validates against.
pub fn capabilities_json() -> String {
    let mut s = serde_json::to_string_pretty(&capability_list()).expect("capabilities serialize");
    s.push('\n');
    s
}

pub fn openapi_json() -> String {
    let mut s = serde_json::to_string_pretty(&Ordered(&openapi_doc())).expect("the document serializes");
    s.push('\n');
    s
}

/// docs/data-model.md with its key table replaced by the one `domain::keys` generates.
pub fn data_model_doc(current: &str) -> String {
    let lines: Vec<&str> = current.lines().collect();
    let start = lines.iter().position(|l| l.starts_with("| item | pk |")).expect("data-model.md has the key table");
    let end = lines[start..].iter().position(|l| !l.starts_with('|')).map_or(lines.len(), |n| start + n);
    let mut out = lines[..start].join("\n");
    out.push('\n');
    out.push_str(&domain::keys::markdown_table());
    out.push_str(&lines[end..].join("\n"));
    out.push('\n');
    out
}

/// `clients/rust/src/generated.rs`, from the finished contract.
pub fn rust_client_source() -> String {
    rust_client::generate(&openapi_doc())
}

/// `functions/webhooks/src/event_types.json`: the event-type catalog, from the finished contract.
pub fn event_types_json() -> String {
    event_types::catalog_json(&openapi_doc())
}

/// `functions/mcp/src/tools.json`: the MCP server's tools, from the finished contract.
pub fn mcp_tools_json() -> String {
    mcp_tools::generate(&openapi_doc())
}

pub fn openapi_yaml() -> String {
    serde_norway::to_string(&Ordered(&openapi_doc())).expect("the document serializes")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// No operation is deprecated today: this is how one would read, from its declaration.
    #[test]
    fn a_deprecated_operation_says_so_in_its_description_and_headers() {
        let mut v = json!({"components": {}, "paths": {"/old": {"get": {
            "deprecated": true,
            "x-access": {"scope": "read", "rate_limit_class": "read",
                "deprecation": {"since": "2026-11-01", "sunset": "2027-05-01", "instead": "GET /new"}},
            "responses": {"200": {"description": "ok"}, "404": {"description": "no"}},
        }}}});
        super::declare_headers(&mut v);
        super::describe_operations(&mut v);
        let op = &v["paths"]["/old"]["get"];
        for status in ["200", "404"] {
            assert_eq!(op["responses"][status]["headers"]["Sunset"]["$ref"], "#/components/headers/Sunset");
            assert_eq!(op["responses"][status]["headers"]["Deprecation"]["$ref"], "#/components/headers/Deprecation");
        }
        let text = op["description"].as_str().unwrap();
        assert!(text.starts_with("Deprecated since 2026-11-01: use GET /new instead. It keeps answering until 2027-05-01"), "{text}");
    }

    #[test]
    fn fields_marked_exactly_one_become_a_one_of() {
        let mut v = json!({"components": {"schemas": {"X": {"type": "object", "properties": {
            "a": {"type": ["string", "null"], "x-exactly-one": ["a", "b"]},
            "b": {"oneOf": [{"$ref": "#/components/schemas/Y"}, {"type": "null"}]},
            "c": {"type": "string"},
        }}}}});
        super::exactly_one(&mut v);
        let x = &v["components"]["schemas"]["X"];
        assert_eq!(
            x["oneOf"],
            json!([{"required": ["a"], "properties": {"a": {"not": {"type": "null"}}}}, {"required": ["b"], "properties": {"b": {"not": {"type": "null"}}}}])
        );
        assert_eq!(x["description"], "Exactly one of `a` and `b` (not null).");
        assert!(!x.to_string().contains("x-exactly-one"), "the marks are gone: {x}");
    }
}
