//! One workspace that holds data in every area, then every GET route of the contract, lists
//! and look-ups alike. Items of one area share a partition with every other area's, so a list
//! that can read another kind's items only fails here (a contact's email claim once made
//! `GET /emails` answer 500).

use e2e::{Client, harness};

#[tokio::test]
async fn every_get_route_answers_in_a_workspace_with_data_in_every_area() {
    let h = harness();
    let (ws, key) = h.workspace("every area").await;
    let c = Client::new(&h.base_bulk, &key);

    // Fill every area, and remember an id per path parameter.
    let ids = e2e::seed_every_area(&c, &ws).await;
    let fill = |pattern: &str| -> String {
        let mut path = pattern.to_string();
        for (prefix, id) in ids.iter().filter(|(k, _)| k.starts_with('/')) {
            let param = &prefix[prefix.rfind('/').unwrap()..];
            if pattern.starts_with(prefix) {
                path = path.replacen(param, &format!("/{id}"), 1);
            }
        }
        path
    };

    // The `/portal/me...` routes take the seeded contact's portal session instead of a key.
    let portal = Client::portal(&h.base_bulk, &ids[e2e::PORTAL_SESSION]);
    let mut checked = 0;
    for route in tools::gateway::all_routes().iter().filter(|r| r.method == http::Method::GET) {
        let c = if route.auth == shared::routing::Auth::PortalSession { &portal } else { &c };
        let mut path = fill(route.path);
        assert!(!path.contains('{'), "no id for {}", route.path);
        if let Some(q) = ids.get(format!("?{}", route.path).as_str()) {
            path = format!("{path}?{q}");
        }
        // Twice: the second call pages with the first page's cursor where there is one.
        let r = c.get(&format!("{path}{}", if path.contains('?') { "&limit=1" } else { "?limit=1" })).await;
        assert_eq!(r.status, 200, "GET {path}: {}", r.json);
        if let Some(items) = r.json["data"].as_array() {
            let objects: Vec<&str> = items.iter().filter_map(|i| i["object"].as_str()).collect();
            let mut kinds = objects.clone();
            kinds.dedup();
            assert!(kinds.len() <= 1, "GET {path} mixes kinds: {objects:?}");
            if let Some(cursor) = r.json["next_cursor"].as_str() {
                let r2 = c.get(&format!("{path}?limit=100&cursor={cursor}")).await;
                assert_eq!(r2.status, 200, "GET {path} page 2: {}", r2.json);
                for i in r2.json["data"].as_array().unwrap() {
                    assert_eq!(i["object"].as_str(), kinds.first().copied(), "GET {path} page 2 reads another kind: {i}");
                }
            }
        }
        checked += 1;
    }
    assert!(checked >= 20, "checked {checked} GET routes");

    // The case that failed: every email of the list is an email.
    let r = c.get("/emails?limit=100").await;
    assert_eq!(r.status, 200, "{}", r.json);
    let emails = r.json["data"].as_array().unwrap();
    assert_eq!(emails.len(), 2, "{}", r.json);
    assert!(emails.iter().all(|e| e["object"] == "email" && e["id"].as_str().unwrap().starts_with("em_")));
}
