//! The crate graph of docs/architecture.md: function crates depend on `shared` and `domain`, never
//! on each other; `domain` depends on `shared`, and `shared` on no crate of the workspace.
//! Inside `shared`, modules form the layers listed in `shared/src/lib.rs`.

/// `cargo metadata` of the workspace's own packages.
fn metadata() -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(tools::localstack::repo_root())
        .output()
        .expect("cargo metadata");
    serde_json::from_slice(&out.stdout).expect("metadata JSON")
}

fn workspace_deps() -> Vec<(String, String, Vec<String>)> {
    metadata()["packages"]
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

/// The layers of `shared/src/lib.rs`, bottom first, as its module list declares them (`// 3.
/// events` and the `pub mod` lines under it); its doc comment must name each module in the
/// same layer, so the comment a reader starts from cannot drift from what this file checks.
fn shared_layers() -> Vec<Vec<String>> {
    let src = std::fs::read_to_string(tools::localstack::repo_root().join("shared/src/lib.rs")).expect("shared/src/lib.rs");
    let mut layers: Vec<Vec<String>> = vec![];
    for line in src.lines() {
        let numbered = |l: &str| l.split_once(". ").and_then(|(n, _)| n.trim().parse::<usize>().ok());
        if let Some(n) = line.strip_prefix("// ").and_then(numbered) {
            assert_eq!(n, layers.len() + 1, "lib.rs numbers its layers in order: {line}");
            layers.push(vec![]);
        } else if let Some(m) = line.strip_prefix("pub mod ").and_then(|m| m.strip_suffix(';')) {
            layers.last_mut().unwrap_or_else(|| panic!("pub mod {m} comes before the first layer")).push(m.to_string());
        }
    }
    // The doc comment: `//! N. ...` opens layer N's text, which runs to the next number.
    let mut described: Vec<String> = vec![];
    for line in src.lines().filter_map(|l| l.strip_prefix("//!")) {
        let t = line.trim_start();
        if t.split_once(". ").is_some_and(|(n, _)| n.parse::<usize>().is_ok()) {
            described.push(String::new());
        }
        if let Some(last) = described.last_mut() {
            last.push_str(t);
            last.push(' ');
        }
    }
    assert_eq!(described.len(), layers.len(), "lib.rs's doc comment describes every layer of its module list");
    for (i, (layer, text)) in layers.iter().zip(&described).enumerate() {
        for m in layer {
            assert!(text.contains(&format!("`{m}`")), "lib.rs's doc comment names `{m}` in layer {}: {text}", i + 1);
        }
    }
    layers
}

/// A source without its comment lines: what the layout rules read.
fn code_of(src: &str) -> String {
    src.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// Which modules of `shared` a module's code names (`crate::x`, `$crate::x`; comments aside).
fn crate_uses(src: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let code = code_of(src);
    let src = code.as_str();
    for (i, _) in src.match_indices("crate::") {
        let rest = &src[i + "crate::".len()..];
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            out.insert(name);
        }
        // `use crate::{a, b::c}`
        if let Some(group) = rest.strip_prefix('{') {
            for part in group.split('}').next().unwrap_or("").split(',') {
                let name: String = part.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
    out
}

#[test]
fn shared_modules_use_only_their_layer_or_lower_without_cycles() {
    let layers = shared_layers();
    let names: Vec<Vec<&str>> = layers.iter().map(|l| l.iter().map(String::as_str).collect()).collect();
    let layers: Vec<&[&str]> = names.iter().map(Vec::as_slice).collect();
    let (graph, _) = layered_modules("shared", &layers, "shared/src/lib.rs");
    assert!(graph.len() >= 20, "read the modules: {}", graph.len());
    assert!(cycles(&graph).is_empty(), "shared modules in a cycle: {:?}", cycles(&graph));
}

/// A module and the modules it uses; a module and its files by name (`mod` for a file module).
type Graph = Vec<(String, Vec<String>)>;
type Sources = Vec<(String, Vec<(String, String)>)>;

/// Every module of `<krate>/src` (a file, or the files of its folder) with the modules of
/// `layers` it uses, and its sources; fails when one is in no layer or uses a higher layer.
fn layered_modules(krate: &str, layers: &[&[&str]], listed_in: &str) -> (Graph, Sources) {
    let dir = tools::localstack::repo_root().join(krate).join("src");
    let layer_of = |m: &str| layers.iter().position(|l| l.contains(&m));
    let (mut graph, mut sources) = (vec![], vec![]);
    for entry in std::fs::read_dir(&dir).expect("src") {
        let path = entry.expect("entry").path();
        let module = path.file_stem().expect("name").to_string_lossy().to_string();
        if module == "lib" {
            continue;
        }
        let own = layer_of(&module).unwrap_or_else(|| panic!("{krate}/src/{module} is in no layer of {listed_in}"));
        let files = module_sources(&path);
        let source: String = files.iter().map(|(_, s)| s.as_str()).collect::<Vec<_>>().join("\n");
        let uses: Vec<String> = crate_uses(&source).into_iter().filter(|u| *u != module && layer_of(u).is_some()).collect();
        for u in &uses {
            let theirs = layer_of(u).expect("filtered");
            assert!(
                theirs <= own,
                "{krate}::{module} (layer {}) uses {krate}::{u} (layer {}): a lower layer may not use a higher one",
                own + 1,
                theirs + 1
            );
        }
        graph.push((module.clone(), uses));
        sources.push((module, files));
    }
    (graph, sources)
}

/// What the deployed functions link, as `make package` builds them (the function crates
/// alone, without the features tests and tools add): what would be a real hazard, each for its
/// reason. The AWS SDK crates the brief names are welcome; these are not:
/// - `aws-lc-rs`/`aws-lc-sys`: a second crypto backend next to ring (rustls's and
///   jsonwebtoken's default), 0.8 MB of every binary and minutes of C and cmake per build;
/// - `h2`: a second HTTP stack (the SDK's default hyper client) next to the one reqwest the
///   SDK, webhooks and OAuth share (`shared::sdk_http`), so timeouts and pooling are set once;
/// - `native-tls`/`openssl`: a system TLS library whose version the Lambda image, not the
///   lock file, decides.
#[test]
fn functions_link_one_crypto_backend_and_no_http2() {
    let pkgs = workspace_deps();
    let mut args: Vec<String> =
        vec!["tree".into(), "-e".into(), "normal".into(), "--prefix".into(), "none".into(), "-f".into(), "{p}".into()];
    for (name, manifest, _) in &pkgs {
        if manifest.contains("/functions/") {
            args.extend(["-p".into(), name.clone()]);
        }
    }
    let out =
        std::process::Command::new(env!("CARGO")).args(&args).current_dir(tools::localstack::repo_root()).output().expect("cargo tree");
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    let crates: std::collections::BTreeSet<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(crates.contains("ring") && crates.contains("rustls"), "ring and rustls: {crates:?}");
    for absent in ["aws-lc-rs", "aws-lc-sys", "h2", "native-tls", "openssl", "openssl-sys"] {
        assert!(!crates.contains(absent), "a function links {absent}");
    }
}

/// Nothing in the workspace (tests, tools and the Rust client package included) builds aws-lc:
/// it is minutes of C and cmake on every fresh `make test`, next to ring.
#[test]
fn the_workspace_builds_one_crypto_backend() {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "--workspace", "-e", "normal,build,dev", "--prefix", "none", "-f", "{p}"])
        .current_dir(tools::localstack::repo_root())
        .output()
        .expect("cargo tree");
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    let aws_lc: Vec<&str> = tree.lines().filter(|l| l.starts_with("aws-lc")).collect();
    assert!(aws_lc.is_empty(), "the workspace builds aws-lc: {aws_lc:?}");
}

/// Targets built without a test harness (`test = false`) hold no tests, and those without doc
/// tests (`doctest = false`) no doc examples: skipping ~40 empty harnesses saves minutes of
/// compiling and linking on every fresh `make test`, and a test added there must not be
/// silently skipped.
#[test]
fn targets_not_built_for_tests_hold_none() {
    let meta = metadata();
    let mut skipped = 0;
    for target in meta["packages"].as_array().expect("packages").iter().flat_map(|p| p["targets"].as_array().expect("targets")) {
        let src = std::path::Path::new(target["src_path"].as_str().expect("src_path"));
        let is_lib = target["kind"].as_array().expect("kind").iter().any(|k| k == "lib");
        // A library is its whole source directory (but src/bin); a binary, its one file.
        let files: Vec<std::path::PathBuf> = if is_lib { rust_files(src.parent().expect("src dir")) } else { vec![src.to_path_buf()] };
        let text = |f: &std::path::PathBuf| std::fs::read_to_string(f).expect("source");
        if target["test"] == false {
            skipped += 1;
            for f in &files {
                let t = text(f);
                for marker in ["#[test]", "#[tokio::test", "#[cfg(test)]"] {
                    assert!(!t.contains(marker), "{} has {marker} but its target is built with test = false", f.display());
                }
            }
        }
        if is_lib && target["doctest"] == false {
            for f in &files {
                let example = text(f).lines().any(|l| {
                    let l = l.trim_start();
                    (l.starts_with("///") || l.starts_with("//!")) && l.contains("```")
                });
                assert!(!example, "{} has a doc example but its library is built with doctest = false", f.display());
            }
        }
    }
    assert!(skipped > 30, "the function crates and tools binaries are built without test harnesses ({skipped})");
}

fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = vec![];
    for entry in std::fs::read_dir(dir).expect("read_dir").map(|e| e.expect("entry").path()) {
        if entry.is_dir() && entry.file_name().is_some_and(|n| n != "bin") {
            files.extend(rust_files(&entry));
        } else if entry.extension().is_some_and(|e| e == "rs") {
            files.push(entry);
        }
    }
    files
}

/// An effect's authority comes from the request pipeline (`Grant::authorize`); the operator's
/// (`Authority::operator`) is for the admin CLI and the local stack's setup only. No handler or
/// worker names it, so none can reach an effect without a caller's proof.
#[test]
fn only_the_operator_tools_make_an_operator_authority() {
    let root = tools::localstack::repo_root();
    let mut offenders = vec![];
    let mut stack = vec![root.join("functions"), root.join("domain/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                if !path.ends_with("target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let src = std::fs::read_to_string(&path).expect("source");
                if src.contains("Authority::operator") || src.contains("Grant::operator") {
                    offenders.push(path.display().to_string());
                }
            }
        }
    }
    assert!(offenders.is_empty(), "operator authority outside tools/: {offenders:?}");
}

/// The repository stands alone: no tracked file points at a design or a file beside the
/// clone, and every relative link of the README and `docs/` opens a file in the repository.
#[test]
fn the_repository_refers_to_nothing_outside_it() {
    let root = tools::localstack::repo_root();
    let out = std::process::Command::new("git").args(["ls-files", "-z"]).current_dir(&root).output().expect("git ls-files");
    let files: Vec<String> = String::from_utf8_lossy(&out.stdout).split('\0').filter(|f| !f.is_empty()).map(String::from).collect();
    assert!(files.len() > 100, "listed the tracked files: {}", files.len());
    let canonical_root = root.canonicalize().expect("root");
    let mut offenders = vec![];
    for file in &files {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else { continue };
        // The guidance a project once grew from lived in a sibling folder; nothing may lean on it.
        // (Spelled in pieces so this file does not name them itself.)
        for needle in [["shared", "design/"].join("/"), ["..", "shared", "vectors"].join("/")] {
            if text.contains(&needle) {
                offenders.push(format!("{file}: names {needle}"));
            }
        }
        if !(file.ends_with(".md") && (file == "README.md" || file.starts_with("docs/"))) {
            continue;
        }
        let dir = root.join(file).parent().expect("parent").to_path_buf();
        for (i, _) in text.match_indices("](") {
            let target: String = text[i + 2..].chars().take_while(|c| *c != ')' && !c.is_whitespace()).collect();
            let path = target.split('#').next().unwrap_or("");
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                continue;
            }
            match dir.join(path).canonicalize() {
                Ok(p) if p.starts_with(&canonical_root) => {}
                Ok(_) => offenders.push(format!("{file}: links outside the repository: {target}")),
                Err(_) => offenders.push(format!("{file}: links to a missing file: {target}")),
            }
        }
    }
    assert!(offenders.is_empty(), "{}", offenders.join("\n"));
}

/// A whole-table scan is for the tests and the operator's tools: no request or worker reads a
/// table whole (DynamoDB's client itself is private to `shared`, so the store is the only way in).
#[test]
fn no_function_or_domain_code_scans_the_table() {
    let root = tools::localstack::repo_root();
    let mut files = rust_files(&root.join("domain/src"));
    files.extend(rust_files(&root.join("functions")));
    assert!(files.len() > 50, "read the sources: {}", files.len());
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).expect("source").contains(".scan_all("))
        .map(|f| f.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "a table scan outside tests and tools: {offenders:?}");
}

/// The areas of `domain`, bottom first: a module uses only its own layer or lower ones, without
/// cycles. Personal data's vocabulary (`privacy`) is below the areas and the GDPR jobs above
/// them, so no area depends on the jobs that read it.
const DOMAIN_LAYERS: &[&[&str]] = &[
    &["ids", "keys", "effects", "privacy"],
    &["posts", "contacts", "scans", "webhooks"],
    &["channels", "deals", "emails"],
    &["bookings", "helpdesk", "publishing", "sending"],
    // The workspace's keys name capabilities; the portal reads the workspace's settings.
    // Approval requests preview what every area's effect will do; an erasure removes them.
    &["capabilities", "workspaces", "portal", "gdpr", "approvals"],
];

/// A module's source: its file, or every file of its folder and the folders below it (named
/// by their path in the folder, `dispatch/attempt`).
fn module_sources(path: &std::path::Path) -> Vec<(String, String)> {
    if !path.is_dir() {
        return vec![("mod".into(), std::fs::read_to_string(path).expect("source"))];
    }
    let mut files = rust_files(path);
    files.sort();
    files
        .iter()
        .map(|f| {
            let name = f.strip_prefix(path).expect("inside").with_extension("").to_string_lossy().replace('\\', "/");
            (name, std::fs::read_to_string(f).expect("source"))
        })
        .collect()
}

/// The cycles among the parts of a folder module (`module`, as `crate::` names it): each file
/// beside `mod.rs` (the folder's own interface) and each sub-folder is a part, and every
/// sub-folder is checked the same way.
fn folder_cycles(module: &str, files: &[(String, String)]) -> Vec<String> {
    let part = |n: &str| n.split('/').next().expect("a name").to_string();
    let mut parts: Vec<String> = files.iter().map(|(n, _)| part(n)).filter(|p| p != "mod").collect();
    parts.dedup();
    let inner: Vec<(String, Vec<String>)> = parts
        .iter()
        .map(|p| {
            let code: String = files.iter().filter(|(n, _)| part(n) == *p).map(|(_, src)| code_of(src)).collect::<Vec<_>>().join("\n");
            let named = |s: &String| code.contains(&format!("super::{s}")) || code.contains(&format!("crate::{module}::{s}"));
            (p.clone(), parts.iter().filter(|s| *s != p && named(s)).cloned().collect())
        })
        .collect();
    let mut found: Vec<String> = cycles(&inner).into_iter().map(|(m, _)| format!("{module}::{m}")).collect();
    for p in parts.iter().filter(|p| files.iter().any(|(n, _)| n.starts_with(&format!("{p}/")))) {
        let below: Vec<(String, String)> =
            files.iter().filter_map(|(n, src)| n.strip_prefix(&format!("{p}/")).map(|rest| (rest.to_string(), src.clone()))).collect();
        found.extend(folder_cycles(&format!("{module}::{p}"), &below));
    }
    found
}

/// Remove nodes whose uses are all removed; what is left is a cycle.
fn cycles(graph: &[(String, Vec<String>)]) -> Graph {
    let mut left = graph.to_vec();
    while let Some(i) = left.iter().position(|(_, uses)| uses.iter().all(|u| !left.iter().any(|(m, _)| m == u))) {
        left.remove(i);
    }
    left
}

#[test]
fn domain_modules_use_only_their_layer_or_lower_without_cycles() {
    let (graph, sources) = layered_modules("domain", DOMAIN_LAYERS, "DOMAIN_LAYERS");
    for (module, files) in &sources {
        // Inside a folder, its parts form no cycle either.
        let found = folder_cycles(module, files);
        assert!(found.is_empty(), "domain::{module}: parts of a folder use each other in a cycle: {found:?}");
    }
    assert!(graph.len() >= 15, "read the modules: {}", graph.len());
    assert!(cycles(&graph).is_empty(), "domain's modules use each other in a cycle: {:?}", cycles(&graph));
}

/// Function crates parse a request, call `domain` and answer: they build no transaction and
/// do not reach the table themselves (lists answer through `shared::request::list_page` and
/// `keyed_page` from a key-registry query). Their workspace is the principal's (`WsReq::ws`):
/// they never vouch for one themselves (`WorkspaceId::trusted`, `from_record`), nor for any
/// other id (`ContactId::trusted`: the ids a request names are parsed). Checking
/// input field by field (`Errors`) is the operation's too, lists' filters included.
#[test]
fn function_crates_reach_the_store_only_through_domain() {
    let root = tools::localstack::repo_root();
    let reaches = |src: &str| {
        let code = code_of(src);
        [
            "Tx::",
            ".db.",
            ".commit(",
            "Record::new(",
            "aws_sdk_dynamodb",
            "::trusted(",
            "new_unchecked(",
            "from_record",
            "Errors::",
            "validate::Errors",
            // A DynamoDB filter expression, a key-registry query or a page read off the table:
            // a list (its keys, filters and order) is its area's, in `domain`.
            ".filter(\"",
            "keys::",
            "request::page",
            "keyed_page",
        ]
        .iter()
        .any(|p| code.contains(p))
    };
    let mut offenders = vec![];
    for f in tools::functions() {
        for p in rust_files(&root.join("functions").join(&f).join("src")) {
            if reaches(&std::fs::read_to_string(&p).expect("source")) {
                offenders.push(p.display().to_string());
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "function crates building transactions, reading the table, querying or filtering a list, or checking input field by field (move it into domain): {offenders:?}"
    );
}

/// The store's boundary is `shared::store`: `domain` builds its updates, conditions and
/// values with the store's types (`store::Update`, `store::Value`, `store::Returning`), never
/// the SDK's, so the table's client is named in `shared` alone.
#[test]
fn domain_names_the_store_not_the_sdk() {
    let root = tools::localstack::repo_root();
    let offenders: Vec<String> = rust_files(&root.join("domain/src"))
        .into_iter()
        .filter(|p| code_of(&std::fs::read_to_string(p).expect("source")).contains("aws_sdk_dynamodb"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "domain files naming the DynamoDB SDK (use shared::store's types): {offenders:?}");
}

/// Workers have one shape and one place: the work is a type or function in `domain` beside
/// the area it serves (`publishing`, `sending`, `webhooks::dispatch`, `scans::scanner`,
/// `helpdesk::mail`, `contacts::import`, `gdpr::worker`), and the worker's crate is its
/// `main.rs` alone: build the clients once, then hand each event to that code.
#[test]
fn workers_are_a_main_over_domain() {
    let root = tools::localstack::repo_root();
    let areas: Vec<&str> = tools::api_areas().iter().map(|a| a.name).collect();
    // The MCP server is neither: a protocol front over the API, holding no work of its own.
    let workers: Vec<String> = tools::functions().into_iter().filter(|f| !areas.contains(&f.as_str()) && f != "mcp").collect();
    assert!(workers.len() >= 7, "find the workers: {workers:?}");
    for w in &workers {
        let files = rust_files(&root.join("functions").join(w).join("src"));
        let names: Vec<String> = files.iter().map(|f| f.file_name().expect("name").to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["main.rs"], "functions/{w}: a worker's crate is its main.rs (the work goes in domain)");
        let main = std::fs::read_to_string(root.join("functions").join(w).join("src/main.rs")).expect("main");
        assert!(main.contains("domain::"), "functions/{w}/src/main.rs hands its events to domain");
    }
}

/// docs/configuration.md names every environment variable the functions' code reads (the
/// literal given to `var`, `vars`, `var_os` or one of config.rs's typed readers),
/// and nothing the code no longer reads.
#[test]
fn every_configuration_variable_is_documented() {
    const READERS: [&str; 6] = ["var(\"", "vars(\"", "var_os(\"", "lease(\"", "ms(\"", "num(\""];
    let root = tools::localstack::repo_root();
    let mut read = std::collections::BTreeSet::new();
    let mut dirs = vec![root.join("shared/src"), root.join("domain/src")];
    dirs.extend(tools::functions().into_iter().map(|f| root.join("functions").join(f).join("src")));
    for path in dirs.iter().flat_map(|d| rust_files(d)) {
        let code = code_of(&std::fs::read_to_string(&path).unwrap());
        for reader in READERS {
            for (i, _) in code.match_indices(reader) {
                let boundary = code[..i].chars().last().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
                let name: String =
                    code[i + reader.len()..].chars().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_').collect();
                if boundary && name.len() > 2 && code[i + reader.len() + name.len()..].starts_with('"') {
                    read.insert(name);
                }
            }
        }
    }
    // Formatted names: one per rate-limit class. Read by others: the TLS stack's trust store,
    // and the admin CLI's queue for `send-inbound` (tools/, local only).
    read.extend(["RATE_LIMIT_<CLASS>", "SSL_CERT_FILE", "INBOUND_MAIL_QUEUE_URL"].map(String::from));
    let doc = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    let documented: std::collections::BTreeSet<String> = doc
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| l.split(" | ").next().unwrap_or_default().split('`').skip(1).step_by(2).map(String::from).collect::<Vec<_>>())
        .collect();
    let undocumented: Vec<&String> =
        read.difference(&documented).filter(|n| !n.starts_with("RATE_LIMIT_") || *n == "RATE_LIMIT_<CLASS>").collect();
    assert!(undocumented.is_empty(), "read by the code, missing from docs/configuration.md: {undocumented:?}");
    let stale: Vec<&String> = documented.difference(&read).collect();
    assert!(stale.is_empty(), "in docs/configuration.md, read by no code: {stale:?}");
    assert!(read.len() > 40, "the scan finds the variables: {read:?}");
}

/// A function crate declares only the crates its code names: a dependency left behind when its
/// use moved into `domain` (the SDK's types, most often) costs build time and misleads a reader
/// about what the crate does.
#[test]
fn function_crates_declare_only_what_they_use() {
    let mut unused = vec![];
    for p in metadata()["packages"].as_array().expect("packages") {
        let manifest = p["manifest_path"].as_str().expect("manifest");
        if !manifest.contains("/functions/") {
            continue;
        }
        let dir = std::path::Path::new(manifest).parent().expect("crate dir");
        let code: String = rust_files(&dir.join("src")).iter().map(|f| code_of(&std::fs::read_to_string(f).expect("source"))).collect();
        for d in p["dependencies"].as_array().expect("dependencies") {
            if d["kind"].is_string() {
                continue; // dev or build
            }
            let name = d["rename"].as_str().or(d["name"].as_str()).expect("name").replace('-', "_");
            // As a crate: a path (`name::`) or a macro (`name!`), not a variable or a method.
            let named = code.match_indices(name.as_str()).any(|(i, _)| {
                let before = code[..i].chars().last().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'));
                let rest = &code[i + name.len()..];
                before && (rest.starts_with("::") || rest.starts_with('!'))
            });
            if !named {
                unused.push(format!("{} {name}", p["name"].as_str().unwrap_or_default()));
            }
        }
    }
    assert!(unused.is_empty(), "function crates declaring crates their code never names (remove them): {unused:?}");
}

/// The area shape (docs/architecture.md): in an area folder with a `store.rs`, `mod.rs` is the
/// model and does no I/O, and outside its tests does not read the clock (its decisions take
/// `now`), so they are tested without DynamoDB and at any time.
#[test]
fn an_area_with_a_store_keeps_its_model_free_of_io() {
    let root = tools::localstack::repo_root().join("domain/src");
    let mut shaped = 0;
    let mut offenders = vec![];
    for entry in std::fs::read_dir(&root).expect("domain/src") {
        let dir = entry.expect("entry").path();
        if !dir.join("store.rs").is_file() {
            continue;
        }
        shaped += 1;
        let model = code_of(&std::fs::read_to_string(dir.join("mod.rs")).expect("mod.rs"));
        // Where a marker starts or ends with a word character, a word there (`App`, not
        // `ApprovalState`).
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let found = |io: &str| {
            model.match_indices(io).any(|(i, _)| {
                // A word character of the marker beside one of the text: part of a longer word.
                let glued = |edge: Option<char>, beside: Option<char>| word(edge) && word(beside);
                !glued(io.chars().next(), model[..i].chars().next_back())
                    && !glued(io.chars().next_back(), model[i + io.len()..].chars().next())
            })
        };
        for io in ["async fn", ".db.", "Tx::", "App"] {
            if found(io) {
                offenders.push(format!("{}/mod.rs: {io}", dir.display()));
            }
        }
        let decisions = model.split("#[cfg(test)]").next().unwrap_or_default();
        for clock in ["::now()", "now_ms()", "now_rfc3339()"] {
            if decisions.contains(clock) {
                offenders.push(format!("{}/mod.rs: {clock} (take `now` as a parameter)", dir.display()));
            }
        }
    }
    assert!(shaped >= 2, "read the areas: {shaped} with a store.rs");
    assert!(offenders.is_empty(), "a model that does I/O (move it to store.rs) or reads the clock: {offenders:?}");
}
