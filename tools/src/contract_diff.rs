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
            // Each failing operation's heading: `x GET /contacts:`, or `x GET /p: removed`.
            let mut operations: Vec<String> = report
                .lines()
                .filter_map(|l| l.trim().strip_prefix("x ")?.split_once(':').map(|(op, _)| op.trim().to_string()))
                .filter(|l| l.split(' ').next().is_some_and(|m| ["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&m)))
                .collect();
            operations.dedup();
            Ok(Some(Breaking { operations, report }))
        }
        _ => Err(format!("optic failed ({}):\n{report}", out.status)),
    }
    .inspect(|_| {
        let _ = std::fs::remove_dir_all(&cwd);
    })
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
    fn the_changelog_names_what_it_breaks() {
        let log = "# Changes\n\n## Unreleased\n\n### Added\n\n- `GET /x`: new\n\n### Breaking\n\n- `GET /contacts`: `phone` removed\n- DELETE /deals/{id}: gone\n\n## 1.0.0\n\n### Breaking\n\n- `GET /old`: was\n";
        assert_eq!(super::declared_breaking(log), ["GET /contacts", "DELETE /deals/{id}"]);
    }
}
