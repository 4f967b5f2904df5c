//! Admin CLI. Configured by a stack's outputs (`--outputs FILE`: what `sam list
//! stack-outputs --output json` prints; `make dev` writes `.local/dev.outputs.json`), or by the
//! functions' own environment variables (TABLE_NAME, EVENTS_QUEUE_URL, PLATFORM_SECRET_ID, ...;
//! `.local/dev.env`) for what the file does not give. Credentials and region come from the AWS SDK's
//! default chain (environment, profiles, SSO, credential processes, container and instance
//! roles), unlike the functions, whose credentials are always in their environment.
//!
//!   admin [--outputs FILE [--local]] <command>
//!   admin bootstrap
//!   admin create-workspace --name NAME        -> {"workspace_id": ..., "api_key": ...}
//!   admin add-member --workspace W --subject S --role owner|admin|member|viewer
//!   admin mint-token --subject S [--scope "read write admin"] [--ttl SECONDS]   (local endpoints only)
//!         [--client ID|none] [--signed-in-ago SECONDS]   a person's token, as the approval pages'
//!         client (`approval-pages`) signed in just now unless these say otherwise: another
//!         client, `none`, or an old sign-in mints a token that cannot approve
//!   admin send-inbound FILE.eml [--to ADDRESS]   (local endpoints only: as SES would deliver it;
//!                                                 recipients default to the To and Cc headers)

use shared::App;
use std::collections::BTreeMap;
use tools::admin;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn need(args: &[String], name: &str) -> Result<String, String> {
    arg(args, name).ok_or_else(|| format!("missing {name}"))
}

/// The variables of `--outputs FILE` under the environment's.
fn vars(args: &mut Vec<String>) -> Result<BTreeMap<String, String>, String> {
    let Some(i) = args.iter().position(|a| a == "--outputs") else { return Ok(BTreeMap::new()) };
    let file = args.get(i + 1).cloned().ok_or("--outputs needs a file")?;
    args.drain(i..=i + 1);
    let json = std::fs::read_to_string(&file).map_err(|e| format!("{file}: {e}"))?;
    admin::vars_from_outputs(&json).map_err(|e| format!("{file}: {e}"))
}

async fn app(outputs: &BTreeMap<String, String>) -> Result<App, String> {
    // The file named on the command line wins: exported variables of another stack must not
    // mix into it.
    let var = |k: &str| outputs.get(k).cloned().or_else(|| std::env::var(k).ok().filter(|v| !v.is_empty()));
    let cfg = shared::config::Config::from_vars(&var)?;
    let mut sdk = aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(shared::sdk_http::client());
    if let Some(region) = var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")) {
        sdk = sdk.region(aws_config::Region::new(region));
    }
    let sdk = sdk.load().await;
    if sdk.region().is_none() {
        return Err("no AWS region: use --outputs, AWS_REGION or a profile's region".into());
    }
    App::with_dynamodb_endpoint(cfg, &sdk, var("AWS_ENDPOINT_URL_DYNAMODB").as_deref())
}

/// With a stack's outputs file, AWS endpoints on loopback in the environment mean a shell that
/// sourced `.local/dev.env` (the local emulators), not the stack the file names: refused, unless
/// `--local` says the emulators are meant.
fn check_endpoints(args: &mut Vec<String>, outputs: &BTreeMap<String, String>) -> Result<(), String> {
    let local = args.iter().position(|a| a == "--local").map(|i| args.remove(i)).is_some();
    if outputs.is_empty() || local {
        return Ok(());
    }
    for k in ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"] {
        let v = std::env::var(k).unwrap_or_default();
        let host = url::Url::parse(&v).ok().and_then(|u| u.host_str().map(String::from)).unwrap_or_default();
        if host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
            return Err(format!(
                "{k}={v} sends the calls to local emulators, not to the stack of the outputs file (a shell that sourced .local/dev.env?): unset it, or pass --local if the local stack is meant"
            ));
        }
    }
    Ok(())
}

async fn run(mut args: Vec<String>) -> Result<serde_json::Value, String> {
    let outputs = vars(&mut args)?;
    check_endpoints(&mut args, &outputs)?;
    let app = || app(&outputs);
    let cmd = args.first().map(String::as_str).unwrap_or("");
    match cmd {
        "bootstrap" => {
            // The default chain (the environment, then profiles), over the functions' transport.
            let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(shared::sdk_http::client()).load().await;
            let ddb = aws_sdk_dynamodb::Client::new(&sdk);
            let res = admin::bootstrap(
                &ddb,
                &aws_sdk_sqs::Client::new(&sdk),
                &aws_sdk_secretsmanager::Client::new(&sdk),
                shared::aws::Aws::new(&sdk).s3(),
                &admin::Names::from_env(),
            )
            .await?;
            Ok(serde_json::to_value(res).expect("serializes"))
        }
        "create-workspace" => {
            let name = need(&args, "--name")?;
            let (ws, key) = domain::workspaces::create_workspace(&app().await?, &name).await.map_err(|e| e.to_string())?;
            Ok(serde_json::json!({"workspace_id": ws.id, "api_key": key}))
        }
        "add-member" => {
            let (ws, sub, role) = (need(&args, "--workspace")?, need(&args, "--subject")?, need(&args, "--role")?);
            // The operator names the workspace (add_member answers 404 for one that does not exist).
            let ws = shared::auth::WorkspaceId::trusted(ws);
            let m = domain::workspaces::add_member(&app().await?, &ws, &sub, &role).await.map_err(|e| e.to_string())?;
            Ok(serde_json::to_value(m).expect("serializes"))
        }
        "mint-token" => {
            let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
            if !admin::is_loopback_endpoint(&endpoint) {
                return Err("mint-token only runs against a local stack (AWS_ENDPOINT_URL must be a loopback URL)".into());
            }
            let sub = need(&args, "--subject")?;
            let scope = arg(&args, "--scope").unwrap_or_else(|| "read write admin".into());
            let ttl = arg(&args, "--ttl").map(|t| t.parse::<i64>().map_err(|_| "--ttl must be seconds")).transpose()?.unwrap_or(3600);
            let issuer = std::env::var("OAUTH_ISSUER").ok().filter(|i| !i.is_empty()).unwrap_or(admin::DEV_ISSUER.into());
            let client = arg(&args, "--client").unwrap_or_else(|| tools::oidc::CLIENT_ID.into());
            let ago = arg(&args, "--signed-in-ago")
                .map(|t| t.parse::<i64>().map_err(|_| "--signed-in-ago must be seconds"))
                .transpose()?
                .unwrap_or(0);
            let client = (client != "none").then_some(client.as_str());
            Ok(serde_json::Value::String(admin::mint_token_signed_in(&issuer, &sub, &scope, ttl, client, ago)?))
        }
        "send-inbound" => {
            let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
            if !admin::is_loopback_endpoint(&endpoint) {
                return Err("send-inbound only runs against a local stack (AWS_ENDPOINT_URL must be a loopback URL)".into());
            }
            let file = args.get(1).filter(|a| !a.starts_with("--")).ok_or("usage: send-inbound FILE.eml [--to ADDRESS]")?;
            let raw = std::fs::read(file).map_err(|e| format!("{file}: {e}"))?;
            let to = match arg(&args, "--to") {
                Some(t) => vec![t],
                None => domain::helpdesk::mail::parse::parse(&raw).map_err(|e| format!("{file}: {e}"))?.to,
            };
            let app = app().await?;
            let queue = std::env::var("INBOUND_MAIL_QUEUE_URL").map_err(|_| "INBOUND_MAIL_QUEUE_URL is not set (source .local/dev.env)")?;
            let body = admin::store_inbound(app.s3(), &app.cfg.mail_bucket, &raw, &to, "PASS", "PASS").await?;
            app.enqueue(&queue, &body, 0).await.map_err(|e| e.to_string())?;
            Ok(serde_json::json!({"queued": true, "recipients": to}))
        }
        _ => Err(
            "usage: admin [--outputs FILE] bootstrap | create-workspace --name N | add-member --workspace W --subject S --role R | mint-token --subject S [--client ID|none] [--signed-in-ago S] | send-inbound FILE.eml [--to A]"
                .into(),
        ),
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(args).await {
        // A token prints bare so it pastes into a header; everything else is one JSON object.
        Ok(serde_json::Value::String(s)) => println!("{s}"),
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("admin: {e}");
            std::process::exit(1);
        }
    }
}
