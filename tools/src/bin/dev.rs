//! `make dev`: start DynamoDB Local + moto on 127.0.0.1, bootstrap, create a demo workspace,
//! write .local/dev.env, serve the API, and stop everything on Ctrl-C.

use tools::DevStack;
use tools::localstack::repo_root;

fn main() {
    // Debug builds' request futures need more than a worker's default 2 MiB of stack.
    let rt = tokio::runtime::Builder::new_multi_thread().thread_stack_size(8 << 20).enable_all().build().expect("runtime");
    rt.block_on(run());
}

async fn run() {
    shared::telemetry::init();
    let port: u16 = std::env::var("PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(3000);
    let local = repo_root().join(".local");
    // The approval pages' sign-in: a real OpenID provider on 127.0.0.1, whose one client
    // redirects to this gateway. Its access tokens are signed with the development key, so the
    // admin CLI's mint-token keeps working beside it.
    let accounts = [
        tools::oidc::Account { login: "owner@demo.test".into(), password: demo_password(), sub: tools::DEV_USER.into() },
        tools::oidc::Account { login: "member@demo.test".into(), password: demo_password(), sub: DEV_MEMBER.into() },
    ];
    let redirect = format!("http://127.0.0.1:{port}/approvals/callback");
    let key = Some((tools::admin::DEV_PRIVATE_KEY, tools::admin::DEV_KID));
    let issuer = match tools::oidc::DevIssuer::start_signing(tools::admin::DEV_AUDIENCE, &[redirect], &accounts, key).await {
        Ok(i) => Some(i),
        Err(e) => {
            eprintln!("dev: no local OpenID provider ({e}); the approval pages cannot sign anyone in");
            None
        }
    };
    let oauth = issuer.as_ref().map(|i| i.oauth(tools::admin::DEV_AUDIENCE));
    let started = async {
        let mut s = DevStack::start_with(&local.join("logs"), port, |cfg| {
            if let Some(o) = oauth {
                cfg.oauth = Some(o);
            }
        })
        .await?;
        // The dispatcher runs with the production retry schedule; the sweep ticks every 10 s.
        s.start_worker(s.config(), std::time::Duration::from_secs(10))?;
        Ok::<_, String>(s)
    };
    let stack = match started.await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("dev: {e}");
            std::process::exit(1);
        }
    };
    let (ws, key) = match tools::demo_workspace(&stack.app).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("dev: demo workspace: {e}");
            stack.stop().await;
            std::process::exit(1);
        }
    };
    if let Err(e) = domain::workspaces::add_member(&stack.app, &shared::auth::WorkspaceId::trusted(ws.as_str()), DEV_MEMBER, "member").await
    {
        eprintln!("dev: demo member: {}", e.message);
    }
    let slug = domain::workspaces::load(&stack.app, &shared::auth::WorkspaceId::trusted(ws.as_str()))
        .await
        .map(|(w, _)| w.slug)
        .unwrap_or_else(|_| "<slug>".into());
    let pages = stack.config().portal_pages_url.unwrap_or_default();
    let portal = format!("{pages}/p/{slug}/");
    let approvals = match &issuer {
        Some(i) => format!(
            "the approval pages at {pages}/approvals/{slug}/ (sign in at the OpenID provider {issuer}:\n    owner  {} / {}\n    member {} / {})",
            accounts[0].login,
            accounts[0].password,
            accounts[1].login,
            accounts[1].password,
            issuer = i.issuer
        ),
        None => "no approval pages' sign-in (no OpenID provider)".into(),
    };
    // A real Bluesky PDS with a demo account, connected as a channel of the demo workspace.
    let (pds, bluesky) = match tools::demo_bluesky(&stack.base_url, &key).await {
        Ok((pds, lines)) => (Some(pds), lines),
        Err(e) => {
            eprintln!("dev: no local Bluesky PDS ({e}); the other channel types work");
            (None, String::new())
        }
    };
    // The admin CLI reads these as it reads a deployed stack's (`admin --outputs FILE`).
    // Its own file: an operator's deployed stack's outputs (`.local/<stack>.outputs.json`) are never overwritten.
    if let Err(e) = std::fs::write(local.join("dev.outputs.json"), stack.outputs_json()) {
        eprintln!("dev: cannot write .local/dev.outputs.json: {e}");
    }
    let env_file = local.join("dev.env");
    if let Err(e) = std::fs::write(&env_file, tools::dev_env_file(&stack.env(), &ws, &key) + &bluesky) {
        eprintln!("dev: cannot write {}: {e}", env_file.display());
    }
    eprintln!(
        "\nAPI ready at {base}\n  DynamoDB Local {ddb}\n  moto (SQS, Secrets Manager, SES) {moto}\n  workers: webhook dispatcher, contact import, email sender (SES identity example.com), publisher; outbox sweep, email and publish ticks every 10 s\n  Bluesky PDS {pds} (account platformdemo.test, connected as the demo workspace's channel)\n  the demo workspace's customer portal pages at {portal}\n  {approvals}\n  environment in {env}\n  MCP server for agents at {mcp} (docs/agents.md)\n\nTry:\n  curl -s {base}/workspaces/current -H 'Authorization: Bearer {key}'\n  npx @modelcontextprotocol/inspector@2.12.0 --cli {mcp} --transport http --method tools/list --header 'Authorization: Bearer {key}'\n\nCtrl-C stops everything.",
        mcp = format!("{}{}", stack.base_url.trim_end_matches(tools::gateway::BASE_PATH), mcp::MCP_PATH),
        base = stack.base_url,
        ddb = stack.emulators.dynamodb_endpoint,
        moto = stack.emulators.moto_endpoint,
        env = env_file.display(),
        pds = pds.as_ref().map_or("not running", |p| p.url.as_str()),
    );
    let _ = tokio::signal::ctrl_c().await;
    drop(issuer);
    eprintln!("stopping");
    stack.stop().await;
}

/// The demo workspace's member (the owner is `tools::DEV_USER`).
const DEV_MEMBER: &str = "dev-member";

/// A password for a demo account of the local provider, new on every start.
fn demo_password() -> String {
    shared::auth::random_base62(12)
}
