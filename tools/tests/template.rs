//! template.yaml sends each area's paths to the function that serves them (one `ANY` route for
//! each root noun and one for everything under it: the function answers 404/405 itself), and
//! deploys every binary of the workspace, each built by `make package`.

use std::collections::{BTreeMap, BTreeSet};

/// (binary, method, path) of every HttpApi event, by the function resource it belongs to.
fn template_events(t: &str) -> BTreeMap<String, BTreeSet<(String, String)>> {
    let mut out: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    let mut binary = String::new();
    let lines: Vec<&str> = t.lines().map(str::trim).collect();
    for (i, l) in lines.iter().enumerate() {
        if let Some(b) = tools::iam::function_binary(l) {
            binary = b.to_string();
        }
        if let Some(m) = l.strip_prefix("Method: ")
            && let Some(p) = lines.get(i + 1).and_then(|n| n.strip_prefix("Path: "))
        {
            out.entry(binary.clone()).or_default().insert((m.to_string(), p.to_string()));
        }
    }
    out
}

#[test]
fn every_area_function_gets_exactly_its_root_nouns() {
    let t = std::fs::read_to_string(tools::localstack::repo_root().join("template.yaml")).unwrap();
    let mut events = template_events(&t);
    // The workspaces function also answers every unknown path with the 404 envelope.
    assert!(events.get_mut("workspaces").is_some_and(|e| e.remove(&("ANY".into(), "$default".into()))), "a $default route");
    for (binary, routes) in tools::gateway::areas() {
        let roots: BTreeSet<&str> = routes.iter().filter_map(|r| r.path.split('/').nth(1)).collect();
        let expected: BTreeSet<(String, String)> = roots
            .iter()
            .flat_map(|r| [("ANY".to_string(), format!("/api/v1/{r}")), ("ANY".to_string(), format!("/api/v1/{r}/{{proxy+}}"))])
            .collect();
        assert_eq!(events.remove(binary).unwrap_or_default(), expected, "the API routes of the {binary} function");
    }
    assert!(events.is_empty(), "API routes to functions that serve none: {events:?}");
    assert!(t.contains("WEBHOOK_ALLOW_LOOPBACK: \"false\""), "production URL rules");
}

#[test]
fn every_binary_is_packaged_and_deployed_by_a_function() {
    let t = std::fs::read_to_string(tools::localstack::repo_root().join("template.yaml")).unwrap();
    let meta = std::process::Command::new(env!("CARGO")).args(["metadata", "--format-version", "1", "--no-deps"]).output().unwrap();
    let meta: serde_json::Value = serde_json::from_slice(&meta.stdout).unwrap();
    let makefile_functions = tools::functions();
    for p in meta["packages"].as_array().unwrap() {
        if !p["manifest_path"].as_str().unwrap().contains("/functions/") {
            continue;
        }
        for target in p["targets"].as_array().unwrap().iter().filter(|t| t["kind"][0] == "bin") {
            let bin = target["name"].as_str().unwrap();
            assert!(t.contains(&format!("CodeUri: target/lambda/{bin}/bootstrap.zip\n")), "no function in template.yaml deploys {bin}");
            assert!(makefile_functions.iter().any(|f| f == bin), "`make package` does not build {bin} (FUNCTIONS in the Makefile)");
        }
    }
}

/// The outputs the admin CLI's `--outputs` reads are outputs of the template.
#[test]
fn the_stack_outputs_every_value_the_admin_cli_needs() {
    let t = std::fs::read_to_string(tools::localstack::repo_root().join("template.yaml")).unwrap();
    let outputs = &t[t.find("\nOutputs:\n").expect("an Outputs section")..];
    for (key, var) in tools::admin::STACK_OUTPUTS {
        assert!(outputs.contains(&format!("\n  {key}:\n")), "template.yaml outputs no {key} (the admin CLI's {var})");
    }
}
