//! The client packages against the local stack: the Rust client (clients/rust) directly, the
//! TypeScript one (clients/typescript) by running its Node test suite with this stack's
//! addresses and a fresh workspace's key.

use e2e::{Client as RawClient, harness};
use futures_util::StreamExt;
use std::time::{Duration, Instant};
use workspace_platform_client::{Client, ContactId, CreateContact, Error, ListContactsQuery, Options};

fn contact(email: &str) -> CreateContact {
    CreateContact { email: email.into(), first_name: Some("Ada".into()), ..Default::default() }
}

/// A gateway whose read class admits one request, then one a second: the second GET in a row
/// answers 429 with `Retry-After: 1`.
async fn limited_gateway() -> String {
    let mut cfg = harness().config.clone();
    cfg.limits.insert(shared::ratelimit::Class::Read, shared::ratelimit::Limit::parse("60/min:1").unwrap());
    harness().gateway_with(cfg).await
}

#[tokio::test]
async fn rust_client_pages_a_list_across_three_pages_and_streams_it() {
    let h = harness();
    let (_, key) = h.workspace("rust client pages").await;
    let client = Client::with_api_key(&h.base_bulk, &key).unwrap();
    let mut ids = vec![];
    for i in 0..7 {
        ids.push(client.create_contact(&contact(&format!("page{i}@example.org"))).await.unwrap().id);
    }
    let mut seen = vec![];
    let mut query = ListContactsQuery { limit: Some(3), ..Default::default() };
    let mut pages = 0;
    loop {
        let page = client.list_contacts(&query).await.unwrap();
        pages += 1;
        seen.extend(page.data.into_iter().map(|c| c.id));
        if !page.has_more {
            assert!(page.next_cursor.is_none());
            break;
        }
        query.cursor = page.next_cursor;
    }
    assert_eq!(pages, 3);
    let streamed: Vec<ContactId> =
        client.list_contacts_all(&ListContactsQuery { limit: Some(3), ..Default::default() }).map(|c| c.unwrap().id).collect().await;
    let (mut a, mut b) = (seen.clone(), streamed.clone());
    a.sort();
    b.sort();
    ids.sort();
    assert_eq!(a, ids, "every contact once, by pages");
    assert_eq!(b, ids, "every contact once, streamed");
}

#[tokio::test]
async fn rust_client_errors_are_typed_with_the_request_id() {
    let h = harness();
    let (_, key) = h.workspace("rust client errors").await;
    let client = Client::with_api_key(&h.base, &key).unwrap();
    let Err(Error::Api(e)) = client.get_contact("ct_01JD8X4M7Q2V9K3R5T6W8Y0Z1A").await else { panic!("a 404") };
    assert_eq!((e.status, e.code.as_str()), (404, "NOT_FOUND"));
    assert!(e.request_id.as_deref().is_some_and(|r| !r.is_empty()), "{e:?}");
    let Err(Error::Api(e)) = client.create_contact(&contact("not-an-email")).await else { panic!("a 400") };
    assert_eq!((e.status, e.code.as_str()), (400, "VALIDATION_ERROR"));
    assert_eq!(e.details[0]["field"], "email", "{e:?}");
    let Err(Error::Api(e)) = Client::with_api_key(&h.base, "wsp_nope").unwrap().get_current().await else { panic!("a 401") };
    assert_eq!((e.status, e.code.as_str()), (401, "UNAUTHORIZED"));
}

#[tokio::test]
async fn rust_client_waits_out_a_429_and_succeeds() {
    let h = harness();
    let (_, key) = h.workspace("rust client 429").await;
    let base = limited_gateway().await;
    let client = Client::with_api_key(&base, &key).unwrap();
    client.get_current().await.unwrap();
    let started = Instant::now();
    client.get_current().await.expect("retried after Retry-After");
    assert!(started.elapsed() >= Duration::from_millis(900), "waited {:?}", started.elapsed());
    // Without retries the 429 comes back, with its Retry-After.
    let once = client.with_options(Options { max_retries: 0, ..Default::default() }).unwrap();
    let Err(Error::Api(e)) = once.get_current().await else { panic!("a 429") };
    assert_eq!((e.status, e.code.as_str(), e.retry_after), (429, "RATE_LIMITED", Some(1)));
}

/// A proxy that forwards the first request and drops the connection instead of returning its
/// answer (the request was processed; the client never hears), then passes everything.
async fn dropping_proxy(upstream: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let up = url::Url::parse(upstream).unwrap();
    let target = format!("{}:{}", up.host_str().unwrap(), up.port().unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut first = true;
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else { return };
            let mut outbound = tokio::net::TcpStream::connect(&target).await.unwrap();
            if std::mem::take(&mut first) {
                tokio::spawn(async move {
                    // Read the request, forward it, wait for the answer, then hang up.
                    let mut buf = vec![0u8; 64 * 1024];
                    let n = inbound.read(&mut buf).await.unwrap_or(0);
                    outbound.write_all(&buf[..n]).await.ok();
                    let _ = outbound.read(&mut buf).await;
                    drop(inbound);
                });
            } else {
                tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
            }
        }
    });
    format!("http://{addr}{}", up.path())
}

#[tokio::test]
async fn rust_client_retries_a_dropped_write_with_the_same_key_once_only() {
    let h = harness();
    let (_, key) = h.workspace("rust client idempotency").await;
    let proxy = dropping_proxy(&h.base).await;
    let client = Client::with_api_key(&proxy, &key).unwrap();
    let created = client.create_contact(&contact("dropped@example.org")).await.expect("the retry answers");
    let direct = Client::with_api_key(&h.base, &key).unwrap();
    let all = direct.list_contacts(&ListContactsQuery { q: Some("dropped@example.org".into()), ..Default::default() }).await.unwrap();
    assert_eq!(all.data.len(), 1, "one contact, not two");
    assert_eq!(all.data[0].id, created.id, "the retry was answered by the replay of the first");
    // The same logical write sent again on purpose with its key is also answered once.
    let keyed = direct.idempotency_key("signup-4711");
    let a = keyed.create_contact(&contact("keyed@example.org")).await.unwrap();
    let b = keyed.create_contact(&contact("keyed@example.org")).await.unwrap();
    assert_eq!(a.id, b.id);
}

/// Every GET of the contract, called through its typed method in a workspace with data in
/// every area: each answer decodes into the generated type (the types match what the API
/// sends, not only what the contract says).
#[tokio::test]
async fn rust_client_types_decode_every_get_in_a_workspace_with_every_area() {
    let h = harness();
    let (ws, key) = h.workspace("rust client every area").await;
    let raw = RawClient::new(&h.base_bulk, &key);
    let ids = e2e::seed_every_area(&raw, &ws).await;
    let client = Client::with_api_key(&h.base_bulk, &key).unwrap();
    let customer = Client::with_portal_session(&h.base_bulk, &ids[e2e::PORTAL_SESSION]).unwrap();
    let contract: serde_json::Value = serde_json::from_str(workspace_platform_client::contract::OPENAPI_JSON).unwrap();
    let (mut decoded, mut skipped) = (vec![], vec![]);
    for (path, item) in contract["paths"].as_object().unwrap() {
        let Some(op) = item.get("get") else { continue };
        let id = op["operationId"].as_str().unwrap();
        // A customer's routes take a portal session, not an API credential.
        let client = if path.starts_with("/portal/me") { &customer } else { &client };
        // The seeded id of each of the path's objects (`/contacts/{id}/activities` ->
        // `/contacts/{id}`; `/webhooks/{id}/replays/{replay_id}` -> that and `/webhooks/{id}`).
        let wanted: Vec<&str> = path.match_indices('}').map(|(end, _)| &path[..=end]).collect();
        let Some(params) = wanted.iter().map(|p| ids.get(p).map(String::as_str)).collect::<Option<Vec<&str>>>() else {
            skipped.push(id);
            continue;
        };
        // A query the operation needs (`/gdpr/consents` takes an email or a contact id).
        let query = ids.get(format!("?{path}").as_str()).map_or("", |q| q.as_str());
        match client.__get(id, &params, query).await {
            Ok(Some(())) => decoded.push(id),
            Ok(None) => skipped.push(id),
            Err(e) => panic!("GET {path} ({id}): {e}"),
        }
    }
    println!("decoded {} GETs; skipped {:?}", decoded.len(), skipped);
    assert!(decoded.len() >= 40, "only {} GETs decoded; skipped {skipped:?}", decoded.len());
}

#[test]
fn every_operation_has_a_typed_method() {
    let contract: serde_json::Value = serde_json::from_str(workspace_platform_client::contract::OPENAPI_JSON).unwrap();
    let mut ids: Vec<&str> = contract["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values().filter_map(|op| op.get("operationId")?.as_str()))
        .collect();
    ids.sort();
    assert_eq!(ids, workspace_platform_client::OPERATIONS);
}

/// The TypeScript package's own suite (`npm test` in clients/typescript: types drift check,
/// build, webhook vectors, pack contents, and its stack tests) against this stack.
#[tokio::test]
async fn typescript_client_passes_its_suite_against_the_local_stack() {
    let h = harness();
    let (ws, key) = h.workspace("typescript client").await;
    let limited = limited_gateway().await;
    // An admin who approves agents' writes (the confirm scope), for the confirmation test of
    // an admin effect (a webhook): an approver holds the effect's authority themselves.
    let person = format!("approver-{}", shared::ids::new_id("u"));
    domain::workspaces::add_member(&h.app().await, &shared::auth::WorkspaceId::trusted(ws.clone()), &person, "admin").await.unwrap();
    let approver = tools::admin::mint_token(&person, "read write admin confirm", 600).unwrap();
    let dir = tools::localstack::repo_root().join("clients/typescript");
    let out = tokio::process::Command::new("npm")
        .current_dir(&dir)
        .args(["test", "--silent"])
        .env("PLATFORM_BASE_URL", &h.base_bulk)
        .env("PLATFORM_API_KEY", &key)
        .env("PLATFORM_WORKSPACE_ID", &ws)
        .env("PLATFORM_LIMITED_BASE_URL", &limited)
        .env("PLATFORM_APPROVER_TOKEN", &approver)
        .env_remove("PLATFORM_SKIP_STACK")
        .kill_on_drop(true)
        .output()
        .await
        .expect("npm (make deps installs the package's dev dependencies)");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    assert!(out.status.success(), "the TypeScript client's suite failed (output above)");
}

/// The contract as a generator nobody here wrote reads it (openapi-python-client, from
/// `make deps`): no warnings, and a write's `Idempotency-Key` is a typed parameter.
#[test]
fn a_python_client_generated_from_the_contract_types_the_idempotency_key() {
    let root = tools::localstack::repo_root();
    let bin = root.join(".venv/bin");
    let out = root.join("target/python-client");
    let _ = std::fs::remove_dir_all(&out);
    // Its post-generation hook runs ruff, which the venv has.
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run = std::process::Command::new(bin.join("openapi-python-client"))
        .args(["generate", "--meta", "none", "--path"])
        .arg(root.join("openapi/openapi.json"))
        .arg("--output-path")
        .arg(&out)
        .env("PATH", path)
        .output()
        .expect("openapi-python-client (make deps installs it)");
    let log = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{log}");
    assert!(!log.contains("Warning"), "the generator warned:\n{log}");
    let create = std::fs::read_to_string(out.join("api/contacts/create_contact.py")).unwrap();
    assert!(create.contains("idempotency_key: str | Unset"), "{create}");
    assert!(create.contains("headers[\"Idempotency-Key\"] = idempotency_key"), "{create}");
}
