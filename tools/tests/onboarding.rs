//! The README's onboarding, as a team runs it after `sam deploy`: the admin CLI configured by
//! nothing but the stack's outputs file and an AWS profile (no configuration variables, no
//! credentials in the environment) creates the first workspace, whose key then works over HTTP.
//! The local stack writes its outputs in the shape `sam list stack-outputs --output json` prints,
//! so this runs the very command the README gives.

use std::path::Path;

#[tokio::test]
async fn the_admin_cli_onboards_a_workspace_from_the_stack_outputs_and_a_profile() {
    let root = tools::localstack::repo_root();
    let logs = root.join("target/e2e-logs/onboarding");
    let stack = tools::DevStack::start(&logs, 0).await.expect("local stack");
    let dir = root.join("target/tmp").join(shared::ids::new_id("onboarding"));
    std::fs::create_dir_all(&dir).unwrap();
    let outputs = dir.join("stack-outputs.json");
    std::fs::write(&outputs, stack.outputs_json()).unwrap();
    // Credentials from a named profile, as an operator's machine has them.
    std::fs::write(dir.join("credentials"), "[platform-ops]\naws_access_key_id = local\naws_secret_access_key = local\n").unwrap();
    std::fs::write(dir.join("config"), "[profile platform-ops]\noutput = json\n").unwrap();
    let env = stack.env();
    let endpoint = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()).unwrap();

    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(Path::new(env!("CARGO_BIN_EXE_admin")));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &dir)
            .env("AWS_PROFILE", "platform-ops")
            .env("AWS_CONFIG_FILE", dir.join("config"))
            .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("credentials"))
            // The emulators stand where AWS's endpoints would.
            .env("AWS_ENDPOINT_URL", endpoint("AWS_ENDPOINT_URL"))
            .env("AWS_ENDPOINT_URL_DYNAMODB", endpoint("AWS_ENDPOINT_URL_DYNAMODB"))
            .args(args);
        cmd.output().unwrap()
    };
    // With the emulators' endpoints in the environment the CLI refuses a stack's outputs file
    // (a shell that sourced .local/dev.env) unless told the local stack is meant.
    let refused = run(&["--outputs", outputs.to_str().unwrap(), "create-workspace", "--name", "Onboarded"]);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("--local"), "{:?}", refused);
    let out = run(&["--outputs", outputs.to_str().unwrap(), "--local", "create-workspace", "--name", "Onboarded"]);
    assert!(out.status.success(), "admin failed: {}", String::from_utf8_lossy(&out.stderr));
    let created: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let key = created["api_key"].as_str().expect("the first key");

    let r = reqwest::Client::new().get(format!("{}/workspaces/current", stack.base_url)).bearer_auth(key).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["data"]["name"], "Onboarded", "{body}");
    assert_eq!(body["data"]["id"], created["workspace_id"]);

    // Without the outputs, it says what is missing instead of guessing.
    let out = run(&["create-workspace", "--name", "Nowhere"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing environment variable"), "{}", String::from_utf8_lossy(&out.stderr));
    // A file that is not a stack's outputs is named as such.
    std::fs::write(dir.join("other.json"), r#"[{"OutputKey": "ApiBaseUrl", "OutputValue": "x"}]"#).unwrap();
    let out = run(&["--outputs", dir.join("other.json").to_str().unwrap(), "create-workspace", "--name", "X"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no Region"), "{}", String::from_utf8_lossy(&out.stderr));
    stack.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
