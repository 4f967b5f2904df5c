//! The one list of functions is the folders of `functions/`. From them `make generate` writes
//! what every function repeats, so adding an area is its crate (with its `stack.yaml`), its
//! `domain` module and one command:
//!
//! - each function's log group and resource in `template.yaml`, from its `stack.yaml` (the
//!   properties only it has: description, policies, queues, schedules) plus what all share
//!   (JSON logs into their own group, the code's location, the checkov notes, an `ANY` route for
//!   each root noun its `Api` names and one for everything under it);
//! - the workspace's path dependencies on the function crates (root `Cargo.toml`), the tools
//!   crate's dependencies on the API areas and `api_areas!` (the dev gateway and the contract).
//!
//! Each generated part sits between a `BEGIN generated` and an `END generated` line; `make test`
//! fails when one is stale (`tools/tests/template.rs`), and proves in a temporary copy that a
//! new area needs no other edit. Text in, text out: the generator reads no crate, so it also
//! runs on a copy whose new crate was never built.

use crate::camel;
use std::path::{Path, PathBuf};

/// One folder of `functions/`.
#[derive(Debug)]
pub struct Function {
    /// The folder, which is the package and binary name (`contact-import`).
    pub folder: String,
    /// Whether its library declares an API area (`shared::area!`).
    pub area: bool,
    /// Whether it has a library a dependency can name (`src/lib.rs`).
    pub lib: bool,
    /// The root nouns under `/api/v1` it serves (`Api:` in its `stack.yaml`).
    pub api: Vec<String>,
    stack: Vec<String>,
}

impl Function {
    /// The crate's Rust name (`contact_import`).
    pub fn krate(&self) -> String {
        self.folder.replace('-', "_")
    }

    /// Its resources' prefix in `template.yaml` (`ContactImport`: `ContactImportFunction`).
    pub fn resource(&self) -> String {
        camel(&self.folder)
    }
}

/// Every folder of `functions/` holding a crate, sorted.
pub fn functions(root: &Path) -> Result<Vec<Function>, String> {
    let dir = root.join("functions");
    let mut out = vec![];
    for e in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let p = e.map_err(|e| e.to_string())?.path();
        if !p.join("Cargo.toml").is_file() {
            continue;
        }
        let folder = p.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let stack_path = p.join("stack.yaml");
        let stack = std::fs::read_to_string(&stack_path)
            .map_err(|e| format!("{}: {e} (every function says there what only it needs)", stack_path.display()))?;
        let lib = std::fs::read_to_string(p.join("src/lib.rs")).ok();
        let mut f = Function {
            area: lib.as_deref().is_some_and(|l| l.contains("shared::area!")),
            lib: lib.is_some(),
            folder,
            api: vec![],
            stack: stack.lines().map(str::to_string).collect(),
        };
        f.api = f.api_nouns().map_err(|e| format!("{}: {e}", stack_path.display()))?;
        out.push(f);
    }
    out.sort_by(|a, b| a.folder.cmp(&b.folder));
    Ok(out)
}

/// A top-level key of a `stack.yaml` with its lines (the comments just above it included).
struct Block<'a> {
    key: &'a str,
    lines: &'a [String],
}

impl Function {
    /// The leading comment (the resource's) and the top-level blocks.
    fn blocks(&self) -> (&[String], Vec<Block<'_>>) {
        let starts: Vec<usize> =
            (0..self.stack.len()).filter(|&i| self.stack[i].chars().next().is_some_and(|c| c != ' ' && c != '#')).collect();
        let Some(&first) = starts.first() else { return (&self.stack, vec![]) };
        // A key's comments are the comment lines right above it; those above the first key are
        // the resource's.
        let begin = |i: usize| {
            let mut b = i;
            while b > first && self.stack[b - 1].starts_with('#') {
                b -= 1;
            }
            b
        };
        let mut blocks = vec![];
        for (n, &s) in starts.iter().enumerate() {
            let from = begin(s);
            let to = starts.get(n + 1).map_or(self.stack.len(), |&next| begin(next));
            let key = self.stack[s].split(':').next().unwrap_or_default();
            blocks.push(Block { key, lines: &self.stack[from..to] });
        }
        (&self.stack[..first], blocks)
    }

    fn api_nouns(&self) -> Result<Vec<String>, String> {
        let (_, blocks) = self.blocks();
        let Some(b) = blocks.iter().find(|b| b.key == "Api") else { return Ok(vec![]) };
        let line = b.lines.iter().find(|l| l.starts_with("Api:")).map(String::as_str).unwrap_or_default();
        let list = line["Api:".len()..]
            .trim()
            .strip_prefix('[')
            .and_then(|l| l.strip_suffix(']'))
            .ok_or("`Api:` is a one-line list: Api: [nouns]")?;
        let nouns: Vec<String> = list.split(',').map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect();
        match nouns.iter().find(|n| !n.chars().all(|c| c.is_ascii_lowercase() || c == '-')) {
            Some(bad) => Err(format!("`{bad}` is not a root noun (lowercase and hyphens)")),
            None => Ok(nouns),
        }
    }

    /// Its log group and function resource, as `template.yaml` holds them.
    fn resources(&self) -> String {
        let (r, folder) = (self.resource(), &self.folder);
        let (lead, blocks) = self.blocks();
        let indent = |lines: &[String], by: &str| -> String {
            lines.iter().map(|l| if l.is_empty() { "\n".to_string() } else { format!("{by}{l}\n") }).collect()
        };
        let mut s = format!("  {r}Logs:\n{LOG_GROUP}\n");
        s += &indent(lead, "  ");
        s += &format!("  {r}Function:\n    Type: AWS::Serverless::Function\n");
        match blocks.iter().find(|b| b.key == "Metadata") {
            Some(m) => s += &indent(m.lines, "    "),
            None => s += FUNCTION_METADATA,
        }
        s += &format!(
            "    Properties:\n      LoggingConfig:\n        LogFormat: JSON\n        LogGroup: !Ref {r}Logs\n      CodeUri: target/lambda/{folder}/bootstrap.zip\n"
        );
        for b in blocks.iter().filter(|b| !matches!(b.key, "Api" | "Metadata" | "Events")) {
            s += &indent(b.lines, "      ");
        }
        let events = blocks.iter().find(|b| b.key == "Events");
        if !self.api.is_empty() || events.is_some() {
            s += "      Events:\n";
            for noun in &self.api {
                let name = camel(noun);
                for (suffix, path) in [("Root", format!("/api/v1/{noun}")), ("Proxy", format!("/api/v1/{noun}/{{proxy+}}"))] {
                    s += &format!(
                        "        {name}{suffix}:\n          Type: HttpApi\n          Properties:\n            ApiId: !Ref HttpApi\n            Method: ANY\n            Path: {path}\n"
                    );
                }
            }
            if let Some(e) = events {
                // Its entries, without the `Events:` line (and the comments above it).
                let at = e.lines.iter().position(|l| l.starts_with("Events:")).unwrap_or(0);
                s += &indent(&e.lines[at + 1..], "      ");
            }
        }
        s
    }
}

const LOG_GROUP: &str = r#"    Type: AWS::Logs::LogGroup
    Metadata:
      checkov:
        skip:
          - id: CKV_AWS_158
            comment: "logs hold request ids, routes and statuses, never bodies or secrets; CloudWatch Logs encrypts them at rest and LogRetentionDays expires them"
    Properties:
      RetentionInDays: !Ref LogRetentionDays
"#;

/// What checkov is told about every function (a `Metadata:` block in its `stack.yaml` replaces it).
const FUNCTION_METADATA: &str = r#"    Metadata:
      checkov:
        skip:
          - id: CKV_AWS_115
            comment: "reserved concurrency fails on new accounts (limit 10) and throttles SQS messages into DLQs; the gateway, per-key token buckets and event-source ScalingConfig bound load"
          - id: CKV_AWS_116
            comment: "invoked synchronously (API Gateway) or by SQS event sources whose queues have their own DLQs; scheduled ticks simply run again a minute later"
          - id: CKV_AWS_117
            comment: "reaches only AWS APIs (IAM over TLS) and public webhook/channel endpoints through the SSRF-safe client; a VPC adds NAT cost and cold-start time for no isolation gained"
          - id: CKV_AWS_173
            comment: "the environment holds resource names and URLs only (secrets come from Secrets Manager at run time); Lambda encrypts it at rest with the AWS-managed key"
"#;

/// A generated part, one per file: the file, the comment that starts its marker lines, and the
/// part's text.
struct Part {
    file: &'static str,
    comment: &'static str,
    text: String,
}

fn parts(fs: &[Function]) -> Vec<Part> {
    let template = format!("\n{}\n", fs.iter().map(Function::resources).collect::<Vec<_>>().join("\n"));
    let workspace: String =
        fs.iter().filter(|f| f.lib).map(|f| format!("{} = {{ path = \"functions/{}\" }}\n", f.folder, f.folder)).collect();
    let tools: String = fs.iter().filter(|f| f.area).map(|f| format!("{}.workspace = true\n", f.folder)).collect();
    let areas = format!("api_areas!({});\n", fs.iter().filter(|f| f.area).map(Function::krate).collect::<Vec<_>>().join(", "));
    vec![
        Part { file: "template.yaml", comment: "  #", text: template },
        Part { file: "Cargo.toml", comment: "#", text: workspace },
        Part { file: "tools/Cargo.toml", comment: "#", text: tools },
        Part { file: "tools/src/lib.rs", comment: "//", text: areas },
    ]
}

/// `text` with the part between its marker lines replaced.
fn splice(text: &str, part: &Part) -> Result<String, String> {
    let begin = format!("{} BEGIN generated", part.comment);
    let end = format!("{} END generated", part.comment);
    let b = text.find(&begin).ok_or_else(|| format!("{}: no `{begin}` line", part.file))?;
    let body = b + text[b..].find('\n').ok_or("no line after the marker")? + 1;
    let e = body + text[body..].find(&end).ok_or_else(|| format!("{}: no `{end}` line", part.file))?;
    Ok(format!("{}{}{}", &text[..body], part.text, &text[e..]))
}

/// Every generated file as it should be: (path, current text, generated text).
pub fn generated(root: &Path) -> Result<Vec<(PathBuf, String, String)>, String> {
    parts(&functions(root)?)
        .into_iter()
        .map(|part| {
            let path = root.join(part.file);
            let current = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let new = splice(&current, &part)?;
            Ok((path, current, new))
        })
        .collect()
}

/// Writes the generated parts; returns the files it changed.
pub fn write(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut changed = vec![];
    for (path, current, new) in generated(root)? {
        if current != new {
            std::fs::write(&path, new).map_err(|e| format!("{}: {e}", path.display()))?;
            changed.push(path);
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(folder: &str, stack: &str) -> Function {
        let mut f =
            Function { folder: folder.into(), area: true, lib: true, api: vec![], stack: stack.lines().map(str::to_string).collect() };
        f.api = f.api_nouns().unwrap();
        f
    }

    #[test]
    fn a_function_gets_what_all_share_and_keeps_its_own() {
        let f = function(
            "widget-sender",
            "# What it is.\nApi: [widgets, widget-kinds]\nDescription: Sends widgets\n# Why 20 s.\nTimeout: 20\nEvents:\n  Tick:\n    Type: ScheduleV2\n",
        );
        let r = f.resources();
        assert!(r.starts_with("  WidgetSenderLogs:\n    Type: AWS::Logs::LogGroup\n"), "{r}");
        assert!(r.contains("\n  # What it is.\n  WidgetSenderFunction:\n"), "{r}");
        assert!(r.contains("CKV_AWS_115"), "the shared checkov notes");
        assert!(r.contains("        LogGroup: !Ref WidgetSenderLogs\n      CodeUri: target/lambda/widget-sender/bootstrap.zip\n"), "{r}");
        assert!(r.contains("      Description: Sends widgets\n      # Why 20 s.\n      Timeout: 20\n"), "{r}");
        assert!(!r.contains("Api:"), "Api is the generator's, not CloudFormation's");
        let events = &r[r.find("      Events:\n").expect("events")..];
        for (name, path) in
            [("WidgetsRoot", "/api/v1/widgets"), ("WidgetsProxy", "/api/v1/widgets/{proxy+}"), ("WidgetKindsRoot", "/api/v1/widget-kinds")]
        {
            assert!(
                events.contains(&format!("        {name}:\n          Type: HttpApi\n")) && events.contains(&format!("Path: {path}\n")),
                "{name}: {events}"
            );
        }
        assert!(events.ends_with("        Tick:\n          Type: ScheduleV2\n"), "its own events after the routes: {events}");
    }

    #[test]
    fn its_own_metadata_replaces_the_shared_notes() {
        let r = function("mcp", "Metadata:\n  checkov:\n    skip: []\nDescription: x\n").resources();
        assert!(
            r.contains(
                "  McpFunction:\n    Type: AWS::Serverless::Function\n    Metadata:\n      checkov:\n        skip: []\n    Properties:\n"
            ),
            "{r}"
        );
        assert!(!r.contains("CKV_AWS_115") && !r.contains("Events:"), "{r}");
    }

    #[test]
    fn a_malformed_api_list_is_named() {
        let f = Function { folder: "x".into(), area: true, lib: true, api: vec![], stack: vec!["Api: widgets".into()] };
        assert!(f.api_nouns().unwrap_err().contains("one-line list"));
        let f = Function { stack: vec!["Api: [Widgets]".into()], ..f };
        assert!(f.api_nouns().unwrap_err().contains("`Widgets`"));
    }

    #[test]
    fn splicing_replaces_only_between_the_markers() {
        let part = Part { file: "f", comment: "#", text: "new\n".into() };
        assert_eq!(
            splice("a\n# BEGIN generated: x\nold\nolder\n# END generated\nb\n", &part).unwrap(),
            "a\n# BEGIN generated: x\nnew\n# END generated\nb\n"
        );
        assert!(splice("a\n", &part).unwrap_err().contains("BEGIN generated"));
    }
}
