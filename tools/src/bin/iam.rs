//! `iam --check <dir>`: compares the AWS actions each function used in an end-to-end run, and
//! the resources it used them on (the `AWS_CALL_LOG` files, see `shared::metrics::record_call`),
//! with what its policy in template.yaml grants, and where. A use the policy does not cover
//! fails in AWS only (the emulators do not check IAM); a granted action no test uses is a
//! permission to remove, or a path to test.

fn main() {
    let dir = std::env::args().nth(2).unwrap_or_else(|| "target/aws-calls".into());
    let root = tools::localstack::repo_root();
    let template = std::fs::read_to_string(root.join("template.yaml")).expect("template.yaml");
    let granted = tools::iam::granted(&template);
    let used = tools::iam::used(std::path::Path::new(&dir));
    let problems = tools::iam::compare(&granted, &used);
    if problems.is_empty() {
        let actions: usize = used.values().map(|a| a.len()).sum();
        let resources: usize = used.values().flat_map(|a| a.values()).map(|r| r.len()).sum();
        eprintln!(
            "IAM policies grant exactly the {actions} actions the end-to-end run used ({} functions), on the {resources} (action, resource) pairs it used them on",
            used.len()
        );
        return;
    }
    for p in &problems {
        eprintln!("{p}");
    }
    std::process::exit(1);
}
