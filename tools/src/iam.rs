//! The IAM side of the template: which actions each function's policy grants, and on which
//! resources; which ones an end-to-end run used, and on which resources; and the difference
//! (`tools/src/bin/iam.rs`, run by `make test`). Nothing local enforces IAM, so a policy that
//! grants an action on the wrong queue passes every test unless this compares resources too.
//!
//! Resources are named as the template names them (its logical ids): `Table`,
//! `Table/index/<name>`, `EventsQueue`, `MailBucket/attachments/…`, `PlatformSecret`. The
//! functions log each call's target under those names (`shared::metrics::record_call`, which
//! maps a queue URL or a bucket to its logical id); the template's `Resource` lines are read
//! for `!GetAtt X.Arn`, `!Sub "${X.Arn}/path"` and a secret's `!Ref` (both branches of an `!If`
//! are read: in this template the other branch names an existing table or secret by parameter,
//! which yields nothing). SES identities and configuration sets are not compared (`*`, granted
//! to `ses:` actions only): access to them is a tag condition, which `tools/tests/template.rs`
//! checks. Statements are read as Allow with `Action` then `Resource` (anything else stops the
//! check); their `Condition`s are not evaluated.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Per function (its binary): each granted action and the resource patterns it is granted on.
pub type Grants = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;
/// Per function: each used action and the resources it was used on.
pub type Used = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// The binary a function resource deploys, from its `CodeUri` line: `make package` writes
/// each function's zip to `target/lambda/<binary>/bootstrap.zip`.
pub fn function_binary(line: &str) -> Option<&str> {
    line.trim().strip_prefix("CodeUri: target/lambda/")?.strip_suffix("/bootstrap.zip")
}

/// The resource patterns of a `Resource` value (one line, or the items of a list).
pub fn resource_patterns(text: &str) -> Vec<String> {
    let mut out = vec![];
    // Only an ARN names a resource to IAM: `.Arn`, never `.QueueUrl` or `.QueueName`.
    for part in text.split("!GetAtt ").skip(1) {
        if let Some((name, attr)) = part.split_once('.')
            && !name.is_empty()
            && attr.starts_with("Arn")
        {
            out.push(name.to_string());
        }
    }
    for part in text.split("${").skip(1) {
        if let Some((var, rest)) = part.split_once('}')
            && let Some(name) = var.strip_suffix(".Arn")
        {
            out.push(format!("{name}{}", rest.split('"').next().unwrap_or_default()));
        }
    }
    for part in text.split("!Ref ").skip(1) {
        let name: String = part.chars().take_while(|c| c.is_alphanumeric() || *c == ':').collect();
        // A secret's Ref is its ARN; a queue's is its URL and a bucket's its name, which IAM
        // matches to nothing. The `!If` branch for an existing secret names a parameter.
        if name.ends_with("Secret") && !name.starts_with("Existing") {
            out.push(name);
        }
    }
    if text.contains(":ses:") {
        out.push("*".into());
    }
    out
}

/// Each function's statements: the actions of each `Action` line with the patterns of the
/// `Resource` that follows it in the same statement.
pub fn granted(template: &str) -> Grants {
    let mut out = Grants::new();
    let mut binary: Option<String> = None;
    let mut policies_indent: Option<usize> = None;
    let mut actions: Vec<String> = vec![];
    // An open multi-line `Resource:` list: its indent and the text so far.
    let mut resource: Option<(usize, String)> = None;
    let grant = |out: &mut Grants, binary: &str, actions: &[String], text: &str| {
        let patterns = resource_patterns(text);
        let f = out.entry(binary.to_string()).or_default();
        for a in actions {
            // `*` (an SES identity or configuration set) only ever for SES's own actions.
            let mine = patterns.iter().filter(|p| *p != "*" || a.starts_with("ses:")).cloned();
            f.entry(a.clone()).or_default().extend(mine);
        }
    };
    for line in template.lines() {
        let indent = line.len() - line.trim_start().len();
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if let Some((at, text)) = &mut resource {
            if indent > *at && l.starts_with('-') {
                text.push(' ');
                text.push_str(l);
                continue;
            }
            let (_, text) = resource.take().expect("open");
            if let Some(b) = &binary {
                grant(&mut out, b, &actions, &text);
            }
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
        let (Some(b), Some(_)) = (&binary, policies_indent) else { continue };
        let item = l.strip_prefix("- ").unwrap_or(l);
        // A statement starts: its actions are its own (a Resource before its Action grants nothing).
        if l.starts_with("- Sid:") || l.starts_with("- Effect:") {
            actions.clear();
        }
        assert!(
            !item.starts_with("Effect: Deny") && !item.starts_with("NotAction") && !item.starts_with("NotResource"),
            "{b}: the IAM check reads Allow statements with Action and Resource only: {l}"
        );
        if let Some(list) = item.strip_prefix("Action: ") {
            actions = list.trim_matches(|c| c == '[' || c == ']').split(',').map(|a| a.trim().to_string()).collect();
            let f = out.entry(b.clone()).or_default();
            for a in &actions {
                f.entry(a.clone()).or_default();
            }
        } else if let Some(value) = item.strip_prefix("Resource:") {
            if value.trim().is_empty() {
                resource = Some((indent, String::new()));
            } else {
                grant(&mut out, b, &actions, value);
            }
        }
    }
    out
}

/// What the run's call logs say each function used (`<function> <action> <resource>`).
pub fn used(dir: &Path) -> Used {
    let mut out = Used::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for line in std::fs::read_to_string(entry.path()).unwrap_or_default().lines() {
            let mut parts = line.splitn(3, ' ');
            if let (Some(f), Some(a)) = (parts.next(), parts.next()) {
                // A line without its resource is an old log: never a pass.
                let r = parts.next().unwrap_or("unknown:resource").to_string();
                out.entry(f.to_string()).or_default().entry(a.to_string()).or_default().insert(r);
            }
        }
    }
    out
}

/// Does a granted pattern cover a used resource? `*` covers everything, `X/*` everything
/// under `X/`; a used `*` (a service whose resources are not compared) is covered by any grant.
pub fn covers(pattern: &str, resource: &str) -> bool {
    pattern == "*" || resource == "*" || pattern == resource || pattern.strip_suffix('*').is_some_and(|p| resource.starts_with(p))
}

/// Actions a function's code may need that no local run can make it use, with why.
pub const UNEXERCISED: &[(&str, &str, &str)] = &[
    ("gdpr-worker", "s3:AbortMultipartUpload", "an export that fails for good aborts its upload; no test makes one fail six runs in a row"),
    ("gdpr-worker", "s3:GetObject", "HeadObject, when a run died between completing an export's upload and recording it"),
    ("emails", "ses:TagResource", "CreateEmailIdentity with Tags is authorised as ses:TagResource as well; no separate call"),
    ("inbound-mail", "s3:ListBucket", "not a call: with it S3 answers 404 instead of 403 for a raw message already deleted"),
    ("emails", "s3:ListBucket", "not a call: with it S3 answers 404 instead of 403 for an upload or an email's file that is gone"),
    ("email-sender", "s3:ListBucket", "not a call: with it S3 answers 404 instead of 403 for an email's file already gone"),
];

/// Every use a policy does not cover (the action, or the action on that resource), and every
/// granted action nothing used.
pub fn compare(granted: &Grants, used: &Used) -> Vec<String> {
    let mut problems = vec![];
    let functions: BTreeSet<&String> = granted.keys().chain(used.keys()).collect();
    let none = BTreeMap::new();
    for f in functions {
        let g = granted.get(f).unwrap_or(&none);
        let u = used.get(f).unwrap_or(&none);
        for (a, resources) in u {
            let Some(patterns) = g.get(a) else {
                problems.push(format!("{f}: uses {a}, which its policy in template.yaml does not grant"));
                continue;
            };
            for r in resources {
                if !patterns.iter().any(|p| covers(p, r)) {
                    let on: Vec<&str> = patterns.iter().map(String::as_str).collect();
                    problems.push(format!("{f}: uses {a} on {r}, which its policy in template.yaml grants only on [{}]", on.join(", ")));
                }
            }
        }
        for a in g.keys().filter(|a| !u.contains_key(*a)) {
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

    fn used_of(f: &str, calls: &[(&str, &str)]) -> Used {
        let mut u = Used::new();
        for (a, r) in calls {
            u.entry(f.into()).or_default().entry(a.to_string()).or_default().insert(r.to_string());
        }
        u
    }

    #[test]
    fn policies_are_read_per_function_with_their_resources() {
        let t = "Resources:\n  Q:\n    Properties:\n      Statement:\n        - Action: sqs:SendMessage\n  F:\n    Properties:\n      CodeUri: target/lambda/posts/bootstrap.zip\n      Policies:\n        - Statement:\n            - Action: [dynamodb:GetItem, dynamodb:Query]\n              Resource: [!If [CreateTable, !GetAtt Table.Arn, !Sub \"arn:x:table/${ExistingTableName}\"], !If [CreateTable, !Sub \"${Table.Arn}/index/*\", !Sub \"arn:x\"]]\n            - Action: sqs:SendMessage\n              Resource:\n                - !GetAtt EventsQueue.Arn\n                - !Sub \"${MailBucket.Arn}/inbound/*\"\n      Events:\n        X:\n          Action: no\n";
        let g = granted(t);
        assert_eq!(g.len(), 1);
        assert_eq!(g["posts"]["dynamodb:Query"], BTreeSet::from(["Table".into(), "Table/index/*".into()]));
        assert_eq!(g["posts"]["sqs:SendMessage"], BTreeSet::from(["EventsQueue".into(), "MailBucket/inbound/*".into()]));
        let used = used_of("posts", &[("dynamodb:GetItem", "Table"), ("dynamodb:PutItem", "Table"), ("sqs:SendMessage", "EmailsQueue")]);
        let p = compare(&g, &used);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p.iter().any(|p| p.contains("uses dynamodb:PutItem")), "{p:?}");
        assert!(p.iter().any(|p| p.contains("uses sqs:SendMessage on EmailsQueue")), "{p:?}");
        assert!(p.iter().any(|p| p.contains("is granted dynamodb:Query")), "{p:?}");
    }

    /// The check on the real template: a queue taken out of one function's statement turns it
    /// red for that function's sends there.
    #[test]
    fn a_resource_missing_from_the_template_is_found() {
        let template = std::fs::read_to_string(crate::localstack::repo_root().join("template.yaml")).expect("template.yaml");
        let g = granted(&template);
        assert!(g["portal"]["sqs:SendMessage"].contains("EmailsQueue"), "the portal queues its sign-in mail");
        assert!(g["emails"]["dynamodb:Query"].contains("Table/index/*"));
        let used = used_of("emails", &[("sqs:SendMessage", "EmailsQueue")]);
        let only = |g: &Grants| compare(g, &used).into_iter().filter(|p| p.contains("on EmailsQueue")).collect::<Vec<_>>();
        assert!(only(&g).is_empty(), "{:?}", only(&g));
        let start = template.find("CodeUri: target/lambda/emails/bootstrap.zip").expect("the emails function");
        let (head, tail) = template.split_at(start);
        let cut = format!("{head}{}", tail.replacen(", !GetAtt EmailsQueue.Arn", "", 1));
        let p = only(&granted(&cut));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            covers("MailBucket/attachments/*", "MailBucket/attachments/x") && !covers("MailBucket/inbound/*", "MailBucket/attachments/x")
        );
        // Only ARNs name resources; SES's `*` is for SES's actions.
        assert_eq!(
            resource_patterns("[!GetAtt Q.QueueUrl, !Ref EmailsQueue, !Ref PlatformSecret, !GetAtt R.Arn]"),
            ["R", "PlatformSecret"]
        );
        let t = "  F:\n    Properties:\n      CodeUri: target/lambda/f/bootstrap.zip\n      Policies:\n        - Statement:\n            - Sid: Mixed\n              Action: [ses:SendEmail, sqs:SendMessage]\n              Resource: [!Sub \"arn:x:ses:y:identity/*\", !GetAtt EventsQueue.Arn]\n";
        let g = granted(t);
        assert_eq!(g["f"]["sqs:SendMessage"], BTreeSet::from(["EventsQueue".into()]));
        assert!(g["f"]["ses:SendEmail"].contains("*"));
    }
}
