//! Contacts, imports and deals end to end over HTTP (the import worker runs in the local stack).

use e2e::{Client, harness};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::{Duration, Instant};

async fn bulk_client(name: &str) -> (Client, String) {
    let h = harness();
    let (ws, key) = h.workspace(name).await;
    (Client::new(&h.base_bulk, &key), ws)
}

async fn contact(c: &Client, body: Value) -> Value {
    let r = c.post("/contacts", &body).await;
    assert_eq!(r.status, 201, "{}", r.json);
    r.json["data"].clone()
}

async fn wait_import(c: &Client, id: &str, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    // A poller retries: while the workers' transactions load DynamoDB Local on 2 cores, a read
    // may get `503 UNAVAILABLE` (the envelope, with Retry-After) and is asked again.
    let poller = Client::new(&c.base, c.auth.as_deref().unwrap()).during_outage();
    loop {
        let r = poller.get(&format!("/contacts/imports/{id}")).await;
        if r.status == 503 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        assert_eq!(r.status, 200, "{}", r.json);
        let st = r.json["data"]["status"].as_str().unwrap().to_string();
        if st == "completed" || st == "failed" || Instant::now() > deadline {
            return r.json["data"].clone();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Every page of a list, following next_cursor.
async fn all_pages(c: &Client, path: &str) -> Vec<Value> {
    let mut out = vec![];
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut url = format!("{path}{sep}limit=100");
    loop {
        let r = c.get(&url).await;
        assert_eq!(r.status, 200, "{}", r.json);
        out.extend(r.json["data"].as_array().unwrap().iter().cloned());
        match r.json["next_cursor"].as_str() {
            Some(cur) => url = format!("{path}{sep}limit=100&cursor={cur}"),
            None => return out,
        }
    }
}

#[tokio::test]
async fn one_email_one_contact_even_when_twenty_creates_race() {
    let (c, _) = bulk_client("email race").await;
    let creates = (0..20).map(|i| {
        let email = if i % 2 == 0 { "Race.Winner@Example.com" } else { " race.winner@example.COM" };
        let body = json!({"email": email, "first_name": format!("Racer {i}")});
        let c = &c;
        async move { c.post("/contacts", &body).await }
    });
    let results = futures_util::future::join_all(creates).await;
    let winners: Vec<&e2e::Resp> = results.iter().filter(|r| r.status == 201).collect();
    assert_eq!(winners.len(), 1, "{:?}", results.iter().map(|r| (r.status, r.json.to_string())).collect::<Vec<_>>());
    let id = winners[0].json["data"]["id"].as_str().unwrap();
    assert_eq!(winners[0].json["data"]["email"], "race.winner@example.com", "normalised");
    for r in results.iter().filter(|r| r.status != 201) {
        assert_eq!((r.status, r.code()), (409, "CONFLICT"), "{}", r.json);
        assert_eq!(r.json["error"]["details"][0]["meta"]["contact_id"], id, "the loser learns the existing id: {}", r.json);
    }
    let listed = c.get("/contacts?q=race").await;
    assert_eq!(listed.json["data"].as_array().unwrap().len(), 1);

    // Changing an email keeps uniqueness too.
    let other = contact(&c, json!({"email": "other@example.com"})).await;
    let r = c.patch(&format!("/contacts/{}", other["id"].as_str().unwrap()), &json!({"email": "RACE.WINNER@example.com"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["meta"]["contact_id"].as_str()), (409, Some(id)));
    let r = c.patch(&format!("/contacts/{}", other["id"].as_str().unwrap()), &json!({"email": "renamed@example.com"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    // The old address is free again, the new one is taken.
    assert_eq!(c.post("/contacts", &json!({"email": "other@example.com"})).await.status, 201);
    assert_eq!(c.post("/contacts", &json!({"email": "renamed@example.com"})).await.status, 409);
}

#[tokio::test]
async fn contact_fields_filters_search_and_timeline() {
    let (c, _) = bulk_client("contact fields").await;
    for (body, field) in [
        (json!({"email": "not-an-email"}), "email"),
        (json!({"email": "a@example.com", "phone": "030 1234"}), "phone"),
        (json!({"email": "a@example.com", "status": "vip"}), "status"),
        (json!({"email": "a@example.com", "labels": ["x", "x"]}), "labels[1]"),
        (json!({"email": "a@example.com", "custom_fields": {"nested": {"a": 1}}}), "custom_fields.nested"),
    ] {
        let r = c.post("/contacts", &body).await;
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.json);
    }
    let ada = contact(
        &c,
        json!({"email": "ada@example.com", "first_name": "Ada", "last_name": "Lovelace", "phone": "+442071234567",
               "status": "customer", "labels": ["vip"], "custom_fields": {"tier": "gold", "seats": 5}, "company": "Analytical"}),
    )
    .await;
    // Ids carry milliseconds, the filter takes seconds: wait past the next whole second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let cut = shared::ids::now_rfc3339();
    contact(&c, json!({"email": "bob@builder.com", "first_name": "Bob", "email_status": "unsubscribed"})).await;
    contact(&c, json!({"email": "adalbert@example.com", "first_name": "Adalbert", "last_name": "Stifter"})).await;
    let ids = |v: Vec<Value>| v.iter().map(|x| x["email"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(
        ids(all_pages(&c, "/contacts?q=ada").await),
        vec!["ada@example.com", "adalbert@example.com"],
        "prefix of names and emails, once each, in term order"
    );
    assert_eq!(ids(all_pages(&c, "/contacts?q=LOVE").await), vec!["ada@example.com"], "last name, any case");
    assert_eq!(ids(all_pages(&c, "/contacts?q=bob%40").await), vec!["bob@builder.com"]);
    assert_eq!(ids(all_pages(&c, "/contacts?status=customer").await), vec!["ada@example.com"]);
    assert_eq!(ids(all_pages(&c, "/contacts?email_status=unsubscribed").await), vec!["bob@builder.com"]);
    assert_eq!(ids(all_pages(&c, "/contacts?label=vip").await), vec!["ada@example.com"]);
    let after = all_pages(&c, &format!("/contacts?created_after={}", cut.replace('+', "%2B"))).await;
    assert!(!ids(after.clone()).contains(&"ada@example.com".to_string()) && ids(after).contains(&"bob@builder.com".to_string()));
    assert_eq!(c.get("/contacts?status=nope").await.status, 400);
    assert_eq!(c.get("/contacts?created_after=yesterday").await.status, 400);

    let id = ada["id"].as_str().unwrap();
    let r = c.patch(&format!("/contacts/{id}"), &json!({"job_title": "Countess", "custom_fields": {"seats": null, "region": "EU"}})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["data"]["custom_fields"], json!({"tier": "gold", "region": "EU"}));
    let r = c.post(&format!("/contacts/{id}/notes"), &json!({"body": "Met at the conference"})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(c.post("/contacts/ct_01HF6Z3Q8M4W2T9K7R5N1B0C6D/notes", &json!({"body": "x"})).await.status, 404);
    let timeline = all_pages(&c, &format!("/contacts/{id}/activities")).await;
    let kinds: Vec<&str> = timeline.iter().map(|a| a["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["note", "contact.updated", "contact.created"], "newest first");
    assert_eq!(timeline[0]["data"]["body"], "Met at the conference");
}

fn csv_line(i: usize, email: &str, phone: &str) -> String {
    format!("{email},First{i},\"Last, {i}\",{phone},\"Company \"\"{i}\"\"\",lead,vip;import\n")
}

/// Rows of the big import: two full 500-row chunks and a short one, so every kind of chunk
/// boundary is crossed (the 10,000-row run is in `make bench`).
const IMPORT_ROWS: usize = 1_100;

#[tokio::test]
async fn import_of_eleven_hundred_csv_rows_counts_exactly() {
    let (c, _) = bulk_client("big import").await;
    let existing = contact(&c, json!({"email": "row5@import.test", "first_name": "Before"})).await;
    // One row in 200 has an invalid email or phone, one in 100 repeats an earlier address (one
    // of them the contact that existed before).
    let mut csv = String::from("email,first_name,last_name,phone,company,status,labels\n");
    let (mut bad_rows, mut repeats) = (vec![], 0);
    for i in 1..=IMPORT_ROWS {
        let line = if i % 200 == 0 {
            bad_rows.push(i);
            if i % 400 == 0 { csv_line(i, &format!("broken-{i}"), "") } else { csv_line(i, &format!("row{i}@import.test"), "12345") }
        } else if i % 100 == 50 {
            repeats += 1;
            csv_line(i, &format!("ROW{}@import.test", i - 45), "") // a duplicate of row i-45
        } else {
            csv_line(i, &format!("row{i}@import.test"), "+4930123456")
        };
        csv.push_str(&line);
    }
    assert_eq!((bad_rows.len(), repeats), (5, 11));
    let r = c.post("/contacts/imports", &json!({"csv": csv, "on_conflict": "skip"})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let id = r.json["data"]["id"].as_str().unwrap().to_string();
    assert_eq!((r.json["data"]["status"].as_str(), r.json["data"]["total"].as_u64()), (Some("queued"), Some(IMPORT_ROWS as u64)));
    let started = Instant::now();
    let job = wait_import(&c, &id, 600).await;
    eprintln!("{IMPORT_ROWS}-row import took {:.1} s", started.elapsed().as_secs_f64());
    let counts = |j: &Value| ["status", "total", "processed", "created", "updated", "skipped", "failed"].map(|k| j[k].to_string());
    // Row 5's address existed before the import: it is skipped, and so are the 20 repeats.
    let (skipped, failed) = (repeats + 1, bad_rows.len());
    let created = IMPORT_ROWS - skipped - failed;
    assert_eq!(
        counts(&job),
        [
            "\"completed\"".to_string(),
            IMPORT_ROWS.to_string(),
            IMPORT_ROWS.to_string(),
            created.to_string(),
            "0".into(),
            skipped.to_string(),
            failed.to_string()
        ],
        "{job}"
    );
    let errors = all_pages(&c, &format!("/contacts/imports/{id}/errors")).await;
    let rows: Vec<u64> = errors.iter().map(|e| e["row"].as_u64().unwrap()).collect();
    assert_eq!(rows, bad_rows.iter().map(|r| *r as u64).collect::<Vec<_>>(), "one error per bad row, in row order");
    assert_eq!(errors[0]["field"], "phone");
    assert_eq!(errors[1]["field"], "email");
    let contacts = all_pages(&c, "/contacts").await;
    assert_eq!(contacts.len(), created + 1, "the imported ones + the one from before");
    assert_eq!(contacts.iter().map(|x| x["email"].as_str().unwrap()).collect::<HashSet<_>>().len(), created + 1, "no duplicates");
    assert_eq!(
        c.get(&format!("/contacts/{}", existing["id"].as_str().unwrap())).await.json["data"]["first_name"],
        "Before",
        "skip leaves it"
    );
}

#[tokio::test]
async fn an_interrupted_import_resumes_without_duplicating_contacts() {
    let h = harness();
    let (c, ws) = bulk_client("resumed import").await;
    // 1,200 rows (3 chunks), 10 of them repeating an earlier address.
    let mut csv = String::from("email,first_name\n");
    for i in 1..=1200 {
        let n = if i % 120 == 0 { i - 7 } else { i };
        csv.push_str(&format!("resume{n}@import.test,R{i}\n"));
    }
    let r = c.post("/contacts/imports", &json!({"csv": csv})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let id = r.json["data"]["id"].as_str().unwrap().to_string();
    let job = wait_import(&c, &id, 300).await;
    let counts = |j: &Value| ["status", "total", "processed", "created", "updated", "skipped", "failed"].map(|k| j[k].to_string());
    assert_eq!(counts(&job), ["\"completed\"", "1200", "1200", "1190", "0", "10", "0"].map(String::from), "{job}");
    // A crash after the contacts were written but before any progress was saved: the worker
    // runs the whole job again and finds its own contacts instead of creating new ones.
    let app = h.app().await;
    app.db
        .update(
            format!("WS#{ws}"),
            format!("IMPORT#{id}"),
            "SET next_chunk = :z, #pr = :z, #cr = :z, #up = :z, #sk = :z, #fa = :z, #s = :p",
        )
        .name("#s", "status")
        .name("#pr", "processed")
        .name("#cr", "created")
        .name("#up", "updated")
        .name("#sk", "skipped")
        .name("#fa", "failed")
        .value(":z", aws_sdk_dynamodb::types::AttributeValue::N("0".into()))
        .value(":p", aws_sdk_dynamodb::types::AttributeValue::S("processing".into()))
        .required()
        .await
        .unwrap();
    domain::contacts::import::run(&app, &shared::auth::WorkspaceId::trusted(ws.clone()), &domain::ids::ImportId::trusted(id.as_str()))
        .await
        .unwrap();
    let again = wait_import(&c, &id, 60).await;
    assert_eq!(counts(&again), counts(&job), "same counts after the resumed run");
    assert_eq!(all_pages(&c, "/contacts").await.len(), 1190, "no contact created twice");

    // A new import run by the stack's worker and, at the same moment, by two more copies of
    // its queue message (SQS delivers at least once): the runs race for the same rows and
    // chunks, and still each row makes one contact and the counts are the rows'.
    let rows: Vec<Value> = (0..600).map(|i| json!({"email": format!("copy{i}@import.test")})).collect();
    let r = c.post("/contacts/imports", &json!({"rows": rows})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let raced_id = r.json["data"]["id"].as_str().unwrap().to_string();
    let copy =
        |n: &str| shared::sqs::event(vec![shared::sqs::message(n, n, &json!({"workspace_id": ws, "import_id": raced_id}).to_string())]);
    // A copy that fails transiently is kept for redelivery, as the queue would: the state
    // below is what counts, once any copy finishes the job.
    tokio::join!(domain::contacts::import::handle_sqs(&app, copy("copy-1")), domain::contacts::import::handle_sqs(&app, copy("copy-2")));
    let raced = wait_import(&c, &raced_id, 120).await;
    assert_eq!(counts(&raced), ["\"completed\"", "600", "600", "600", "0", "0", "0"].map(String::from), "{raced}");
    assert_eq!(all_pages(&c, "/contacts").await.len(), 1790, "no contact created twice by racing runs");
}

/// An import and single creates racing for the same addresses: each address ends with exactly
/// one contact, every claim names a contact that exists (claims are written in the contact's
/// transaction), and the counts add up.
#[tokio::test]
async fn an_import_racing_single_creates_leaves_one_contact_per_address_and_no_orphan_claims() {
    let (c, _) = bulk_client("import race").await;
    let emails: Vec<String> = (0..300).map(|i| format!("racer{i}@import-race.test")).collect();
    let rows: Vec<Value> = emails.iter().map(|e| json!({"email": e})).collect();
    let r = c.post("/contacts/imports", &json!({"rows": rows})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let id = r.json["data"]["id"].as_str().unwrap().to_string();
    // 100 creates at once on 2 cores may get `503 UNAVAILABLE` from an overloaded emulator (or
    // 429 once retries spend the budget); a client retries after Retry-After with the same
    // Idempotency-Key, which replays a finished first outcome; one cut off mid-write may end
    // as a 409 for a contact it made itself, so the counts below go by contact ids.
    let racer = Client::new(&c.base, c.auth.as_deref().unwrap()).during_outage();
    let singles = emails.iter().step_by(3).map(|e| {
        let racer = &racer;
        async move {
            loop {
                let req = racer.request("POST", "/contacts").header("idempotency-key", format!("race-{e}")).json(&json!({"email": e}));
                let r = racer.send(req).await;
                if r.status != 503 && r.status != 429 {
                    return r;
                }
                let wait = r.header("retry-after").and_then(|s| s.parse().ok()).unwrap_or(1u64);
                tokio::time::sleep(Duration::from_secs(wait)).await;
            }
        }
    });
    let results = futures_util::future::join_all(singles).await;
    for r in &results {
        assert!(r.status == 201 || (r.status, r.code()) == (409, "CONFLICT"), "{} {}", r.status, r.json);
    }
    let job = wait_import(&c, &id, 120).await;
    assert_eq!(job["status"], "completed", "{job}");
    let all = all_pages(&c, "/contacts").await;
    let listed: HashSet<&str> = all.iter().map(|x| x["email"].as_str().unwrap()).collect();
    assert_eq!((all.len(), listed.len()), (300, 300), "one contact per address");
    // Who made each contact is told by its id (an import row's id is derived from the job), not
    // by the single's answer: a create cut off by the time budget may have committed, and its
    // retry then meets its own contact as a 409.
    let parsed: domain::contacts::import::ImportJob = serde_json::from_value(job.clone()).unwrap();
    let import_ids: HashSet<String> = (1..=300).map(|row| domain::contacts::import::row_contact_id(&parsed, row)).collect();
    let singles: HashSet<&str> = emails.iter().step_by(3).map(String::as_str).collect();
    let by_single: Vec<&Value> = all.iter().filter(|x| !import_ids.contains(x["id"].as_str().unwrap())).collect();
    assert!(by_single.iter().all(|x| singles.contains(x["email"].as_str().unwrap())), "only raced addresses have a single's contact");
    assert_eq!(job["created"].as_u64().unwrap(), 300 - by_single.len() as u64, "{job}");
    assert_eq!(job["skipped"].as_u64().unwrap(), by_single.len() as u64, "{job}");
    for r in results.iter().filter(|r| r.status == 201) {
        assert!(by_single.iter().any(|x| x["id"] == r.json["data"]["id"]), "a 201's contact is the one listed: {}", r.json);
    }
    // Every claim names a live contact: a second create learns an id that resolves.
    for e in emails.iter().step_by(37) {
        let r = c.post("/contacts", &json!({"email": e})).await;
        assert_eq!(r.status, 409, "{}", r.json);
        let owner = r.json["error"]["details"][0]["meta"]["contact_id"].as_str().unwrap();
        assert_eq!(c.get(&format!("/contacts/{owner}")).await.status, 200);
    }
}

#[tokio::test]
async fn csv_quoting_and_non_ascii_round_trip_and_update_on_conflict() {
    let (c, _) = bulk_client("csv round trip").await;
    let csv = "\u{feff}email,first_name,last_name,company,custom.note\r\n\
               zoe@example.com,Zoë,\"Ångström, Jr.\",\"Café \"\"Le Bon\"\", Paris\",\"line one\nline two\"\r\n\
               \"li@example.com\",李,小龙,,\r\n";
    let r = c.post("/contacts/imports", &json!({"csv": csv})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let job = wait_import(&c, r.json["data"]["id"].as_str().unwrap(), 60).await;
    assert_eq!((job["created"].as_u64(), job["failed"].as_u64()), (Some(2), Some(0)), "{job}");
    let zoe = &c.get("/contacts?q=zoe").await.json["data"][0];
    assert_eq!(zoe["first_name"], "Zoë");
    assert_eq!(zoe["last_name"], "Ångström, Jr.");
    assert_eq!(zoe["company"], "Café \"Le Bon\", Paris");
    assert_eq!(zoe["custom_fields"]["note"], "line one\nline two");
    assert_eq!(c.get("/contacts?q=%E5%B0%8F").await.json["data"][0]["first_name"], "李", "search by a non-ASCII last name");

    // JSON rows with on_conflict=update change the existing contact.
    // A renamed contact loses its old name's search terms (the update deletes them).
    let rows = json!([
        {"email": "ZOE@example.com", "job_title": "Physicist"},
        {"email": "li@example.com", "first_name": "Bruce"},
        {"email": "new@example.com"},
        {"email": "bad", "first_name": "x"}
    ]);
    let r = c.post("/contacts/imports", &json!({"rows": rows, "on_conflict": "update"})).await;
    let job = wait_import(&c, r.json["data"]["id"].as_str().unwrap(), 60).await;
    assert_eq!(["created", "updated", "skipped", "failed"].map(|k| job[k].as_u64().unwrap()), [1, 2, 0, 1], "{job}");
    let zoe = &c.get("/contacts?q=zoe").await.json["data"][0];
    assert_eq!((zoe["job_title"].as_str(), zoe["first_name"].as_str()), (Some("Physicist"), Some("Zoë")));
    assert_eq!(c.get("/contacts?q=bruce").await.json["data"][0]["email"], "li@example.com");
    assert_eq!(c.get("/contacts?q=%E6%9D%8E").await.json["data"].as_array().map(Vec::len), Some(0), "the old first name's terms are gone");

    // Refused requests still spend the import class's tokens (burst 3): one workspace per case.
    let h = harness();
    for (body, field) in [
        (json!({"csv": "name\nx\n"}), "csv"),
        (json!({"csv": "email,shoe_size\nx@example.com,4\n"}), "csv"),
        (json!({"csv": "email\n\"open\n"}), "csv"),
        (json!({"rows": []}), "rows"),
        (json!({"rows": [{"email": "a@b.co"}], "csv": "email\na@b.co\n"}), "rows"),
        (json!({"rows": [{"email": "a@b.co"}], "delimiter": "tab"}), "delimiter"),
        (json!({"csv": "email\na@b.co\n", "delimiter": "pipe"}), "delimiter"),
    ] {
        let c = Client::new(&h.base, &h.workspace("import validation").await.1);
        let r = c.post("/contacts/imports", &body).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some(field)), "{body}: {}", r.json);
    }
}

#[tokio::test]
async fn semicolon_and_tab_separated_files_import_by_detection_or_request() {
    let (c, _) = bulk_client("csv delimiters").await;
    // Excel in a Norwegian locale: `;`-separated, BOM, CRLF, commas inside unquoted fields.
    let csv = "\u{feff}email;first_name;company;labels\r\n".to_string()
        + "ola@example.no;Ola;Nordmann, Sønn & Co;\"kunde;vip\"\r\nkari@example.no;Kari;;\r\n";
    let r = c.post("/contacts/imports", &json!({"csv": csv})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let job = wait_import(&c, r.json["data"]["id"].as_str().unwrap(), 60).await;
    assert_eq!((job["created"].as_u64(), job["failed"].as_u64()), (Some(2), Some(0)), "{job}");
    let ola = &c.get("/contacts?q=ola%40example.no").await.json["data"][0];
    assert_eq!((ola["company"].as_str(), ola["labels"].clone()), (Some("Nordmann, Sønn & Co"), json!(["kunde", "vip"])));
    // A tab-separated file whose header alone would look comma-separated, told explicitly.
    let r = c.post("/contacts/imports", &json!({"csv": "email\tcompany\ntab@example.com\tA, B\n", "delimiter": "tab"})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    wait_import(&c, r.json["data"]["id"].as_str().unwrap(), 60).await;
    assert_eq!(c.get("/contacts?q=tab%40example.com").await.json["data"][0]["company"], "A, B");
}

#[tokio::test]
async fn the_import_class_answers_429_on_the_fourth_import_in_a_burst() {
    let h = harness();
    let (_, key) = h.workspace("import burst").await;
    let c = Client::new(&h.base, &key);
    let mut statuses = vec![];
    for i in 0..4 {
        let r = c.post("/contacts/imports", &json!({"rows": [{"email": format!("burst{i}@example.com")}]})).await;
        statuses.push(r.status);
        if r.status == 429 {
            assert!(r.header("retry-after").is_some_and(|v| v.parse::<u64>().unwrap() >= 1));
            assert!(r.header("ratelimit-policy").unwrap().contains("3"), "{:?}", r.header("ratelimit-policy"));
        }
    }
    assert_eq!(statuses, vec![202, 202, 202, 429]);
    // Other writes use their own class.
    assert_eq!(c.post("/contacts", &json!({"email": "still-ok@example.com"})).await.status, 201);
}

#[tokio::test]
async fn deals_follow_their_lifecycle_and_survive_their_contact() {
    let (c, _) = bulk_client("deals").await;
    let ada = contact(&c, json!({"email": "buyer@example.com", "first_name": "Ada"})).await;
    let cid = ada["id"].as_str().unwrap();
    for (body, field) in [
        (json!({"title": "x", "currency": "EURO"}), "currency"),
        (json!({"title": "x", "currency": "EUR", "value": -1}), "value"),
        (json!({"title": "", "currency": "EUR"}), "title"),
        (json!({"title": "x", "currency": "EUR", "expected_close_date": "soon"}), "expected_close_date"),
        (json!({"title": "x", "currency": "EUR", "contact_id": "ct_01HF6Z3Q8M4W2T9K7R5N1B0C6D"}), "contact_id"),
    ] {
        let r = c.post("/deals", &body).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some(field)), "{body}: {}", r.json);
    }
    let r =
        c.post("/deals", &json!({"title": "Big one", "value": 150000, "currency": "eur", "contact_id": cid, "stage": "proposal"})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let d = r.json["data"].clone();
    let id = d["id"].as_str().unwrap();
    assert_eq!((d["status"].as_str(), d["currency"].as_str()), (Some("open"), Some("EUR")));
    let other = c.post("/deals", &json!({"title": "Small", "currency": "USD"})).await.json["data"]["id"].as_str().unwrap().to_string();

    let r = c.patch(&format!("/deals/{id}"), &json!({"status": "lost"})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("lost_reason")));
    let r = c.patch(&format!("/deals/{id}"), &json!({"status": "lost", "lost_reason": "budget"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert!(r.json["data"]["closed_at"].is_string());
    let r = c.patch(&format!("/deals/{id}"), &json!({"stage": "negotiation"})).await;
    assert_eq!(r.status, 400, "stage is frozen while closed");
    let r = c.patch(&format!("/deals/{id}"), &json!({"status": "open"})).await;
    let reopened = r.json["data"].clone();
    assert!(reopened["closed_at"].is_null() && reopened["lost_reason"].is_null() && reopened["reopened_at"].is_string(), "{reopened}");
    let r = c.patch(&format!("/deals/{id}"), &json!({"status": "won", "stage": "signed"})).await;
    assert_eq!((r.json["data"]["status"].as_str(), r.json["data"]["stage"].as_str()), (Some("won"), Some("signed")), "{}", r.json);

    let ids = |v: Vec<Value>| v.iter().map(|x| x["id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(ids(all_pages(&c, "/deals?status=won").await), vec![id.to_string()]);
    assert_eq!(ids(all_pages(&c, "/deals?status=open").await), vec![other.clone()]);
    assert_eq!(ids(all_pages(&c, "/deals?stage=signed").await), vec![id.to_string()]);
    assert_eq!(ids(all_pages(&c, &format!("/deals?contact_id={cid}")).await), vec![id.to_string()]);
    let kinds: Vec<String> =
        all_pages(&c, &format!("/contacts/{cid}/activities")).await.iter().map(|a| a["type"].as_str().unwrap().to_string()).collect();
    assert_eq!(kinds, vec!["deal.won", "deal.reopened", "deal.lost", "deal.created", "contact.created"]);

    // Deleting the contact unlinks its deals; they stay.
    assert_eq!(c.delete(&format!("/contacts/{cid}")).await.status, 200);
    let d = c.get(&format!("/deals/{id}")).await.json["data"].clone();
    assert!(d["contact_id"].is_null(), "{d}");
    assert_eq!(all_pages(&c, &format!("/deals?contact_id={cid}")).await.len(), 0);
    let r = c.patch(&format!("/deals/{other}"), &json!({"contact_id": cid})).await;
    assert_eq!(
        (r.status, r.json["error"]["details"][0]["field"].as_str()),
        (400, Some("contact_id")),
        "a deleted contact cannot be linked"
    );
    assert_eq!(c.delete(&format!("/deals/{id}")).await.status, 200);
    assert_eq!(c.get(&format!("/deals/{id}")).await.status, 404);
}

/// A request with an `Idempotency-Key` whose handler commits several transactions at once
/// (deleting a contact unlinks its deals concurrently): each is witnessed on the key's record,
/// one at a time, so none cancels another; the replay answers the same.
#[tokio::test]
async fn deleting_a_contact_with_many_deals_under_an_idempotency_key_unlinks_them_all() {
    let (c, _) = bulk_client("crm witness").await;
    let cid = contact(&c, json!({"email": "many-deals@example.com"})).await["id"].as_str().unwrap().to_string();
    let mut deals = vec![];
    for i in 0..6 {
        let r = c.post("/deals", &json!({"title": format!("Deal {i}"), "currency": "EUR", "contact_id": cid})).await;
        assert_eq!(r.status, 201, "{}", r.json);
        deals.push(r.json["data"]["id"].as_str().unwrap().to_string());
    }
    let keyed = c.clone().with_header("idempotency-key", &format!("delete-{cid}"));
    let r = keyed.delete(&format!("/contacts/{cid}")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    for d in &deals {
        assert!(c.get(&format!("/deals/{d}")).await.json["data"]["contact_id"].is_null(), "{d} still linked");
    }
    let again = keyed.delete(&format!("/contacts/{cid}")).await;
    assert_eq!((again.status, again.header("idempotent-replayed")), (200, Some("true")), "{}", again.json);
}

#[tokio::test]
async fn contacts_deals_and_imports_of_another_workspace_are_404() {
    let (a, _) = bulk_client("crm A").await;
    let (b, _) = bulk_client("crm B").await;
    let ct = contact(&a, json!({"email": "secret@example.com"})).await;
    let cid = ct["id"].as_str().unwrap();
    let deal = a.post("/deals", &json!({"title": "A's", "currency": "EUR", "contact_id": cid})).await.json["data"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let imp =
        a.post("/contacts/imports", &json!({"rows": [{"email": "x@example.com"}]})).await.json["data"]["id"].as_str().unwrap().to_string();
    for path in [
        format!("/contacts/{cid}"),
        format!("/contacts/{cid}/activities"),
        format!("/deals/{deal}"),
        format!("/contacts/imports/{imp}"),
        format!("/contacts/imports/{imp}/errors"),
    ] {
        assert_eq!(b.get(&path).await.status, 404, "{path}");
    }
    assert_eq!(b.patch(&format!("/contacts/{cid}"), &json!({"first_name": "x"})).await.status, 404);
    assert_eq!(b.delete(&format!("/deals/{deal}")).await.status, 404);
    assert_eq!(b.post(&format!("/contacts/{cid}/notes"), &json!({"body": "x"})).await.status, 404);
    let r = b.post("/deals", &json!({"title": "steal", "currency": "EUR", "contact_id": cid})).await;
    assert_eq!(r.status, 400, "A's contact does not exist for B");
    // B may use the same address: uniqueness is per workspace.
    assert_eq!(b.post("/contacts", &json!({"email": "secret@example.com"})).await.status, 201);
    assert!(b.get("/contacts?q=secret").await.json["data"].as_array().unwrap().iter().all(|x| x["id"] != cid));
}

/// JSON allows numbers DynamoDB cannot store (`1e200`). A contact with one is a 400 naming
/// the field, an import row with one is a row error, and the job still completes; the row's
/// address is not left claimed, so a later import or create of it works.
#[tokio::test]
async fn numbers_dynamodb_cannot_store_are_validation_errors() {
    let (c, _) = bulk_client("unstorable numbers").await;
    let r = c.post("/contacts", &json!({"email": "big@numbers.test", "custom_fields": {"x": 1e200}})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("custom_fields.x")), "{}", r.json);
    let r = c.post("/contacts", &json!({"email": "tiny@numbers.test", "custom_fields": {"x": 1e-200}})).await;
    assert_eq!(r.status, 400, "{}", r.json);
    contact(&c, json!({"email": "fine@numbers.test", "custom_fields": {"x": 1.5e100, "y": -7}})).await;

    let rows = json!([
        {"email": "row1@numbers.test", "custom_fields": {"x": 1e200}},
        {"email": "row2@numbers.test", "custom_fields": {"x": 2}},
    ]);
    let r = c.post("/contacts/imports", &json!({"rows": rows})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let job = wait_import(&c, r.json["data"]["id"].as_str().unwrap(), 60).await;
    assert_eq!((job["status"].as_str(), job["created"].as_u64(), job["failed"].as_u64()), (Some("completed"), Some(1), Some(1)), "{job}");
    contact(&c, json!({"email": "row1@numbers.test"})).await;
}

/// A row's error names its field in the API's own words, whatever kind of fault it is, and a
/// row that is not an object is refused at the door.
#[tokio::test]
async fn an_import_row_error_names_its_field_in_the_apis_words() {
    let (c, _) = bulk_client("import wording").await;
    let csv = "first_name,email\nAnn,\nBo,bo@example.org\nCy,not-an-address\n";
    let r = c.post("/contacts/imports", &json!({"csv": csv})).await;
    assert_eq!(r.status, 202, "{}", r.json);
    let id = r.json["data"]["id"].as_str().unwrap().to_string();
    wait_import(&c, &id, 60).await;
    let errors = all_pages(&c, &format!("/contacts/imports/{id}/errors")).await;
    assert_eq!(errors.len(), 2, "{errors:?}");
    for e in &errors {
        assert_eq!(e["field"], "email", "{e}");
        let m = e["message"].as_str().unwrap();
        assert!(!m.contains('`') && !m.contains("missing field"), "serde's wording: {m}");
    }
    let r = c.post("/contacts/imports", &json!({"rows": [[null, null]]})).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("rows[0]")), "{}", r.json);
}
