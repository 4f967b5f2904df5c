//! Rotating the platform secret on the local stack (Secrets Manager in moto), as
//! docs/deploy.md tells an operator to: a webhook's signing secret sealed under the old root
//! still opens in a container started after the rotation, new secrets are sealed under the new
//! root only, and an erased address stays recognised.

#[tokio::test]
async fn a_rotated_platform_secret_still_opens_what_the_old_root_sealed() {
    let root = tools::localstack::repo_root();
    let stack = tools::DevStack::start(&root.join("target/e2e-logs/rotation"), 0).await.expect("local stack");
    let (ws, key) = domain::workspaces::create_workspace(&stack.app, "rotation").await.unwrap();
    let ws = ws.id;
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/webhooks", stack.base_url))
        .bearer_auth(&key)
        .json(&serde_json::json!({"url": "http://127.0.0.1:9/hook"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let created: serde_json::Value = r.json().await.unwrap();
    let (endpoint, secret) = (created["data"]["id"].as_str().unwrap().to_string(), created["data"]["secret"].as_str().unwrap().to_string());
    let erased_before = domain::privacy::tombstone_sk(&stack.app, &ws, "gone@example.org").await.unwrap();

    // The operator's rotation: a new root, the old one retired.
    let secrets = aws_sdk_secretsmanager::Client::new(&stack.sdk);
    let id = stack.config().platform_secret_id;
    let old: serde_json::Value =
        serde_json::from_str(&secrets.get_secret_value().secret_id(&id).send().await.unwrap().secret_string.unwrap()).unwrap();
    let rotated = serde_json::json!({"root_key": "n".repeat(64), "retired_root_keys": [old["root_key"]]});
    secrets.put_secret_value().secret_id(&id).secret_string(rotated.to_string()).send().await.unwrap();

    // A container started after it.
    let fresh = stack.new_app(stack.config()).unwrap();
    let stored =
        domain::webhooks::load_endpoint(&fresh, &ws, &domain::ids::EndpointId::trusted(&endpoint)).await.unwrap().expect("the endpoint");
    let keys = stored.signing_keys(&fresh, &ws).await.expect("the old seal opens");
    assert_eq!(keys, vec![shared::signing::secret_key(&secret).unwrap()]);
    assert_eq!(domain::privacy::tombstone_sk(&fresh, &ws, "gone@example.org").await.unwrap(), erased_before, "tombstones keep their keys");

    // New seals are the new root's: a container that knows only the old root cannot open them.
    let (_, sealed) = domain::webhooks::new_secret(&fresh, &ws, &endpoint).await.unwrap();
    let old_only = shared::app::PlatformSecret::parse(&old.to_string()).unwrap();
    assert!(old_only.open(&format!("{ws}/{endpoint}"), &sealed.sealed).is_err());
    stack.stop().await;
}
