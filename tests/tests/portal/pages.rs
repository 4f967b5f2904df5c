//! The portal's web pages (`/p/<slug>/...`): their security over plain HTTP here, and every
//! flow in Debian's Chromium (tests/browser/portal.mjs, driven by playwright-core), against
//! this stack's gateway, reading the sign-in mail from moto's SES.

use e2e::{Client, created, harness};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A page client: keeps the cookies it is given (as a browser does), follows no redirects.
#[derive(Clone)]
struct Browser {
    http: reqwest::Client,
    jar: Arc<Mutex<Vec<(String, String)>>>,
}

struct Call {
    rb: reqwest::RequestBuilder,
    jar: Arc<Mutex<Vec<(String, String)>>>,
}

fn browser() -> Browser {
    Browser { http: reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap(), jar: Arc::default() }
}

impl Browser {
    fn call(&self, rb: reqwest::RequestBuilder) -> Call {
        let cookies = self.jar.lock().unwrap().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ");
        let rb = if cookies.is_empty() { rb } else { rb.header("cookie", cookies) };
        Call { rb, jar: self.jar.clone() }
    }
    fn get(&self, url: impl reqwest::IntoUrl) -> Call {
        self.call(self.http.get(url))
    }
    fn post(&self, url: impl reqwest::IntoUrl) -> Call {
        self.call(self.http.post(url))
    }
}

impl Call {
    fn header(mut self, k: &str, v: &str) -> Self {
        self.rb = self.rb.header(k, v);
        self
    }
    fn body(mut self, b: String) -> Self {
        self.rb = self.rb.body(b);
        self
    }
    async fn send(self) -> reqwest::Response {
        let r = self.rb.send().await.unwrap();
        let mut jar = self.jar.lock().unwrap();
        for c in r.headers().get_all("set-cookie") {
            let first = c.to_str().unwrap().split(';').next().unwrap_or_default();
            if let Some((k, v)) = first.split_once('=') {
                jar.retain(|(n, _)| n != k);
                if !v.is_empty() && !c.to_str().unwrap().contains("Max-Age=0") {
                    jar.push((k.to_string(), v.to_string()));
                }
            }
        }
        r
    }
}

/// A workspace ready for its portal: a verified domain, a look, and its slug.
async fn portal_workspace(name: &str) -> (Client, String, String) {
    let h = harness();
    let (ws, key) = h.workspace(name).await;
    let c = Client::new(&h.base_bulk, &key);
    e2e::verified_domain(&c, &ws).await;
    let r = c.patch("/workspaces/current", &json!({"accent_color": "#0b6e4f"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let slug = r.json["data"]["slug"].as_str().unwrap().to_string();
    (c, ws, slug)
}

async fn generous_pages() -> String {
    let h = harness();
    h.pages_gateway(h.generous_config()).await
}

/// The token in a page's form.
fn csrf_of(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a form with its token") + "name=\"csrf\" value=\"".len();
    html[at..at + 64].to_string()
}

/// The newest message moto's SES sent to `to` whose subject contains `subject`, after `seen` of them.
async fn mail_to(to: &str, subject: &str, seen: usize) -> Value {
    for _ in 0..150 {
        let all: Vec<Value> = harness()
            .ses_sent()
            .await
            .into_iter()
            .filter(|m| m["destinations"].to_string().contains(to) && m["subject"].as_str().unwrap_or_default().contains(subject))
            .collect();
        if all.len() > seen {
            return all.last().unwrap().clone();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no mail {subject:?} to {to}")
}

#[tokio::test]
async fn every_page_carries_the_security_headers_and_forms_need_their_token() {
    let (c, _, slug) = portal_workspace("pages headers").await;
    // Before any page: a container keeps what it read of a workspace for 30 s.
    let r = c.patch("/workspaces/current", &json!({"logo_url": logo_server().await})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let origin = generous_pages().await;
    let b = browser();
    let home = format!("{origin}/p/{slug}/");
    let r = b.get(&home).header("accept-language", "nb-NO,nb;q=0.9,en;q=0.5").send().await;
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    let csp = h["content-security-policy"].to_str().unwrap();
    for part in ["default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "script-src 'self'", "style-src 'self'"] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["content-language"], "nb");
    let cookie = h.get_all("set-cookie").iter().map(|v| v.to_str().unwrap()).find(|c| c.starts_with("portal_csrf=")).unwrap();
    for attr in ["HttpOnly", "Secure", "SameSite=Lax", &format!("Path=/p/{slug}")] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    let html = r.text().await.unwrap();
    assert!(html.contains("<html lang=\"nb\"") && html.contains("Logg inn"), "{html}");
    assert!(!html.contains("<script>") && !html.contains("style="), "no inline script or style");
    let token = csrf_of(&html);
    // Every asset the page names is its own: no third-party request.
    for needle in ["src=\"http", "href=\"http"] {
        assert!(!html.contains(needle), "{needle} in {html}");
    }
    let css = b.get(format!("{origin}/p/{slug}/style.css")).send().await.text().await.unwrap();
    assert!(css.starts_with(":root{--accent:#0b6e4f}"), "{css}");
    // The logo comes through the pages' own origin, fetched by the SSRF-safe client.
    let logo = b.get(format!("{origin}/p/{slug}/logo")).send().await;
    assert_eq!((logo.status().as_u16(), logo.headers()["content-type"].to_str().unwrap()), (200, "image/png"));
    assert!(logo.bytes().await.unwrap().starts_with(b"\x89PNG"));

    let sign_in = format!("{origin}/p/{slug}/sign-in");
    let form = |csrf: &str| format!("email=nobody%40example.org&csrf={csrf}");
    let ct = ("content-type", "application/x-www-form-urlencoded");
    let r = b.post(&sign_in).header(ct.0, ct.1).body(form("")).send().await;
    assert_eq!(r.status(), 403, "a form without its token");
    let r = b.post(&sign_in).header(ct.0, ct.1).body(form(&"0".repeat(64))).send().await;
    assert_eq!(r.status(), 403, "a form with another token");
    let r = b.post(&sign_in).header(ct.0, ct.1).header("sec-fetch-site", "cross-site").body(form(&token)).send().await;
    assert_eq!(r.status(), 403, "a form from another site");
    assert!(r.headers().contains_key("content-security-policy"));
    // Another browser's token does not fit this one's cookie.
    let r = browser().post(&sign_in).header(ct.0, ct.1).body(form(&token)).send().await;
    assert_eq!(r.status(), 403);
    let r = b.post(&sign_in).header(ct.0, ct.1).body(form(&token)).send().await;
    assert_eq!((r.status().as_u16(), r.headers()["location"].to_str().unwrap()), (303, format!("/p/{slug}/code").as_str()));

    // Unknown workspaces and pages answer the site's own 404 page.
    let r = b.get(format!("{origin}/p/no-such-workspace-here/")).send().await;
    assert_eq!(r.status(), 404);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert_eq!(b.get(format!("{origin}/p/{slug}/nope")).send().await.status(), 404);
    // A signed-in page without a session goes to the sign-in.
    let r = b.get(format!("{origin}/p/{slug}/bookings")).send().await;
    assert_eq!((r.status().as_u16(), r.headers()["location"].to_str().unwrap()), (303, format!("/p/{slug}/").as_str()));
}

/// A session cookie reaches only its own workspace's pages; an expired or used link signs in
/// no one; known and unknown addresses get the same answer in the same time.
#[tokio::test]
async fn sessions_stay_in_their_workspace_and_sign_in_reveals_no_one() {
    let (c, _ws, slug) = portal_workspace("pages session").await;
    let (_c2, _, other_slug) = portal_workspace("pages other").await;
    let origin = generous_pages().await;
    let me = created(&c, "/contacts", json!({"email": "pat@example.org", "first_name": "Pat"}), 201).await;
    let session = e2e::portal_session(&c, me["id"].as_str().unwrap()).await;
    let page = |s: &str, path: &str| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .get(format!("{origin}/p/{s}{path}"))
            .header("cookie", format!("portal_session={session}"))
    };
    let r = page(&slug, "/account").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("pat@example.org"));
    let r = page(&other_slug, "/account").send().await.unwrap();
    assert_eq!(r.status(), 303, "another workspace's cookie is no session here");
    assert!(r.headers().get_all("set-cookie").iter().any(|v| v.to_str().unwrap().starts_with("portal_session=;")), "and is removed");

    // A link: used once, then refused; an expired one refused.
    let link = |c: &Client| {
        let c = c.clone();
        let id = me["id"].as_str().unwrap().to_string();
        async move {
            created(&c, "/portal/sessions", json!({"contact_id": id, "delivery": "return"}), 201).await["token"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let post_link = |token: String| {
        let (origin, slug) = (origin.clone(), slug.clone());
        async move {
            let b = browser();
            let page = b.get(format!("{origin}/p/{slug}/link?token={token}")).send().await;
            let status = page.status().as_u16();
            let html = page.text().await.unwrap();
            if status != 200 {
                // Refused before any button: used, expired or not this workspace's.
                assert!(!html.contains(&token), "a refused link is not offered");
                return (status, vec![]);
            }
            assert!(html.contains(&token) && html.contains("pat@example.org"), "the page asks, naming the account: {html}");
            let r = b
                .post(format!("{origin}/p/{slug}/link"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("token={token}&csrf={}", csrf_of(&html)))
                .send()
                .await;
            let cookies = r.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_string()).collect();
            (r.status().as_u16(), cookies)
        }
    };
    let token = link(&c).await;
    let (status, cookies) = post_link(token.clone()).await;
    assert_eq!(status, 303);
    assert!(cookies.iter().any(|v| v.starts_with("portal_session=pss_")));
    assert_eq!(post_link(token).await.0, 401, "a used link");
    let token = link(&c).await;
    let app = harness().app().await;
    let pk = domain::keys::PORTAL_LINK.pk(&shared::auth::hash_api_key(&token));
    app.db.update(&pk, domain::keys::PORTAL_LINK.table.sk, "SET expires_at = :e").value(":e", shared::store::n(1)).apply().await.unwrap();
    assert_eq!(post_link(token).await.0, 401, "an expired link");
    // Another workspace's link does not sign in here, even posted without its page.
    let token = link(&c).await;
    let b = browser();
    let r = b.get(format!("{origin}/p/{other_slug}/link?token={token}")).send().await;
    assert_eq!(r.status(), 401);
    let html = b.get(format!("{origin}/p/{other_slug}/")).send().await.text().await.unwrap();
    let r = b
        .post(format!("{origin}/p/{other_slug}/link"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}&csrf={}", csrf_of(&html)))
        .send()
        .await;
    assert_eq!(r.status(), 401);

    // No enumeration: the same redirect, and the same time within noise.
    let mut known = vec![];
    let mut unknown = vec![];
    for i in 0..3 {
        let addr = format!("known{i}@example.org");
        created(&c, "/contacts", json!({"email": addr}), 201).await;
        for (list, addr) in [(&mut known, addr), (&mut unknown, format!("stranger{i}@example.org"))] {
            let b = browser();
            let html = b.get(format!("{origin}/p/{slug}/")).send().await.text().await.unwrap();
            let started = Instant::now();
            let r = b
                .post(format!("{origin}/p/{slug}/sign-in"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("email={}&csrf={}", addr.replace('@', "%40"), csrf_of(&html)))
                .send()
                .await;
            list.push(started.elapsed());
            assert_eq!((r.status().as_u16(), r.headers()["location"].to_str().unwrap()), (303, format!("/p/{slug}/code").as_str()));
        }
    }
    known.sort();
    unknown.sort();
    let (k, u) = (known[1].as_millis() as i64, unknown[1].as_millis() as i64);
    assert!((k - u).abs() < 250, "median known {k} ms, unknown {u} ms");
    assert!(k >= domain::portal::SIGN_IN_FLOOR.as_millis() as i64);
}

/// The sign-in API (for a workspace's own pages): the same answer for every address, a code
/// that opens one session, and attempts limited per address.
#[tokio::test]
async fn the_sign_in_api_sends_a_code_only_to_a_contact_and_limits_attempts() {
    let (c, ws, slug) = portal_workspace("pages api").await;
    let h = harness();
    // Generous limits here: the strict ones are measured below, from a full bucket.
    let anon = Client::anonymous(&format!("{}/api/v1", generous_pages().await));
    created(&c, "/contacts", json!({"email": "lee@example.org"}), 201).await;
    let known = anon.post("/portal/sign-in", &json!({"workspace": slug, "email": "Lee@Example.org", "lang": "nb"})).await;
    assert_eq!(known.status, 202, "{}", known.json);
    let unknown = anon.post("/portal/sign-in", &json!({"workspace": slug, "email": "zed@example.org"})).await;
    let nowhere = anon.post("/portal/sign-in", &json!({"workspace": "no-such-place", "email": "zed@example.org"})).await;
    for r in [&unknown, &nowhere] {
        assert_eq!(r.status, 202);
        assert_eq!(
            r.json["data"].as_object().unwrap().keys().collect::<Vec<_>>(),
            known.json["data"].as_object().unwrap().keys().collect::<Vec<_>>()
        );
    }
    let mail = mail_to("lee@example.org", "Innloggingslenken", 0).await;
    let body = mail["body"].as_str().unwrap();
    let code = body.split(|ch: char| !ch.is_ascii_digit()).find(|w| w.len() == 6).unwrap().to_string();
    assert!(body.contains(&format!("/p/{slug}/link?token=psl_")), "{body}");
    let attempt = known.json["data"]["attempt"].as_str().unwrap();
    let wrong = if code == "000000" { "111111" } else { "000000" };
    let r = anon.post("/portal/sign-in/verify", &json!({"attempt": attempt, "code": wrong})).await;
    assert_eq!(r.status, 400);
    let r = anon.post("/portal/sign-in/verify", &json!({"attempt": unknown.json["data"]["attempt"], "code": code})).await;
    assert_eq!(r.status, 400, "an unknown address's attempt opens nothing");
    let r = anon.post("/portal/sign-in/verify", &json!({"attempt": attempt, "code": code})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(Client::portal(&h.base, r.json["data"]["session_token"].as_str().unwrap()).get("/portal/me").await.status, 200);
    let r = anon.post("/portal/sign-in/verify", &json!({"attempt": attempt, "code": code})).await;
    assert_eq!(r.status, 400, "a code opens one session");

    // The stored copy of the mail names no credential: a key that reads emails cannot sign in.
    let listed = c.get("/emails?tag=portal").await;
    assert_eq!(listed.status, 200, "{}", listed.json);
    for e in listed.json["data"].as_array().unwrap() {
        let full = c.get(&format!("/emails/{}", e["id"].as_str().unwrap())).await.json["data"]["text"].to_string();
        assert!(!full.contains("psl_") && !full.contains(&code), "{full}");
    }
    // Once SES took it, the sealed credentials are not kept either.
    let app = h.app().await;
    let wid = shared::auth::WorkspaceId::trusted(ws.as_str());
    let sent = listed.json["data"].as_array().unwrap().iter().find(|e| e["status"] == "sent").expect("a sent portal email");
    let body = app
        .db
        .get(&shared::store::ws_pk(&wid), &domain::emails::body_sk(&domain::ids::EmailId::trusted(sent["id"].as_str().unwrap())))
        .await
        .unwrap()
        .unwrap();
    assert!(!body.contains_key("sealed_secrets") && body.contains_key("text"));

    // Per address asked for: 5 at once, then 429 with Retry-After (the default class, on a
    // gateway whose other classes are generous so the network address's bucket stays out of it).
    let mut cfg = h.generous_config();
    cfg.limits.remove(&shared::ratelimit::Class::PortalSignInAddress);
    let strict = Client::anonymous(&format!("{}/api/v1", h.pages_gateway(cfg).await));
    let mut statuses = vec![];
    for _ in 0..6 {
        let r = strict.post("/portal/sign-in", &json!({"workspace": slug, "email": "busy@example.org"})).await;
        statuses.push(r.status);
        if r.status == 429 {
            assert!(r.header("retry-after").is_some());
        }
    }
    assert_eq!(statuses, [202, 202, 202, 202, 202, 429]);
}

/// A fixed PNG on a loopback port: the workspace's logo.
async fn logo_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // A 1x1 PNG of one green pixel (the browser scales it into a square).
        const PNG: &[u8] = &[
            0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00,
            0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78,
            0x9c, 0x63, 0xe0, 0xce, 0xf3, 0x07, 0x00, 0x01, 0x50, 0x00, 0xc9, 0xaa, 0x16, 0x3a, 0x36, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
            0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
        ];
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf).await;
            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: image/png\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", PNG.len());
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(PNG).await;
        }
    });
    format!("http://{addr}/logo.png")
}

/// Every flow in a real browser: tests/browser/portal.mjs.
#[tokio::test]
async fn the_portal_pages_work_in_a_real_browser() {
    let (c, ws, slug) = portal_workspace("Fjord Studio").await;
    let h = harness();
    let r = c.patch("/workspaces/current", &json!({"logo_url": logo_server().await})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let r = c.patch("/workspaces/current", &json!({"accent_color": "#ffd400"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("accent_color")), "yellow on white is refused");
    let origin = generous_pages().await;
    let email = format!("ada.{}@example.org", ws.trim_start_matches("ws_").to_ascii_lowercase());
    let me = created(&c, "/contacts", json!({"email": email, "first_name": "Ada", "last_name": "Lovelace"}), 201).await;
    let other = created(&c, "/contacts", json!({"email": format!("other.{email}")}), 201).await;
    let day = json!([{"start": "00:00", "end": "24:00"}]);
    let hours = json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day});
    let res = created(&c, "/bookings/resources", json!({"name": "Studio A", "timezone": "Europe/Oslo", "opening_hours": hours}), 201).await;
    let svc = created(
        &c,
        "/bookings/services",
        json!({"name": "Portrait session", "duration_minutes": 60, "resource_ids": [res["id"]], "cancellation_window_minutes": 120, "slot_interval_minutes": 60}),
        201,
    )
    .await;
    let at = |hours: i64| {
        let t = chrono::Utc::now() + chrono::Duration::hours(hours);
        format!("{}:00:00Z", t.format("%Y-%m-%dT%H"))
    };
    let book = |contact: &Value, start: String| {
        let (c, svc, contact) = (c.clone(), svc["id"].clone(), contact["id"].clone());
        async move {
            created(&c, "/bookings", json!({"service_id": svc, "start": start, "contact_id": contact}), 201).await["id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let cancel_me = book(&me, at(50)).await;
    let move_me = book(&me, at(75)).await;
    let too_late = book(&me, at(2)).await;
    let not_mine = book(&other, at(100)).await;

    let shots = match std::env::var("PORTAL_SCREENSHOTS") {
        Ok(dir) if !dir.is_empty() => dir,
        _ => tools::localstack::repo_root().join("target/portal-screenshots").to_string_lossy().into_owned(),
    };
    let root = tools::localstack::repo_root();
    let out = tokio::process::Command::new("node")
        .arg(root.join("tests/browser/portal.mjs"))
        .env("PORTAL_URL", format!("{origin}/p/{slug}"))
        .env("MOTO_URL", &h.moto_endpoint)
        .env("CUSTOMER_EMAIL", &email)
        .env("CANCEL_ME", &cancel_me)
        .env("MOVE_ME", &move_me)
        .env("TOO_LATE", &too_late)
        .env("NOT_MINE", &not_mine)
        .env("SHOTS_DIR", &shots)
        .env("API_URL", &h.base_bulk)
        .env("API_KEY", c.auth.as_deref().unwrap_or_default())
        .env("CONTACT_ID", me["id"].as_str().unwrap())
        .kill_on_drop(true)
        .output()
        .await
        .expect("node runs");
    let log = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the browser flows failed:\n{log}");
    println!("{log}");
    // What the browser did, as the API sees it.
    let b = |id: &str| {
        let c = c.clone();
        let id = id.to_string();
        async move { c.get(&format!("/bookings/{id}")).await.json["data"].clone() }
    };
    assert_eq!(b(&cancel_me).await["status"], "cancelled");
    assert_eq!(b(&cancel_me).await["cancelled_by"], "customer");
    assert!(b(&move_me).await["rescheduled_to"].is_string());
    assert_eq!(b(&too_late).await["status"], "confirmed");
    assert_eq!(b(&not_mine).await["status"], "confirmed");
    let contact = format!("/contacts/{}", me["id"].as_str().unwrap());
    for _ in 0..150 {
        if c.get(&contact).await.status == 404 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the customer's erasure did not remove the contact");
}

/// Every signed-in page loads the session's contact first: once the contact is deleted, its
/// session lists, cancels and moves nothing (the API routes answer 401 the same way). And the
/// customer sees only mail addressed to them (current or former address), not mail the staff
/// wrote about them.
#[tokio::test]
async fn a_deleted_contacts_session_reaches_no_page_and_only_mail_to_the_customer_shows() {
    let (c, ws, slug) = portal_workspace("pages deleted").await;
    let lower = ws.trim_start_matches("ws_").to_ascii_lowercase();
    let domain = format!("{lower}.example.test");
    let origin = generous_pages().await;
    let old = format!("old.{lower}@example.org");
    let email = format!("ada.{lower}@example.org");
    let me = created(&c, "/contacts", json!({"email": old, "first_name": "Ada"}), 201).await;
    let id = me["id"].as_str().unwrap().to_string();
    let send = |to: &str, subject: &str| {
        let (c, body) =
            (c.clone(), json!({"from": format!("Studio <hi@{domain}>"), "to": [to], "subject": subject, "text": "t", "contact_id": id}));
        async move {
            let r = c.post("/emails", &body).await;
            assert_eq!(r.status, 202, "{}", r.json);
        }
    };
    send(&old, "To the old address").await;
    assert_eq!(c.patch(&format!("/contacts/{id}"), &json!({"email": email})).await.status, 200);
    send(&email, "Your receipt").await;
    send(&format!("boss@{domain}"), "Fraud suspicion: Ada").await;

    let session = e2e::portal_session(&c, &id).await;
    let p = Client::portal(&c.base, &session);
    let listed = p.get("/portal/me/emails").await.json["data"].to_string();
    assert!(listed.contains("Your receipt") && listed.contains("To the old address"), "{listed}");
    assert!(!listed.contains("Fraud suspicion"), "mail about the customer is not theirs: {listed}");
    let b = browser();
    b.jar.lock().unwrap().push(("portal_session".into(), session.clone()));
    let page = b.get(format!("{origin}/p/{slug}/emails")).send().await.text().await.unwrap();
    assert!(page.contains("Your receipt") && !page.contains("Fraud suspicion"), "{page}");

    // A booking of theirs, then the contact is deleted.
    let day = json!([{"start": "00:00", "end": "24:00"}]);
    let hours = json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day});
    let res = created(&c, "/bookings/resources", json!({"name": "Room", "timezone": "UTC", "opening_hours": hours}), 201).await;
    let svc = created(&c, "/bookings/services", json!({"name": "Visit", "duration_minutes": 60, "resource_ids": [res["id"]]}), 201).await;
    let start = format!("{}:00:00Z", (chrono::Utc::now() + chrono::Duration::days(3)).format("%Y-%m-%dT%H"));
    let booking = created(&c, "/bookings", json!({"service_id": svc["id"], "start": start, "contact_id": id}), 201).await;
    let bid = booking["id"].as_str().unwrap().to_string();
    let html = b.get(format!("{origin}/p/{slug}/bookings")).send().await.text().await.unwrap();
    assert!(html.contains(&bid), "listed while the contact exists");
    let csrf = csrf_of(&html);
    assert_eq!(c.delete(&format!("/contacts/{id}")).await.status, 200);

    let later = format!("{}:00:00Z", (chrono::Utc::now() + chrono::Duration::days(4)).format("%Y-%m-%dT%H"));
    let mut tried = 0;
    for page in portal::pages::PAGES.iter().filter(|p| p.signed_in && p.path != "/sign-out") {
        let path = page.path.replace("{id}", &bid);
        let url = format!("{origin}/p/{slug}{path}");
        let r = if page.method == http::Method::GET {
            b.get(url).send().await
        } else {
            b.post(url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("csrf={csrf}&start={}&code=123456", later.replace(':', "%3A")))
                .send()
                .await
        };
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert_eq!(status, 401, "{} {path}: {body}", page.method);
        assert!(!body.contains(&bid) && !body.contains(&email), "{} {path} shows nothing of theirs", page.method);
        tried += 1;
    }
    assert!(tried >= 10, "{tried} pages");
    let after = c.get(&format!("/bookings/{bid}")).await.json["data"].clone();
    assert_eq!((after["status"].as_str(), after["start"].as_str()), (booking["status"].as_str(), Some(start.as_str())), "{after}");
    assert_eq!(p.get("/portal/me/bookings").await.status, 401);
}

/// A slug a workspace gave up stays reserved for it: its customers' bookmarks follow it to the
/// new slug, no other workspace can take it, and the workspace can take it back.
#[tokio::test]
async fn a_released_slug_stays_its_workspaces_and_redirects() {
    let (a, _, slug) = portal_workspace("slug keeper").await;
    let (b, _, _) = portal_workspace("slug taker").await;
    let origin = generous_pages().await;
    let new = format!("{slug}-new");
    let r = a.patch("/workspaces/current", &json!({"slug": new})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let r = b.patch("/workspaces/current", &json!({"slug": slug})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (409, Some("slug")), "{}", r.json);
    // A bookmark of a page under the old slug opens the same page under the new one.
    let r = browser().get(format!("{origin}/p/{slug}/bookings?x=1")).send().await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"].to_str().unwrap(), format!("/p/{new}/bookings?x=1"));
    let home = browser().get(format!("{origin}/p/{new}/")).send().await;
    assert_eq!(home.status(), 200);
    // The sign-in API still knows the old slug as this workspace.
    let anon = Client::anonymous(&format!("{origin}/api/v1"));
    assert_eq!(anon.post("/portal/sign-in", &json!({"workspace": slug, "email": "nobody@example.org"})).await.status, 202);
    // And the workspace may take its old slug back; the one it leaves is reserved in turn.
    let r = a.patch("/workspaces/current", &json!({"slug": slug})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    // (The pages cache what a slug names for 30 s; the claims themselves, read afresh:)
    let app = harness().app().await;
    let (ws_a, moved) = domain::workspaces::by_slug(&app, &slug).await.unwrap().unwrap();
    assert_eq!(moved, None);
    assert_eq!(domain::workspaces::by_slug(&app, &new).await.unwrap(), Some((ws_a, Some(slug.clone()))));
    assert_eq!(b.patch("/workspaces/current", &json!({"slug": new})).await.status, 409);
}
