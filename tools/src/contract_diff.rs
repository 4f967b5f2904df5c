//! The breaking-change check: the contract against the last released one
//! (`openapi/released/openapi.json`), by Optic (npm `@useoptic/optic`, `tools/optic`), whose
//! rules say what breaks a client (a removed response field or operation, a new required
//! request field, a narrowed type...). A breaking change passes only when the changelog's
//! `## Unreleased` section lists each operation it breaks under `### Breaking` (docs/api.md,
//! "Changes to version 1").

use std::path::Path;
use std::process::{Command, Stdio};

/// What Optic found breaking: each operation (`GET /contacts`), and its report.
#[derive(Debug)]
pub struct Breaking {
    pub operations: Vec<String>,
    pub report: String,
}

/// Compare `head` with `base`; `None` when nothing breaks.
pub fn compare(base: &Path, head: &Path) -> Result<Option<Breaking>, String> {
    let root = crate::localstack::repo_root();
    let optic = root.join("tools/optic/node_modules/@useoptic/optic/build/index.js");
    if !optic.is_file() {
        return Err(format!("{} is missing: run `make deps`", optic.display()));
    }
    // Optic writes `ci-run-details.json` where it runs (with `CI` set): a directory of its own.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cwd = std::env::temp_dir().join(format!("contract-diff-run-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&cwd).map_err(|e| format!("{}: {e}", cwd.display()))?;
    let out = Command::new("node")
        .current_dir(&cwd)
        .arg(&optic)
        .args(["diff"])
        .arg(base)
        .arg(head)
        .arg("--check")
        // No telemetry, no prompts, and nothing leaves the machine (a proxy on a closed port).
        .env("OPTIC_TELEMETRY_LEVEL", "off")
        .env("CI", "true")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("node: {e}"))?;
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    match out.status.code() {
        Some(0) => Ok(None),
        Some(1) => {
            let operations = breaking_operations(&report);
            Ok((!operations.is_empty()).then_some(Breaking { operations, report }))
        }
        _ => Err(format!("optic failed ({}):\n{report}", out.status)),
    }
    .inspect(|_| {
        let _ = std::fs::remove_dir_all(&cwd);
    })
}

/// The operations of Optic's report that break a client. Each failing operation has a heading
/// (`x GET /contacts:`, or `x GET /p: removed`) and, under the property it is about, each
/// finding (`x [rule] ...`). A finding about a property inside one this same change added is
/// not a break: Optic's "a new required request property" rule fires on the required fields
/// of a new optional object (a file's `filename` in a new `attachments` list), which no
/// existing client sends.
fn breaking_operations(report: &str) -> Vec<String> {
    struct Op {
        name: String,
        added: Vec<(String, String)>,
        findings: Vec<Option<(String, String)>>,
    }
    let mut ops: Vec<Op> = vec![];
    let (mut section, mut property) = (String::new(), None::<String>);
    for line in report.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("x ")
            && let Some((name, _)) = rest.split_once(':')
            && name.split(' ').next().is_some_and(|m| ["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&m))
        {
            ops.push(Op { name: name.trim().to_string(), added: vec![], findings: vec![] });
            (section, property) = (String::new(), None);
            continue;
        }
        let Some(op) = ops.last_mut() else { continue };
        if line == "- request:" || (line.starts_with("- response ") && line.ends_with(':')) {
            (section, property) = (line.to_string(), None);
        } else if let Some(rest) = line.strip_prefix("- property ") {
            let (path, what) = rest.split_once(':').unwrap_or((rest, ""));
            property = Some(path.trim().to_string());
            if what.trim() == "added" {
                op.added.push((section.clone(), path.trim().to_string()));
            }
        } else if line.starts_with("x [") {
            op.findings.push(property.clone().map(|p| (section.clone(), p)));
        }
    }
    let excused = |op: &Op, finding: &Option<(String, String)>| {
        finding.as_ref().is_some_and(|(sec, path)| op.added.iter().any(|(s, a)| s == sec && path.starts_with(&format!("{a}/"))))
    };
    let mut out: Vec<String> =
        ops.iter().filter(|op| op.findings.is_empty() || op.findings.iter().any(|f| !excused(op, f))).map(|op| op.name.clone()).collect();
    out.dedup();
    out
}

/// The operations the changelog's `## Unreleased` section lists as breaking (`- GET /contacts: ...`
/// lines under `### Breaking`).
pub fn declared_breaking(changelog: &str) -> Vec<String> {
    let unreleased = changelog.split("\n## ").find(|s| s.starts_with("Unreleased")).unwrap_or_default();
    let breaking = unreleased.split("\n### ").find(|s| s.starts_with("Breaking")).unwrap_or_default();
    breaking
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .filter_map(|l| l.split(':').next().map(|op| op.trim().trim_matches('`').to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn required_fields_inside_an_added_property_break_nothing() {
        let report = "x POST /emails: \n  - request: \n    - body application/json: \n      - property /schema/properties/attachments: added\n      - property /schema/properties/attachments/items/properties/content: \n\n        x [prevent changing request property to required] cannot add a required request property 'content'\n\nx POST /contacts: \n  - request: \n    - body application/json: \n      - property /schema/properties/name: \n\n        x [prevent changing request property to required] cannot add a required request property 'name'\nx GET /p: removed\n";
        assert_eq!(super::breaking_operations(report), ["POST /contacts", "GET /p"]);
    }

    #[test]
    fn the_changelog_names_what_it_breaks() {
        let log = "# Changes\n\n## Unreleased\n\n### Added\n\n- `GET /x`: new\n\n### Breaking\n\n- `GET /contacts`: `phone` removed\n- DELETE /deals/{id}: gone\n\n## 1.0.0\n\n### Breaking\n\n- `GET /old`: was\n";
        assert_eq!(super::declared_breaking(log), ["GET /contacts", "DELETE /deals/{id}"]);
    }
}
