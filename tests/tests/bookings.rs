//! Bookings over HTTP: availability across daylight-saving changes, races that must never
//! give two overlapping bookings, holds, reschedules, the lifecycle, isolation.

use e2e::{Client, harness};
use futures_util::future::join_all;
use serde_json::{Value, json};

async fn client(name: &str) -> Client {
    let h = harness();
    let (_, key) = h.workspace(name).await;
    Client::new(&h.base_bulk, &key)
}

async fn created(c: &Client, path: &str, body: Value) -> Value {
    let r = c.post(path, &body).await;
    assert_eq!(r.status, 201, "POST {path}: {}", r.json);
    r.json["data"].clone()
}

fn all_day() -> Value {
    let day = json!([{"start": "00:00", "end": "24:00"}]);
    json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day})
}

/// A resource open all day (UTC) and a service on it.
async fn setup(c: &Client, capacity: u32, service: Value) -> (String, String) {
    let r =
        created(c, "/bookings/resources", json!({"name": "Chair", "timezone": "UTC", "opening_hours": all_day(), "capacity": capacity}))
            .await;
    let rid = r["id"].as_str().unwrap().to_string();
    let mut body = json!({"name": "Cut", "duration_minutes": 30, "resource_ids": [rid]});
    body.as_object_mut().unwrap().extend(service.as_object().unwrap().clone());
    let s = created(c, "/bookings/services", body).await;
    (rid, s["id"].as_str().unwrap().to_string())
}

/// `HH:MM` UTC two days from now.
fn at(hm: &str) -> String {
    format!("{}T{hm}:00Z", (chrono::Utc::now() + chrono::Duration::days(2)).format("%Y-%m-%d"))
}

fn booking(svc: &str, start: &str, email: &str) -> Value {
    json!({"service_id": svc, "start": start, "contact": {"email": email, "name": "Ada Lovelace"}})
}

#[tokio::test]
async fn fifty_racing_bookings_of_one_slot_give_one_booking() {
    let c = client("bookings race").await;
    let (_, svc) = setup(&c, 1, json!({})).await;
    let body = booking(&svc, &at("10:00"), "racer@example.org");
    let results = join_all((0..50).map(|_| c.post("/bookings", &body))).await;
    let won = results.iter().filter(|r| r.status == 201).count();
    assert_eq!(won, 1, "{:?}", results.iter().map(|r| (r.status, r.json.to_string())).collect::<Vec<_>>());
    for r in results.iter().filter(|r| r.status != 201) {
        assert_eq!((r.status, r.code()), (409, "CONFLICT"), "{}", r.json);
        assert!(r.json["error"]["message"].as_str().unwrap().contains(&at("10:00")), "names the slot: {}", r.json);
    }
}

#[tokio::test]
async fn racing_overlapping_starts_never_leave_two_overlapping_bookings() {
    let c = client("bookings overlap").await;
    let (_, svc) = setup(&c, 1, json!({"duration_minutes": 45, "buffer_after_minutes": 10, "slot_interval_minutes": 5})).await;
    let starts: Vec<String> = (0..50).map(|i| at(&format!("{:02}:{:02}", 9 + (i * 5) / 60 % 3, (i * 5) % 60))).collect();
    let bodies: Vec<Value> = starts.iter().enumerate().map(|(i, s)| booking(&svc, s, &format!("o{i}@example.org"))).collect();
    let results = join_all(bodies.iter().map(|b| c.post("/bookings", b))).await;
    for r in &results {
        assert!(r.status == 201 || r.status == 409, "{} {}", r.status, r.json);
    }
    let mut spans = vec![];
    for r in results.iter().filter(|r| r.status == 201) {
        let s = chrono::DateTime::parse_from_rfc3339(r.json["data"]["start"].as_str().unwrap()).unwrap();
        spans.push((s, s + chrono::Duration::minutes(45 + 10)));
    }
    // Liveness under load: conflicting transactions retry a few times, then answer 409, so how
    // many of the racing requests win varies with the machine's load; safety is the point.
    assert!(spans.len() >= 2, "some succeed: {}", spans.len());
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            assert!(a.1 <= b.0 || b.1 <= a.0, "{a:?} overlaps {b:?}");
        }
    }
}

#[tokio::test]
async fn a_resource_of_capacity_three_takes_exactly_three() {
    let c = client("bookings capacity").await;
    let (_, svc) = setup(&c, 3, json!({})).await;
    let bodies: Vec<Value> = (0..20).map(|i| booking(&svc, &at("14:00"), &format!("cap{i}@example.org"))).collect();
    let results = join_all(bodies.iter().map(|b| c.post("/bookings", b))).await;
    assert_eq!(results.iter().filter(|r| r.status == 201).count(), 3);
    assert_eq!(results.iter().filter(|r| r.status == 409).count(), 17);
    let r = c.get(&format!("/bookings/availability?service_id={svc}&from={}&to={}", at("13:00"), at("15:00"))).await;
    assert_eq!(r.status, 200, "{}", r.json);
    // Rate bucket, service, its resources (one BatchGetItem), one cell Query per resource.
    assert_eq!(r.ddb_calls(), 4, "availability's DynamoDB calls");
    let day = r.json["data"].as_object().unwrap().values().next().unwrap().as_array().unwrap().clone();
    let starts: Vec<&str> = day.iter().map(|s| s["start"].as_str().unwrap()).collect();
    assert!(!starts.iter().any(|s| s.contains("T14:00")), "14:00 is full: {starts:?}");
    assert!(starts.iter().any(|s| s.contains("T14:30")), "{starts:?}");
}

#[tokio::test]
async fn holds_keep_a_slot_then_convert_or_expire() {
    let c = client("bookings holds").await;
    let (_, svc) = setup(&c, 1, json!({})).await;
    let hold = created(&c, "/bookings/holds", json!({"service_id": svc, "start": at("09:00"), "hold_seconds": 5})).await;
    assert_eq!(c.post("/bookings", &booking(&svc, &at("09:00"), "other@example.org")).await.status, 409, "held");
    let mut with_hold = booking(&svc, &at("09:00"), "holder@example.org");
    with_hold["hold_id"] = hold["id"].clone();
    let b = created(&c, "/bookings", with_hold).await;
    assert_eq!(b["status"], "confirmed");

    // A hold that expires frees its slot by time alone.
    created(&c, "/bookings/holds", json!({"service_id": svc, "start": at("11:00"), "hold_seconds": 5})).await;
    assert_eq!(c.post("/bookings", &booking(&svc, &at("11:00"), "late@example.org")).await.status, 409);
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    created(&c, "/bookings", booking(&svc, &at("11:00"), "late@example.org")).await;
}

#[tokio::test]
async fn reschedule_onto_a_taken_slot_changes_nothing_and_cancel_frees() {
    let c = client("bookings reschedule").await;
    let (_, svc) = setup(&c, 1, json!({"slot_interval_minutes": 15})).await;
    let a = created(&c, "/bookings", booking(&svc, &at("10:00"), "a@example.org")).await;
    let b = created(&c, "/bookings", booking(&svc, &at("11:00"), "b@example.org")).await;
    let (aid, bid) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    let r = c.post(&format!("/bookings/{aid}/reschedule"), &json!({"start": at("11:00")})).await;
    assert_eq!((r.status, r.code()), (409, "CONFLICT"), "{}", r.json);
    assert_eq!(c.get(&format!("/bookings/{aid}")).await.json["data"], a, "nothing changed");
    // Onto an overlapping time of its own: the shared cells change holder.
    let r = c.post(&format!("/bookings/{aid}/reschedule"), &json!({"start": at("10:15")})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let moved = r.json["data"].clone();
    assert_eq!((moved["rescheduled_from"].as_str(), moved["start"].as_str()), (Some(aid), Some(at("10:15").as_str())));
    let old = c.get(&format!("/bookings/{aid}")).await.json["data"].clone();
    assert_eq!((old["status"].as_str(), old["rescheduled_to"].as_str()), (Some("cancelled"), moved["id"].as_str()));
    assert_eq!(c.post("/bookings", &booking(&svc, &at("10:30"), "c@example.org")).await.status, 409, "10:15-10:45 is held");
    created(&c, "/bookings", booking(&svc, &at("09:30"), "d@example.org")).await;

    let r = c.post(&format!("/bookings/{bid}/cancel"), &json!({"reason": "ill", "cancelled_by": "staff"})).await;
    assert_eq!((r.status, r.json["data"]["status"].as_str()), (200, Some("cancelled")), "{}", r.json);
    created(&c, "/bookings", booking(&svc, &at("11:00"), "e@example.org")).await;
    assert_eq!(c.post(&format!("/bookings/{bid}/cancel"), &json!({})).await.status, 409, "cancelled once");
}

#[tokio::test]
async fn the_lifecycle_its_rules_and_the_contact_timeline() {
    let c = client("bookings lifecycle").await;
    let (_, svc) = setup(&c, 1, json!({"requires_confirmation": true, "cancellation_window_minutes": 4320})).await;
    let b = created(&c, "/bookings", booking(&svc, &at("08:00"), "life@example.org")).await;
    let id = b["id"].as_str().unwrap();
    assert_eq!(b["status"], "pending");
    assert_eq!(c.post(&format!("/bookings/{id}/complete"), &json!({})).await.status, 409, "pending cannot complete");
    let r = c.post(&format!("/bookings/{id}/confirm"), &json!({})).await;
    assert_eq!(r.json["data"]["status"], "confirmed");
    let r = c.post(&format!("/bookings/{id}/cancel"), &json!({"cancelled_by": "customer"})).await;
    assert_eq!(r.status, 409, "inside the 72 h window: {}", r.json);
    let r = c.post(&format!("/bookings/{id}/complete"), &json!({})).await;
    assert_eq!(r.json["data"]["status"], "completed");
    assert_eq!(c.post(&format!("/bookings/{id}/no-show"), &json!({})).await.status, 409);

    // The same email links the same contact; its timeline shows the booking.
    let again = created(&c, "/bookings", booking(&svc, &at("09:00"), "LIFE@example.org")).await;
    assert_eq!(again["contact_id"], b["contact_id"]);
    let acts = c.get(&format!("/contacts/{}/activities", b["contact_id"].as_str().unwrap())).await;
    let kinds: Vec<&str> = acts.json["data"].as_array().unwrap().iter().map(|a| a["type"].as_str().unwrap()).collect();
    for k in ["booking.created", "booking.confirmed", "booking.completed"] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
    let list = c.get(&format!("/bookings?status=completed&contact_id={}", b["contact_id"].as_str().unwrap())).await;
    assert_eq!(list.json["data"].as_array().unwrap().len(), 1, "{}", list.json);
    let list = c.get(&format!("/bookings?from={}&to={}", at("08:30"), at("23:00"))).await;
    assert_eq!(list.json["data"].as_array().unwrap().len(), 1, "{}", list.json);

    // By start time, soonest first, whatever order they were made in; `from`/`to` bound it.
    created(&c, "/bookings", booking(&svc, &at("07:00"), "early@example.org")).await;
    created(&c, "/bookings", booking(&svc, &at("20:00"), "late@example.org")).await;
    let starts = |v: &Value| v["data"].as_array().unwrap().iter().map(|b| b["start"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let r = c.get("/bookings?order=soonest").await;
    assert_eq!(starts(&r.json), [at("07:00"), at("08:00"), at("09:00"), at("20:00")], "{}", r.json);
    let r = c.get(&format!("/bookings?order=soonest&from={}&to={}", at("08:00"), at("20:00"))).await;
    assert_eq!(starts(&r.json), [at("08:00"), at("09:00")], "{}", r.json);
    let r = c.get("/bookings?order=soonest&limit=2").await;
    assert_eq!(starts(&r.json), [at("07:00"), at("08:00")]);
    let r = c.get(&format!("/bookings?order=soonest&limit=2&cursor={}", r.json["next_cursor"].as_str().unwrap())).await;
    assert_eq!(starts(&r.json), [at("09:00"), at("20:00")], "{}", r.json);
}

#[tokio::test]
async fn every_field_is_validated() {
    let c = client("bookings validation").await;
    let r = c
        .post(
            "/bookings/resources",
            &json!({"name": "", "timezone": "Mars/Base", "capacity": 0, "opening_hours": {"mon": [{"start": "09:00", "end": "08:00"}]}}),
        )
        .await;
    let fields: Vec<&str> = r.json["error"]["details"].as_array().unwrap().iter().filter_map(|d| d["field"].as_str()).collect();
    assert_eq!(fields, ["name", "timezone", "opening_hours.mon[0]", "capacity"], "{}", r.json);
    let r =
        c.post("/bookings/services", &json!({"name": "x", "duration_minutes": 170, "buffer_after_minutes": 20, "resource_ids": []})).await;
    assert_eq!(r.status, 400, "{}", r.json);

    // Closed on Sundays, 09-17 otherwise; 2 hours notice; 10 days ahead.
    let day = json!([{"start": "09:00", "end": "17:00"}]);
    let hours = json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day});
    let res = created(&c, "/bookings/resources", json!({"name": "Room", "timezone": "UTC", "opening_hours": hours})).await;
    let svc = created(
        &c,
        "/bookings/services",
        json!({"name": "Meet", "duration_minutes": 60, "resource_ids": [res["id"]], "min_notice_minutes": 120, "max_advance_days": 10}),
    )
    .await;
    let s = svc["id"].as_str().unwrap();
    let mut sunday = chrono::Utc::now().date_naive() + chrono::Duration::days(1);
    while sunday.format("%a").to_string() != "Sun" {
        sunday += chrono::Duration::days(1);
    }
    let monday = sunday + chrono::Duration::days(1);
    for (start, why) in [
        (format!("{sunday}T10:00:00Z"), "closed day"),
        (format!("{monday}T16:30:00Z"), "ends after closing"),
        (format!("{monday}T10:30:00Z"), "off the interval"),
        (shared::ids::format_time(chrono::Utc::now() + chrono::Duration::minutes(30)), "notice"),
        (format!("{}T10:00:00Z", monday + chrono::Duration::days(14)), "advance"),
        ("tomorrow".to_string(), "not a time"),
    ] {
        let r = c.post("/bookings", &booking(s, &start, "v@example.org")).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("start")), "{why}: {}", r.json);
    }
    let r = c
        .get(&format!("/bookings/availability?service_id={s}&from={monday}T00:00:00Z&to={}T00:00:00Z", monday + chrono::Duration::days(40)))
        .await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("to")), "31 days at most");
}

#[tokio::test]
async fn availability_keeps_local_hours_across_daylight_saving_changes() {
    let c = client("bookings dst").await;
    let day = |s: &str, e: &str| json!([{"start": s, "end": e}]);
    let week = |s: &str, e: &str| json!({"mon": day(s, e), "tue": day(s, e), "wed": day(s, e), "thu": day(s, e), "fri": day(s, e), "sat": day(s, e), "sun": day(s, e)});
    let oslo =
        created(&c, "/bookings/resources", json!({"name": "Oslo", "timezone": "Europe/Oslo", "opening_hours": week("09:00", "10:00")}))
            .await;
    let svc = created(
        &c,
        "/bookings/services",
        json!({"name": "Hour", "duration_minutes": 60, "resource_ids": [oslo["id"]], "max_advance_days": 730}),
    )
    .await;
    // Europe/Oslo springs forward on 2027-03-28.
    let r = c
        .get(&format!(
            "/bookings/availability?service_id={}&from=2027-03-27T00:00:00Z&to=2027-03-30T00:00:00Z&timezone=Europe/Oslo",
            svc["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    let starts: Vec<String> = r.json["data"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|d| d.as_array().unwrap().iter().map(|s| s["start"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(starts, ["2027-03-27T09:00:00+01:00", "2027-03-28T09:00:00+02:00", "2027-03-29T09:00:00+02:00"]);
    // Days as people write them: a date is the whole day, in the asked zone or the resource's.
    let starts_of = |r: &e2e::Resp| -> Vec<String> {
        r.json["data"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|d| d.as_array().unwrap().iter().map(|s| s["start"].as_str().unwrap().to_string()))
            .collect()
    };
    let sid = svc["id"].as_str().unwrap();
    for zone in ["&timezone=Europe/Oslo", ""] {
        let r = c.get(&format!("/bookings/availability?service_id={sid}&from=2027-03-29&to=2027-03-29{zone}")).await;
        assert_eq!(r.status, 200, "{}", r.json);
        let expected = if zone.is_empty() { "2027-03-29T07:00:00+00:00" } else { "2027-03-29T09:00:00+02:00" };
        assert_eq!(starts_of(&r), [expected], "{zone}: {}", r.json);
    }
    let r = c.get(&format!("/bookings/availability?service_id={sid}&from=2027-03-28&to=2027-03-29&timezone=Europe/Oslo")).await;
    assert_eq!(starts_of(&r).len(), 2, "two whole days: {}", r.json);
    let r = c.get(&format!("/bookings/availability?service_id={sid}&from=2027-03-32&to=2027-03-29")).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("from")), "{}", r.json);

    // America/New_York: 02:00-03:00 is missing on 2027-03-14 and repeated on 2027-11-07.
    let ny =
        created(&c, "/bookings/resources", json!({"name": "NY", "timezone": "America/New_York", "opening_hours": week("01:00", "04:00")}))
            .await;
    let svc = created(
        &c,
        "/bookings/services",
        json!({"name": "Half", "duration_minutes": 30, "resource_ids": [ny["id"]], "max_advance_days": 730}),
    )
    .await;
    let local = |from: &str, to: &str| {
        let (c, id) = (&c, svc["id"].as_str().unwrap().to_string());
        let url = format!("/bookings/availability?service_id={id}&from={from}&to={to}&timezone=America/New_York");
        async move {
            let r = c.get(&url).await;
            assert_eq!(r.status, 200, "{}", r.json);
            r.json["data"]
                .as_object()
                .unwrap()
                .values()
                .flat_map(|d| d.as_array().unwrap().iter().map(|s| s["start"].as_str().unwrap()[11..].to_string()))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        local("2027-03-14T05:00:00Z", "2027-03-14T12:00:00Z").await,
        ["01:00:00-05:00", "01:30:00-05:00", "03:00:00-04:00", "03:30:00-04:00"]
    );
    assert_eq!(
        local("2027-11-07T04:00:00Z", "2027-11-07T12:00:00Z").await,
        [
            "01:00:00-04:00",
            "01:30:00-04:00",
            "01:00:00-05:00",
            "01:30:00-05:00",
            "02:00:00-05:00",
            "02:30:00-05:00",
            "03:00:00-05:00",
            "03:30:00-05:00"
        ]
    );
}

#[tokio::test]
async fn another_workspace_sees_and_books_nothing() {
    let a = client("bookings a").await;
    let b = client("bookings b").await;
    let (rid, svc) = setup(&a, 1, json!({})).await;
    let bk = created(&a, "/bookings", booking(&svc, &at("12:00"), "iso@example.org")).await;
    for path in
        [format!("/bookings/resources/{rid}"), format!("/bookings/services/{svc}"), format!("/bookings/{}", bk["id"].as_str().unwrap())]
    {
        assert_eq!(b.get(&path).await.status, 404, "{path}");
    }
    let r = b.post("/bookings", &booking(&svc, &at("13:00"), "x@example.org")).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("service_id")), "{}", r.json);
    assert_eq!(b.get("/bookings").await.json["data"].as_array().unwrap().len(), 0);
    let r = b.get(&format!("/bookings/availability?service_id={svc}&from={}&to={}", at("10:00"), at("11:00"))).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn a_confirmed_booking_emails_its_contact_and_cancelling_cancels_the_reminder() {
    let h = harness();
    let (ws, key) = h.workspace("bookings emails").await;
    let c = Client::new(&h.base_bulk, &key);
    let domain = e2e::verified_domain(&c, &ws).await;
    let from = format!("Salon <hello@{domain}>");
    let (_, svc) = setup(&c, 1, json!({"notifications": {"from": from, "reminder_minutes_before": 60}})).await;
    let b = created(&c, "/bookings", booking(&svc, &at("15:00"), "notify@example.org")).await;
    let reminder = b["reminder_email_id"].as_str().expect("a reminder is scheduled").to_string();
    let emails = c.get("/emails?limit=100").await.json["data"].as_array().unwrap().clone();
    assert_eq!(emails.len(), 2, "{emails:?}");
    let r = emails.iter().find(|e| e["id"] == reminder.as_str()).expect("the reminder");
    assert_eq!((r["status"].as_str(), r["scheduled_at"].as_str()), (Some("scheduled"), Some(at("14:00").as_str())));
    assert_eq!(r["to"], json!(["notify@example.org"]));
    let confirmation = emails.iter().find(|e| e["id"] != reminder.as_str()).unwrap();
    assert!(confirmation["subject"].as_str().unwrap().starts_with("Booked: Cut on "), "{confirmation}");

    let id = b["id"].as_str().unwrap();
    assert_eq!(c.post(&format!("/bookings/{id}/cancel"), &json!({})).await.status, 200);
    assert_eq!(c.get(&format!("/emails/{reminder}")).await.json["data"]["status"], "cancelled");

    // The cancellation has its notice.
    let emails = c.get("/emails?limit=100").await.json["data"].as_array().unwrap().clone();
    assert_eq!(emails.len(), 3, "{emails:?}");
    assert!(emails.iter().any(|e| e["subject"].as_str().unwrap().starts_with("Cancelled: Cut on ")), "{emails:?}");

    // A service whose sender is not a verified domain of the workspace is refused when it sends:
    // the booking stands, and no email leaves.
    let (_, other) = setup(&c, 1, json!({"notifications": {"from": "x@unverified.example", "confirmation": true}})).await;
    created(&c, "/bookings", booking(&other, &at("16:00"), "notify2@example.org")).await;
    assert_eq!(c.get("/emails?limit=100").await.json["data"].as_array().unwrap().len(), 3);
}

/// A booking whose person was erased keeps its slot and its lifecycle, and its changes write
/// no timeline entry or contact link for nobody (an empty contact id in a key).
#[tokio::test]
async fn a_booking_whose_person_was_erased_changes_without_writing_for_nobody() {
    let c = client("bookings erased person").await;
    let (_, svc) = setup(&c, 1, json!({"slot_interval_minutes": 15})).await;
    let b = created(&c, "/bookings", booking(&svc, &at("13:00"), "gone@example.org")).await;
    let id = b["id"].as_str().unwrap();
    e2e::erase(&c, "gone@example.org").await;
    assert_eq!(c.get(&format!("/bookings/{id}")).await.json["data"]["contact_id"], "", "the person is gone from the booking");
    // The erased address books nothing and comes back as no contact (only with new consent).
    let r = c.post("/bookings", &booking(&svc, &at("16:00"), "gone@example.org")).await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (409, Some("contact.email")), "{}", r.json);
    assert!(contacts_named(&c, "gone@example.org").await.is_empty());
    created(&c, "/bookings", booking(&svc, &at("16:00"), "other@example.org")).await;

    let r = c.post(&format!("/bookings/{id}/reschedule"), &json!({"start": at("14:00")})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let moved = r.json["data"]["id"].as_str().unwrap().to_string();
    let r = c.post(&format!("/bookings/{moved}/cancel"), &json!({"reason": "closed"})).await;
    assert_eq!(r.status, 200, "{}", r.json);

    let app = harness().app().await;
    let erased = domain::ids::ContactId::erased();
    let nobody = [domain::keys::CONTACT_BOOKING.sk_prefix_of(&erased), domain::keys::ACTIVITY.sk_prefix_of(&erased)];
    let items = app.db.scan_all().await.unwrap();
    let orphans: Vec<&str> = items
        .iter()
        .filter_map(|i| shared::store::get_str(i, "sk"))
        .filter(|sk| nobody.iter().any(|p| sk.starts_with(p.as_str())))
        .collect();
    assert!(orphans.is_empty(), "items keyed by an empty contact id: {orphans:?}");
}

/// Contacts whose address begins with `email`.
async fn contacts_named(c: &Client, email: &str) -> Vec<Value> {
    let r = c.get(&format!("/contacts?q={email}")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    r.json["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_booking_and_its_new_contact_are_written_together_or_not_at_all() {
    let c = client("bookings new contact").await;
    let (_, svc) = setup(&c, 1, json!({})).await;
    // Round trips (docs/architecture.md): the rate bucket; the service and the address's claim
    // together; the resources and the first one's cells together; one transaction.
    let r = c.post("/bookings", &booking(&svc, &at("10:00"), "first@example.org")).await;
    assert_eq!((r.status, r.ddb_calls()), (201, 6), "{}", r.json);
    let first = r.json["data"].clone();
    let found = contacts_named(&c, "first@example.org").await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["id"], first["contact_id"], "the booking's new contact");
    assert_eq!((found[0]["first_name"].as_str(), found[0]["last_name"].as_str()), (Some("Ada"), Some("Lovelace")));
    let r = c.post("/bookings", &booking(&svc, &at("11:00"), "FIRST@example.org")).await;
    assert_eq!((r.status, r.ddb_calls()), (201, 6), "{}", r.json);
    assert_eq!(r.json["data"]["contact_id"], first["contact_id"], "the address's contact");
    let by_id = json!({"service_id": svc, "start": at("12:00"), "contact_id": first["contact_id"]});
    let r = c.post("/bookings", &by_id).await;
    assert_eq!((r.status, r.ddb_calls()), (201, 6), "{}", r.json);

    // A slot that is taken leaves no contact behind: when it is known taken before the
    // transaction, and when two new addresses race for it (the loser's transaction fails).
    let r = c.post("/bookings", &booking(&svc, &at("10:00"), "second@example.org")).await;
    assert_eq!((r.status, r.code()), (409, "CONFLICT"), "{}", r.json);
    assert!(contacts_named(&c, "second@example.org").await.is_empty(), "no contact without its booking");
    for slot in ["06:00", "06:30"] {
        let (x, y) = (
            booking(&svc, &at(slot), &format!("x{}@example.org", &slot[3..])),
            booking(&svc, &at(slot), &format!("y{}@example.org", &slot[3..])),
        );
        let (rx, ry) = tokio::join!(c.post("/bookings", &x), c.post("/bookings", &y));
        let mut statuses = [rx.status, ry.status];
        statuses.sort();
        assert_eq!(statuses, [201, 409], "{} {}", rx.json, ry.json);
        let loser = if rx.status == 409 { &x } else { &y };
        assert!(contacts_named(&c, loser["contact"]["email"].as_str().unwrap()).await.is_empty(), "the loser made no contact");
    }

    // Racing bookings of one new address at free slots: one contact, every booking its.
    let bodies: Vec<Value> = (0..8).map(|i| booking(&svc, &at(&format!("{:02}:00", 13 + i)), "racer@example.org")).collect();
    let results = join_all(bodies.iter().map(|b| c.post("/bookings", b))).await;
    let owners: std::collections::BTreeSet<String> = results
        .iter()
        .map(|r| {
            assert_eq!(r.status, 201, "{}", r.json);
            r.json["data"]["contact_id"].as_str().unwrap().to_string()
        })
        .collect();
    let found = contacts_named(&c, "racer@example.org").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(owners.into_iter().collect::<Vec<_>>(), [found[0]["id"].as_str().unwrap().to_string()]);

    // A day open until 24:00 has a slot that ends at midnight.
    let r = c.get(&format!("/bookings/availability?service_id={svc}&from={}&to={}", at("23:00"), at("23:59"))).await;
    assert!(r.json["data"].to_string().contains("T23:30"), "{}", r.json);
    created(&c, "/bookings", booking(&svc, &at("23:30"), "late-night@example.org")).await;

    // A contact id that does not exist, and a deleted contact, are refused.
    let gone = created(&c, "/contacts", json!({"email": "gone-soon@example.org"})).await;
    let gone = gone["id"].as_str().unwrap();
    assert_eq!(c.delete(&format!("/contacts/{gone}")).await.status, 200);
    let r = c
        .post("/bookings", &json!({"service_id": svc, "start": at("22:00"), "contact_id": first["contact_id"], "resource_id": "chair"}))
        .await;
    assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("resource_id")), "{}", r.json);
    for id in [gone, "ct_01JAAAAAAAAAAAAAAAAAAAAAAA"] {
        let r = c.post("/bookings", &json!({"service_id": svc, "start": at("22:00"), "contact_id": id})).await;
        assert_eq!((r.status, r.json["error"]["details"][0]["field"].as_str()), (400, Some("contact_id")), "{}", r.json);
    }
}

/// The raw message of a booking email once it left (moto's record).
async fn left(c: &Client, subject_start: &str) -> String {
    for _ in 0..150 {
        let emails = c.get("/emails?limit=100").await.json["data"].as_array().unwrap().clone();
        if let Some(e) =
            emails.iter().find(|e| e["subject"].as_str().unwrap_or_default().starts_with(subject_start) && e["status"] == "sent")
            && let Some(m) = harness().ses_sent().await.into_iter().find(|m| m["id"] == e["provider_message_id"])
        {
            return m["raw"].as_str().unwrap().to_string();
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("no sent email \"{subject_start}...\"")
}

#[tokio::test]
async fn booking_emails_carry_one_calendar_event_across_a_move_over_dst_and_its_cancellation() {
    let h = harness();
    let (ws, key) = h.workspace("bookings invites").await;
    let c = Client::new(&h.base_bulk, &key);
    let domain = e2e::verified_domain(&c, &ws).await;
    let day = json!([{"start": "09:00", "end": "12:00"}]);
    let week = json!({"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day});
    let oslo = created(&c, "/bookings/resources", json!({"name": "Studio", "timezone": "Europe/Oslo", "opening_hours": week})).await;
    let svc = created(
        &c,
        "/bookings/services",
        json!({"name": "Portrait", "duration_minutes": 60, "resource_ids": [oslo["id"]],
        "max_advance_days": 730, "notifications": {"from": format!("Studio Ørsta <hello@{domain}>")}}),
    )
    .await;
    let svc = svc["id"].as_str().unwrap();
    // Europe/Oslo springs forward on 2027-03-28: 10:00 local is 09:00Z before, 08:00Z after.
    let b = created(
        &c,
        "/bookings",
        json!({"service_id": svc, "start": "2027-03-27T09:00:00Z",
        "contact": {"email": "ines@example.org", "name": "Inés Ødegård"}}),
    )
    .await;
    let booked = left(&c, "Booked: Portrait").await;
    let r = c.post(&format!("/bookings/{}/reschedule", b["id"].as_str().unwrap()), &json!({"start": "2027-03-29T08:00:00Z"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let moved_id = r.json["data"]["id"].as_str().unwrap().to_string();
    let moved = left(&c, "Moved: Portrait").await;
    assert_eq!(c.post(&format!("/bookings/{moved_id}/cancel"), &json!({})).await.status, 200);
    let cancelled = left(&c, "Cancelled: Portrait").await;

    let invites = e2e::python("tests/read_invites.py", &json!([booked, moved, cancelled]));
    let i = invites.as_array().unwrap();
    assert_eq!(i.len(), 3);
    let uid = format!("{}@{ws}", b["id"].as_str().unwrap());
    for (n, (method, sequence, status, start)) in [
        ("REQUEST", 0, "CONFIRMED", "2027-03-27T09:00:00+00:00"),
        ("REQUEST", 1, "CONFIRMED", "2027-03-29T08:00:00+00:00"),
        ("CANCEL", 2, "CANCELLED", "2027-03-29T08:00:00+00:00"),
    ]
    .into_iter()
    .enumerate()
    {
        let v = &i[n];
        assert_eq!((v["method"].as_str(), v["part_method"].as_str()), (Some(method), Some(method)), "{v}");
        assert_eq!(
            (v["uid"].as_str(), v["sequence"].as_i64(), v["status"].as_str()),
            (Some(uid.as_str()), Some(sequence), Some(status)),
            "{v}"
        );
        assert_eq!((v["tzid"].as_str(), v["start"].as_str()), (Some("Europe/Oslo"), Some(start)), "{v}");
        assert_eq!(v["organizer"], format!("mailto:hello@{domain}"));
        assert_eq!(v["attendee"], "mailto:ines@example.org");
    }
    // The email's record shows the invite; the booking its place in the event.
    let moved_booking = c.get(&format!("/bookings/{moved_id}")).await.json["data"].clone();
    assert_eq!((moved_booking["invite_uid"].as_str(), moved_booking["invite_sequence"].as_i64()), (b["id"].as_str(), Some(2)));
}

/// The text of the booking email with `subject`, as SES received it (its manage link is sealed
/// in the stored copy: checked here too).
async fn delivered_booking_email(c: &Client, booking_id: &str, subject_start: &str) -> String {
    for _ in 0..150 {
        let emails = c.get("/emails?limit=100").await.json["data"].as_array().unwrap().clone();
        if let Some(e) = emails
            .iter()
            .find(|e| e["metadata"]["booking_id"] == booking_id && e["subject"].as_str().unwrap_or_default().starts_with(subject_start))
        {
            let id = e["id"].as_str().unwrap();
            let stored = c.get(&format!("/emails/{id}")).await.json["data"].clone();
            assert!(stored["text"].as_str().unwrap().contains("[[secret:manage_url]]"), "{stored}");
            return harness().delivered_text(c, id).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("no email \"{subject_start}...\" for {booking_id}")
}

fn manage_link(text: &str) -> String {
    let at = text.find("http").unwrap_or_else(|| panic!("no link in {text}"));
    text[at..].split_whitespace().next().unwrap().to_string()
}

/// A browser that does not follow redirects, so each answer is seen.
fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// A GET as a browser makes it: (status, body, `Location`, whether a cookie was set).
async fn page(link: &str) -> (u16, String, Option<String>, bool) {
    let r = browser().get(link).send().await.unwrap();
    let location = r.headers().get("location").map(|l| l.to_str().unwrap().to_string());
    let cookie = r.headers().contains_key("set-cookie");
    (r.status().as_u16(), r.text().await.unwrap(), location, cookie)
}

async fn post_form(link: &str, form: &str, site: &str) -> (u16, Option<String>) {
    let r = browser()
        .post(link)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("sec-fetch-site", site)
        .body(form.to_string())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.headers().get("location").map(|l| l.to_str().unwrap().to_string()))
}

#[tokio::test]
async fn a_manage_link_opens_its_booking_only_and_reaches_the_customer_and_the_endpoints_alone() {
    let h = harness();
    let (ws, key) = h.workspace("bookings manage links").await;
    let c = Client::new(&h.base_bulk, &key);
    let domain = e2e::verified_domain(&c, &ws).await;
    let rx = e2e::receiver::Receiver::start().await;
    let r = c.post("/webhooks", &json!({"url": rx.url, "event_types": ["booking.*"]})).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let secret = r.json["data"]["secret"].as_str().unwrap().to_string();
    let (_, svc) = setup(&c, 2, json!({"name": "Trim", "notifications": {"from": format!("Salon <hello@{domain}>")}})).await;
    let a = created(&c, "/bookings", booking(&svc, &at("09:00"), "mia@example.org")).await;
    let b = created(&c, "/bookings", json!({"service_id": svc, "start": at("10:00"), "contact_id": a["contact_id"]})).await;
    let other = created(&c, "/bookings", booking(&svc, &at("09:00"), "noor@example.org")).await;
    let (a_id, b_id) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    assert!(a.get("manage_url").is_none(), "never in an answer: {a}");

    // The confirmation carries the link; the stored copy a placeholder (checked by the helper).
    let link = manage_link(&delivered_booking_email(&c, a_id, "Booked").await);
    assert!(link.contains("/p/") && link.contains("/booking?token=") && !link.contains("mia"), "{link}");
    let b_link = manage_link(&delivered_booking_email(&c, b_id, "Booked").await);
    let other_link = manage_link(&delivered_booking_email(&c, other["id"].as_str().unwrap(), "Booked").await);

    // The page: this booking, no sign-in, no cookie, actions within the window.
    let (status, body, _, cookie) = page(&link).await;
    assert_eq!((status, cookie), (200, false), "{body}");
    assert!(body.contains("Trim") && body.contains("/booking/cancel?token=") && body.contains("/booking/move?token="), "{body}");
    assert!(!body.contains("/bookings\""), "no way to the customer's other pages: {body}");

    // Altered, turned to the customer's other booking, or another workspace's slug: 404, before
    // any read. A cross-site form is refused.
    let (base, tag) = link.rsplit_once('.').unwrap();
    let flipped = format!("{base}.{}{}", if tag.starts_with('A') { "B" } else { "A" }, &tag[1..]);
    let (_, other_key) = h.workspace("bookings manage links, another").await;
    let other_slug = Client::new(&h.base, &other_key).get("/workspaces/current").await.json["data"]["slug"].as_str().unwrap().to_string();
    let slug = link.split("/p/").nth(1).unwrap().split('/').next().unwrap().to_string();
    let elsewhere = link.replace(&format!("/p/{slug}/"), &format!("/p/{other_slug}/"));
    for bad in [flipped, link.replace(a_id, b_id), format!("{base}."), link.replace("token=", "token=x"), elsewhere] {
        assert_eq!(page(&bad).await.0, 404, "{bad}");
        assert_eq!(post_form(&bad.replace("/booking?", "/booking/cancel?"), "", "same-origin").await.0, 404, "{bad}");
    }
    let cancel = link.replace("/booking?", "/booking/cancel?");
    assert_eq!(post_form(&cancel, "", "cross-site").await.0, 403);
    assert_eq!(c.get(&format!("/bookings/{a_id}")).await.json["data"]["status"], "confirmed");

    // Move by the link: the slots page, then a new time; the old link follows the move.
    let (status, body, _, _) = page(&link.replace("/booking?", "/booking/move?")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("name=\"start\""), "{body}");
    let (status, to) = post_form(&link.replace("/booking?", "/booking/move?"), &format!("start={}", at("12:00")), "same-origin").await;
    assert_eq!(status, 303);
    let to = to.unwrap();
    assert!(to.contains("/booking?token=") && to.ends_with("&m=moved") && !to.contains(a_id), "{to}");
    let moved = c.get(&format!("/bookings/{a_id}")).await.json["data"].clone();
    let new_id = moved["rescheduled_to"].as_str().unwrap().to_string();
    let moved_link = manage_link(&delivered_booking_email(&c, &new_id, "Moved").await);
    let token = |l: &str| l.split("token=").nth(1).unwrap().split('&').next().unwrap().to_string();
    assert_eq!(token(&to), token(&moved_link), "the page and the moved email give the same link");
    let (status, _, location, _) = page(&link).await;
    assert_eq!(status, 303);
    assert_eq!(token(&location.unwrap()), token(&moved_link), "the old link follows the move");
    assert_eq!(page(&moved_link).await.0, 200);

    // Cancel by the moved booking's link: that booking only; the customer's other one stands.
    let (status, _) = post_form(&moved_link.replace("/booking?", "/booking/cancel?"), "", "same-origin").await;
    assert_eq!(status, 303);
    assert_eq!(c.get(&format!("/bookings/{new_id}")).await.json["data"]["status"], "cancelled");
    assert_eq!(c.get(&format!("/bookings/{b_id}")).await.json["data"]["status"], "confirmed");
    let (_, body, _, _) = page(&moved_link).await;
    assert!(body.contains("Cancelled") && !body.contains("/booking/cancel?token="), "{body}");
    assert_eq!(page(&b_link).await.0, 200);

    // The endpoint got each booking event with the link of its booking, signed as sent.
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..100 {
        for d in rx.take() {
            assert!(d.verifies(&secret), "signed as sent");
            let v = d.json();
            let booking = if v["type"] == "booking.rescheduled" { v["data"]["to"].clone() } else { v["data"].clone() };
            seen.insert(
                (v["type"].as_str().unwrap().to_string(), booking["id"].as_str().unwrap().to_string()),
                booking["manage_url"].clone(),
            );
        }
        if seen.contains_key(&("booking.cancelled".into(), new_id.clone())) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(seen.get(&("booking.created".into(), a_id.to_string())), Some(&json!(link)), "{seen:?}");
    assert_eq!(seen.get(&("booking.rescheduled".into(), new_id.clone())), Some(&json!(moved_link)), "{seen:?}");
    assert!(seen.get(&("booking.cancelled".into(), new_id.clone())).is_some_and(|u| u.is_string()), "{seen:?}");

    // Nothing stored holds a link: not the events, the deliveries nor the emails.
    let app = h.app().await;
    let held: Vec<String> = app.db.scan_all().await.unwrap().iter().map(e2e::item_text).filter(|t| t.contains("/booking?token=")).collect();
    assert!(held.is_empty(), "{held:?}");

    // A customer's mail that carries the link (a forward, a paste) reaches the helpdesk without
    // its token.
    let to = format!("hello@{domain}");
    let raw = format!(
        "From: mia@example.org\r\nTo: {to}\r\nSubject: Re: Booked\r\nMessage-ID: <{}@mail.example.org>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThanks! Forwarding it as it was: To cancel or move it: {b_link}\r\n",
        ulid::Ulid::generate()
    );
    let body = tools::admin::store_inbound(app.s3(), &h.resources.mail_bucket, raw.as_bytes(), &[to], "PASS", "PASS").await.unwrap();
    domain::helpdesk::mail::handle(&app, &domain::helpdesk::mail::receipt(&body).unwrap()).await.unwrap();
    let convs = c.get("/helpdesk/conversations").await.json["data"].as_array().unwrap().clone();
    let msgs = c.get(&format!("/helpdesk/conversations/{}/messages", convs[0]["id"].as_str().unwrap())).await.json.to_string();
    assert!(msgs.contains("booking?token=[redacted]") && !msgs.contains(&token(&b_link)), "{msgs}");

    // Once its customer is erased, a link opens nothing.
    assert_eq!(page(&other_link).await.0, 200);
    e2e::erase(&c, "noor@example.org").await;
    assert_eq!(page(&other_link).await.0, 404);
}
