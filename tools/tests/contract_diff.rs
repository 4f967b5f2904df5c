//! The breaking-change check (tools/src/contract_diff.rs): it tells a removed field from an
//! added one, and the contract breaks nothing the changelog does not list.

use serde_json::json;

/// A one-operation contract, and the same with one change.
fn fixture(change: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
    let mut doc = json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
        "paths": {"/contacts": {"get": {"operationId": "list", "responses": {"200": {"description": "ok",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Contact"}}}}}}}},
        "components": {"schemas": {"Contact": {"type": "object", "required": ["id"],
            "properties": {"id": {"type": "string"}, "phone": {"type": "string"}}}}}});
    change(&mut doc);
    doc
}

#[test]
fn a_removed_field_breaks_and_an_added_one_does_not() {
    let dir = std::env::temp_dir().join(format!("contract-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, doc: serde_json::Value| {
        let p = dir.join(name);
        std::fs::write(&p, doc.to_string()).unwrap();
        p
    };
    let base = write("base.json", fixture(|_| {}));
    let removed = write(
        "removed.json",
        fixture(|d| {
            d["components"]["schemas"]["Contact"]["properties"].as_object_mut().unwrap().remove("phone");
        }),
    );
    let gone = write(
        "gone.json",
        fixture(|d| {
            d["paths"]["/contacts"]["post"] = d["paths"]["/contacts"]["get"].clone();
            d["paths"]["/contacts"].as_object_mut().unwrap().remove("get");
        }),
    );
    let added =
        write("added.json", fixture(|d| d["components"]["schemas"]["Contact"]["properties"]["nickname"] = json!({"type": "string"})));
    let broken = tools::contract_diff::compare(&base, &removed).unwrap().expect("a removed response field breaks clients");
    assert_eq!(broken.operations, ["GET /contacts"], "{}", broken.report);
    assert!(tools::contract_diff::compare(&base, &added).unwrap().is_none(), "an added field is additive");
    let removed_op = tools::contract_diff::compare(&base, &gone).unwrap().expect("a removed operation breaks clients");
    assert!(removed_op.operations.contains(&"GET /contacts".to_string()), "{}", removed_op.report);
    std::fs::remove_dir_all(&dir).ok();
}

/// The current contract against the released one: identical, or every operation it breaks is
/// in the changelog; and the clients' versions are the contract's.
#[test]
fn the_contract_breaks_nothing_the_changelog_does_not_list() {
    let root = tools::localstack::repo_root();
    let (released, current) = (root.join("openapi/released/openapi.json"), root.join("openapi/openapi.json"));
    let contract: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&current).unwrap()).unwrap();
    let version = contract["info"]["version"].as_str().unwrap().to_string();
    let npm: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("clients/typescript/package.json")).unwrap()).unwrap();
    assert_eq!(npm["version"], version.as_str(), "the npm package's version is the contract's");
    let crate_manifest = std::fs::read_to_string(root.join("clients/rust/Cargo.toml")).unwrap();
    assert!(crate_manifest.contains(&format!("version = \"{version}\"")), "the crate's version is the contract's");
    // Unchanged since the release: nothing to compare (Optic takes a minute over the whole contract).
    if std::fs::read(&released).unwrap() == std::fs::read(&current).unwrap() {
        return;
    }
    let changelog = std::fs::read_to_string(root.join("openapi/CHANGELOG.md")).unwrap();
    let declared = tools::contract_diff::declared_breaking(&changelog);
    if let Some(broken) = tools::contract_diff::compare(&released, &current).unwrap() {
        let undeclared: Vec<&String> = broken.operations.iter().filter(|op| !declared.contains(op)).collect();
        assert!(
            undeclared.is_empty() && !broken.operations.is_empty(),
            "breaking changes not listed in openapi/CHANGELOG.md (## Unreleased, ### Breaking): {undeclared:?}\n{}",
            broken.report
        );
    }
}
