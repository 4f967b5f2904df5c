//! The crate graph of architecture.md: function crates depend on `shared` and `domain`, never
//! on each other; `domain` depends on `shared`, and `shared` on no crate of the workspace.

fn workspace_deps() -> Vec<(String, String, Vec<String>)> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(tools::localstack::repo_root())
        .output()
        .expect("cargo metadata");
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["path"].is_string())
                .map(|d| d["name"].as_str().expect("name").to_string())
                .collect();
            (p["name"].as_str().expect("name").to_string(), p["manifest_path"].as_str().expect("manifest").to_string(), deps)
        })
        .collect()
}

#[test]
fn no_function_crate_depends_on_another() {
    let pkgs = workspace_deps();
    let functions: Vec<&str> = pkgs.iter().filter(|(_, m, _)| m.contains("/functions/")).map(|(n, _, _)| n.as_str()).collect();
    assert!(functions.len() >= 9, "found the function crates: {functions:?}");
    for (name, manifest, deps) in &pkgs {
        if manifest.contains("/functions/") {
            for d in deps {
                assert!(!functions.contains(&d.as_str()), "{name} depends on the function crate {d}; move what they share to domain/");
                assert!(["shared", "domain"].contains(&d.as_str()), "{name} depends on {d}");
            }
        }
        match name.as_str() {
            "shared" => assert!(deps.is_empty(), "shared is the bottom layer: {deps:?}"),
            "domain" => assert_eq!(deps, &vec!["shared".to_string()], "domain sits on shared only"),
            _ => {}
        }
    }
}
