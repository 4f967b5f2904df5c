//! `iam --check <dir>`: compares the AWS actions each function used in an end-to-end run
//! (the `AWS_CALL_LOG` files, see `shared::metrics::as_function`) with what its policy in
//! template.yaml grants. A used action the policy lacks fails in AWS only (the emulators do
//! not check IAM); a granted action no test uses is a permission to remove, or a path to test.

use std::collections::BTreeSet;

fn main() {
    let dir = std::env::args().nth(2).unwrap_or_else(|| "target/aws-calls".into());
    let root = tools::localstack::repo_root();
    let template = std::fs::read_to_string(root.join("template.yaml")).expect("template.yaml");
    let granted = tools::iam::granted(&template);
    let used = tools::iam::used(std::path::Path::new(&dir));
    let problems = tools::iam::compare(&granted, &used);
    if problems.is_empty() {
        let n: usize = used.values().map(BTreeSet::len).sum();
        eprintln!("IAM policies grant exactly the {n} actions the end-to-end run used ({} functions)", used.len());
        return;
    }
    for p in &problems {
        eprintln!("{p}");
    }
    std::process::exit(1);
}
