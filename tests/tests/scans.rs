//! Website scans over HTTP: the fixture sites (tests/fixtures/sites) and the hostile ones,
//! served by nginx on 127.0.0.1, scanned by the real scanner through the local queue.

use e2e::{Client, harness};
use serde_json::{Value, json};
use std::sync::OnceLock;
use tools::sites::Sites;

/// nginx for this test binary, started once in its own runtime (it stops with the process).
fn sites() -> &'static Sites {
    static SITES: OnceLock<Sites> = OnceLock::new();
    SITES.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async move {
                tx.send(Sites::start().await).ok();
                std::future::pending::<()>().await;
            });
        });
        rx.recv().expect("sites thread").unwrap_or_else(|e| panic!("fixture sites: {e}"))
    })
}

/// Scan `url` and wait for the scan to end; answers the scan.
async fn scan(c: &Client, url: &str) -> Value {
    let r = c.post("/scans", &json!({"url": url, "force": true})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    assert_eq!(r.json["data"]["status"], "queued");
    let id = r.json["data"]["id"].as_str().unwrap().to_string();
    let mut last = Value::Null;
    for _ in 0..90 {
        let s = c.get(&format!("/scans/{id}")).await;
        assert_eq!(s.status, 200, "{}", s.json);
        if matches!(s.json["data"]["status"].as_str(), Some("completed" | "failed")) {
            return s.json["data"].clone();
        }
        last = s.json;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    panic!("scan of {url} did not end within 90 s: {last}");
}

fn finding<'a>(scan: &'a Value, rule: &str) -> &'a Value {
    scan["findings"].as_array().unwrap().iter().find(|f| f["rule_id"] == rule).unwrap_or_else(|| panic!("no finding {rule}: {scan}"))
}

#[tokio::test]
async fn a_well_configured_site_scores_an_a_and_a_neglected_one_fails() {
    let h = harness();
    let (_, key) = h.workspace("scans").await;
    let c = Client::new(&h.base, &key);

    let good = scan(&c, sites().url("well-configured")).await;
    assert_eq!(good["status"], "completed", "{good}");
    let score = good["score"].as_u64().unwrap();
    eprintln!("well-configured: {score} {} {}", good["grade"], good["categories"]);
    assert!(score >= 90 && good["grade"].as_str().unwrap().starts_with('A'), "score {score}, grade {}: {good}", good["grade"]);
    assert_eq!(good["final_url"].as_str().unwrap(), format!("{}/", sites().https_origins["well-configured"]));
    assert_eq!(good["categories"]["email"], Value::Null, "no DNS from the local stack: not measured, not guessed");
    for rule in [
        "transport.https",
        "transport.http_redirect",
        "transport.hsts",
        "headers.csp",
        "headers.csp_unsafe",
        "cookies.flags",
        "seo.title",
        "seo.sitemap",
        "seo.robots_txt",
        "ai.llms_txt",
        "ai.crawlers",
        "perf.compression",
        "perf.caching",
        "privacy.trackers_before_consent",
        "privacy.policy_link",
    ] {
        assert_eq!(finding(&good, rule)["passed"], true, "{rule}: {}", finding(&good, rule));
    }
    assert_eq!(finding(&good, "transport.certificate")["passed"], false, "self-signed: reported, not fatal");
    assert_eq!(finding(&good, "email.spf")["passed"], Value::Null);
    assert_eq!(good["scoring_version"], domain::scans::rules::SCORING_VERSION);

    let bad = scan(&c, sites().url("neglected")).await;
    assert_eq!(bad["status"], "completed", "{bad}");
    assert!(bad["score"].as_u64().unwrap() <= 40, "{bad}");
    eprintln!("neglected: {} {} {}", bad["score"], bad["grade"], bad["categories"]);
    for rule in [
        "transport.https",
        "transport.http_redirect",
        "headers.csp",
        "headers.x_content_type_options",
        "cookies.flags",
        "content.sri",
        "seo.meta_description",
        "seo.img_alt",
        "ai.llms_txt",
        "privacy.trackers_before_consent",
        "privacy.consent_manager",
    ] {
        assert_eq!(finding(&bad, rule)["passed"], false, "{rule}: {}", finding(&bad, rule));
    }
    let trackers = finding(&bad, "privacy.trackers_before_consent")["evidence"].as_str().unwrap();
    assert!(trackers.contains("googletagmanager.com") && trackers.contains("connect.facebook.net"), "{trackers}");
    assert_eq!(finding(&bad, "headers.csp_unsafe")["passed"], Value::Null, "no CSP to judge");
    assert_eq!(bad["categories"]["email"], Value::Null);

    // Lists by host and status.
    let r = c.get("/scans?host=127.0.0.1&status=completed&limit=100").await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["data"].as_array().unwrap().len(), 2, "{}", r.json);
    assert_eq!(c.get("/scans?status=failed").await.json["data"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn hostile_sites_fail_with_their_code_or_complete_within_bounds() {
    let h = harness();
    let (_, key) = h.workspace("hostile scans").await;
    // Six scans polled at once: the bulk gateway's read limit.
    let c = Client::new(&h.base_bulk, &key);
    let cases = [
        ("redirect-loop", Some("unreachable")),
        ("large-page", Some("too_large")),
        ("slow-drip", Some("timeout")),
        ("metadata-redirect", Some("blocked_address")),
        ("nested-markup", None),
        ("invalid-utf8", None),
    ];
    let scans = futures_util::future::join_all(cases.iter().map(|(site, _)| scan(&c, sites().url(site)))).await;
    for ((site, code), s) in cases.iter().zip(&scans) {
        match code {
            Some(code) => assert_eq!((s["status"].as_str(), s["error"]["code"].as_str()), (Some("failed"), Some(*code)), "{site}: {s}"),
            None => assert_eq!(s["status"], "completed", "{site}: {s}"),
        }
    }
    let failed = c.get("/scans?status=failed&limit=2").await;
    assert_eq!((failed.status, failed.json["data"].as_array().map(Vec::len)), (200, Some(2)), "{}", failed.json);
    let rest = c.get(&format!("/scans?status=failed&cursor={}", failed.json["next_cursor"].as_str().unwrap())).await;
    assert_eq!(rest.json["data"].as_array().map(Vec::len), Some(2), "{}", rest.json);
    let nested = &scans[4];
    assert_eq!(finding(nested, "seo.title")["passed"], true, "{nested}");
    assert!(scans[5]["findings"].as_array().is_some_and(|f| !f.is_empty()));
}

/// At most two scans hit one host at once, across workspaces and containers: racing for the
/// host's slots, two win; a released or expired slot is free again.
#[tokio::test]
async fn a_host_is_scanned_by_at_most_two_scans_at_once() {
    let app = harness().app().await;
    let host = format!("{}.slots.test", shared::ids::new_id("h").to_ascii_lowercase());
    let ids: Vec<String> = (0..5).map(|_| shared::ids::new_id("scan")).collect();
    let taken = futures_util::future::join_all(ids.iter().map(|id| domain::scans::take_host_slot(&app, &host, id))).await;
    let winners: Vec<(usize, &String)> = taken.iter().zip(&ids).filter_map(|(t, id)| t.as_ref().unwrap().map(|s| (s, id))).collect();
    assert_eq!(winners.len(), domain::scans::SLOTS_PER_HOST, "{taken:?}");
    assert!(domain::scans::take_host_slot(&app, &host, &ids[4]).await.unwrap().is_none() || winners.iter().any(|(_, id)| **id == ids[4]));
    // The same scan taking its slot again keeps it (a redelivered job).
    let (slot, id) = winners[0];
    assert_eq!(domain::scans::take_host_slot(&app, &host, id).await.unwrap(), Some(slot));
    domain::scans::release_host_slot(&app, &host, slot, id).await;
    let newcomer = shared::ids::new_id("scan");
    assert_eq!(domain::scans::take_host_slot(&app, &host, &newcomer).await.unwrap(), Some(slot));
}

#[tokio::test]
async fn a_url_is_scanned_once_per_ten_minutes_unless_forced_and_urls_are_checked() {
    let h = harness();
    let (_, key) = h.workspace("scan dedup").await;
    let c = Client::new(&h.base, &key);
    let url = sites().url("neglected");
    let body = json!({"url": url});
    let (a, b) = tokio::join!(c.post("/scans", &body), c.post("/scans", &body));
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(statuses, [200, 202], "one creates, the racing one gets it: {} / {}", a.json, b.json);
    assert_eq!(a.json["data"]["id"], b.json["data"]["id"]);
    let again = c.post("/scans", &json!({"url": format!("{url}#fragment")})).await;
    assert_eq!((again.status, &again.json["data"]["id"]), (200, &a.json["data"]["id"]), "same URL, same scan");
    let forced = c.post("/scans", &json!({"url": url, "force": true})).await;
    assert_eq!(forced.status, 202);
    assert_ne!(forced.json["data"]["id"], a.json["data"]["id"]);

    for bad in ["ftp://example.com/", "http://10.0.0.1/", "http://169.254.169.254/", "not a url", "https://user:pw@example.com/"] {
        let r = c.post("/scans", &json!({"url": bad})).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("url")), "{bad}: {}", r.json);
    }
    // Loopback is a development switch: the production rules refuse it.
    let strict = Client::new(&h.base_strict, &key);
    let r = strict.post("/scans", &json!({"url": url})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("url")), "{}", r.json);
    assert_eq!(c.get("/scans/scan_01HF6Z3Q8M4W2T9K7R5N1B0C6D").await.status, 404);
}
