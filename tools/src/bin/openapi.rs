//! Writes the files generated from the code: openapi/openapi.{json,yaml}, the key table of
//! docs/data-model.md (from `domain::keys`) and the capability list the capabilities function
//! serves (domain/src/capabilities/capabilities.json, from the effects the routes declare), the Rust client's
//! types and operations (clients/rust/src/generated.rs) and the MCP server's tools
//! (functions/mcp/src/tools.json), and the webhook event-type catalog
//! (functions/webhooks/src/event_types.json); and first the parts of template.yaml, the
//! manifests and `api_areas!` generated from functions/ (tools/src/stack.rs). `--check` fails
//! when the committed files differ; `--stack` writes only those parts (`make generate` runs it
//! first, so a new area's crate is in the build that writes the contract).

fn main() {
    let root = tools::localstack::repo_root();
    let check = std::env::args().any(|a| a == "--check");
    let stack = tools::stack::generated(&root).unwrap_or_else(|e| panic!("{e}")).into_iter().map(|(path, _, new)| (path, new));
    let files: Vec<(std::path::PathBuf, String)> = if std::env::args().any(|a| a == "--stack") {
        stack.collect()
    } else {
        let model = root.join("docs/data-model.md");
        let model_doc = tools::data_model_doc(&std::fs::read_to_string(&model).expect("docs/data-model.md"));
        stack
            .chain([
                (root.join("openapi/openapi.json"), tools::openapi_json()),
                (root.join("openapi/openapi.yaml"), tools::openapi_yaml()),
                (root.join("functions/webhooks/src/event_types.json"), tools::event_types_json()),
                (model, model_doc),
                (root.join("domain/src/capabilities/capabilities.json"), tools::capabilities_json()),
                (root.join("docs/scan-scoring.md"), domain::scans::rules::scoring_doc()),
                (root.join("clients/rust/src/generated.rs"), tools::rust_client_source()),
                (root.join("functions/mcp/src/tools.json"), tools::mcp_tools_json()),
            ])
            .collect()
    };
    let mut drift = false;
    for (path, content) in files {
        let current = std::fs::read_to_string(&path).ok();
        if check {
            if current.as_deref() != Some(content.as_str()) {
                eprintln!("{} is out of date: run `make generate`", path.display());
                drift = true;
            }
        } else if current.as_deref() != Some(content.as_str()) {
            std::fs::create_dir_all(path.parent().expect("has parent")).expect("create the folder");
            std::fs::write(&path, content).expect("write a generated file");
            eprintln!("wrote {}", path.display());
        }
    }
    if drift {
        std::process::exit(1);
    }
}
