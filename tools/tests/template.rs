//! template.yaml routes every path the code serves to a function, and builds every binary.

#[test]
fn every_route_is_in_the_template() {
    let t = std::fs::read_to_string(tools::localstack::repo_root().join("template.yaml")).unwrap();
    let declared: Vec<(String, String)> = t
        .lines()
        .zip(t.lines().skip(1))
        .filter_map(|(a, b)| Some((a.trim().strip_prefix("Method: ")?.to_string(), b.trim().strip_prefix("Path: /api/v1")?.to_string())))
        .collect();
    for r in tools::gateway::all_routes() {
        assert!(declared.contains(&(r.method.to_string(), r.path.to_string())), "{} {} is not routed in template.yaml", r.method, r.path);
    }
    assert_eq!(declared.len(), tools::gateway::all_routes().len(), "the template routes paths the code does not serve");
    for bin in ["workspaces", "posts", "webhooks", "dispatcher", "contacts", "contact-import", "deals"] {
        assert!(t.contains(&format!("Binary: {bin}\n")), "no function builds {bin}");
    }
    assert!(t.contains("WEBHOOK_ALLOW_LOOPBACK: \"false\""), "production URL rules");
}
