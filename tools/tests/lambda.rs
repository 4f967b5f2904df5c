//! A function process under the local Lambda Runtime API, against the local stack: the
//! event -> request -> pipeline -> API Gateway response document path that only runs in
//! Lambda (the dev gateway calls the pipeline directly).

use std::path::Path;
use tools::runtime_api::{cold_start, http_event};

#[tokio::test]
async fn an_area_function_answers_api_gateway_events() {
    let logs = tools::localstack::repo_root().join("target/e2e-logs/lambda");
    let stack = tools::DevStack::start(&logs, 0).await.expect("local stack");
    let (_, key) = domain::workspaces::create_workspace(&stack.app, "lambda runtime").await.unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_area-lambda"));
    let mut env = stack.env();
    env.push(("AREA", "posts".into()));

    // A write with a body, then a read of what it made, each in a fresh process.
    let body = serde_json::json!({"content": "from a Lambda event: é ✓"});
    let created = cold_start(binary, &env, &http_event("POST", "/api/v1/posts", &key, Some(&body))).await.expect("POST runs");
    let doc = created.answer.expect("the function answered");
    assert_eq!(doc["statusCode"], 201, "{doc}");
    assert_eq!(doc["isBase64Encoded"], false, "{doc}");
    assert!(doc["headers"]["content-type"].as_str().unwrap().starts_with("application/json"), "{doc}");
    let post: serde_json::Value = serde_json::from_str(doc["body"].as_str().expect("a text body")).unwrap();
    assert_eq!(post["data"]["content"], "from a Lambda event: é ✓");
    let id = post["data"]["id"].as_str().unwrap();

    let read = cold_start(binary, &env, &http_event("GET", &format!("/api/v1/posts/{id}"), &key, None)).await.expect("GET runs");
    let doc = read.answer.expect("the function answered");
    assert_eq!(doc["statusCode"], 200, "{doc}");
    let got: serde_json::Value = serde_json::from_str(doc["body"].as_str().unwrap()).unwrap();
    assert_eq!(got["data"]["id"], id);

    // Errors leave in the envelope too, with the request id API Gateway gave the event.
    let missing =
        cold_start(binary, &env, &http_event("GET", "/api/v1/posts/post_01J00000000000000000000000", &key, None)).await.expect("GET runs");
    let doc = missing.answer.expect("the function answered");
    assert_eq!(doc["statusCode"], 404, "{doc}");
    let err: serde_json::Value = serde_json::from_str(doc["body"].as_str().unwrap()).unwrap();
    assert_eq!(err["error"]["code"], "NOT_FOUND", "{err}");
    assert_eq!(err["error"]["request_id"], "cold-start-1", "{err}");
    stack.stop().await;
}
