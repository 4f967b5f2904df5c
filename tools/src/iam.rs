//! The IAM side of the template: which actions each function's policy grants, which ones an
//! end-to-end run used, and the difference (`tools/src/bin/iam.rs`, run by `make test`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub type Actions = BTreeMap<String, BTreeSet<String>>;

/// Actions of each function's `Policies` (by the binary its `CodeUri` deploys), from template.yaml's text.
/// The binary a function resource deploys, from its `CodeUri` line: `make package` writes
/// each function's zip to `target/lambda/<binary>/bootstrap.zip`.
pub fn function_binary(line: &str) -> Option<&str> {
    line.trim().strip_prefix("CodeUri: target/lambda/")?.strip_suffix("/bootstrap.zip")
}

pub fn granted(template: &str) -> Actions {
    let mut out = Actions::new();
    let mut binary: Option<String> = None;
    let mut policies_indent: Option<usize> = None;
    for line in template.lines() {
        let indent = line.len() - line.trim_start().len();
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if indent <= 2 {
            binary = None;
            policies_indent = None;
        }
        if let Some(b) = function_binary(l) {
            binary = Some(b.to_string());
        }
        if l == "Policies:" {
            policies_indent = Some(indent);
            continue;
        }
        if policies_indent.is_some_and(|p| indent <= p) {
            policies_indent = None;
        }
        let action = l.strip_prefix("- ").unwrap_or(l).strip_prefix("Action: ");
        if let (Some(b), Some(_), Some(actions)) = (&binary, policies_indent, action) {
            let set = out.entry(b.clone()).or_default();
            for a in actions.trim_matches(|c| c == '[' || c == ']').split(',') {
                set.insert(a.trim().to_string());
            }
        }
    }
    out
}

/// What the run's call logs say each function used.
pub fn used(dir: &Path) -> Actions {
    let mut out = Actions::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for line in std::fs::read_to_string(entry.path()).unwrap_or_default().lines() {
            if let Some((f, a)) = line.split_once(' ') {
                out.entry(f.to_string()).or_default().insert(a.to_string());
            }
        }
    }
    out
}

/// Actions a function's code may need that no local run can make it use, with why.
pub const UNEXERCISED: &[(&str, &str, &str)] = &[
    ("gdpr-worker", "s3:AbortMultipartUpload", "an export that fails for good aborts its upload; no test makes one fail six runs in a row"),
    ("gdpr-worker", "s3:GetObject", "HeadObject, when a run died between completing an export's upload and recording it"),
    ("emails", "ses:TagResource", "CreateEmailIdentity with Tags is authorised as ses:TagResource as well; no separate call"),
    ("inbound-mail", "s3:ListBucket", "not a call: with it S3 answers 404 instead of 403 for a raw message already deleted"),
];

/// Every used action missing from a policy, and every granted one nothing used.
pub fn compare(granted: &Actions, used: &Actions) -> Vec<String> {
    let mut problems = vec![];
    let functions: BTreeSet<&String> = granted.keys().chain(used.keys()).collect();
    for f in functions {
        let g = granted.get(f).cloned().unwrap_or_default();
        let u = used.get(f).cloned().unwrap_or_default();
        for a in u.difference(&g) {
            problems.push(format!("{f}: uses {a}, which its policy in template.yaml does not grant"));
        }
        for a in g.difference(&u) {
            if !UNEXERCISED.iter().any(|(uf, ua, _)| uf == f && ua == a) {
                problems.push(format!("{f}: is granted {a}, which no end-to-end test made it use (remove it, or test the path)"));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_are_read_per_function() {
        let t = "Resources:\n  Q:\n    Properties:\n      Statement:\n        - Action: sqs:SendMessage\n  F:\n    Properties:\n      CodeUri: target/lambda/posts/bootstrap.zip\n      Policies:\n        - Statement:\n            - Action: [dynamodb:GetItem, dynamodb:Query]\n            - Action: sqs:SendMessage\n      Events:\n        X:\n          Action: no\n";
        let g = granted(t);
        assert_eq!(g.len(), 1);
        assert_eq!(g["posts"], BTreeSet::from(["dynamodb:GetItem".into(), "dynamodb:Query".into(), "sqs:SendMessage".into()]));
        let used = Actions::from([("posts".into(), BTreeSet::from(["dynamodb:GetItem".into(), "dynamodb:PutItem".into()]))]);
        let p = compare(&g, &used);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].contains("uses dynamodb:PutItem"));
    }
}
