//! template.yaml sends each area's paths to the function that serves them (one `ANY` route for
//! each root noun and one for everything under it: the function answers 404/405 itself), and
//! deploys every binary of the workspace, each built by `make package`.

use std::collections::{BTreeMap, BTreeSet};

/// (binary, method, path) of every HttpApi event, by the function resource it belongs to.
fn template_events(t: &str) -> BTreeMap<String, BTreeSet<(String, String)>> {
    let mut out: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    let mut binary = String::new();
    let lines: Vec<&str> = t.lines().map(str::trim).collect();
    for (i, l) in lines.iter().enumerate() {
        if let Some(b) = tools::iam::function_binary(l) {
            binary = b.to_string();
        }
        if let Some(m) = l.strip_prefix("Method: ")
            && let Some(p) = lines.get(i + 1).and_then(|n| n.strip_prefix("Path: "))
        {
            out.entry(binary.clone()).or_default().insert((m.to_string(), p.to_string()));
        }
    }
    out
}

#[test]
fn every_area_function_gets_exactly_its_root_nouns() {
    let t = std::fs::read_to_string(tools::localstack::repo_root().join("template.yaml")).unwrap();
    let mut events = template_events(&t);
    // The workspaces function also answers every unknown path with the 404 envelope.
    assert!(events.get_mut("workspaces").is_some_and(|e| e.remove(&("ANY".into(), "$default".into()))), "a $default route");
    // The portal function also serves the portal's web pages (the dev gateway sends `/p/` there).
    assert!(events.get_mut("portal").is_some_and(|e| e.remove(&("ANY".into(), "/p/{proxy+}".into()))), "the portal's pages");
    // The capabilities function serves the approval pages (and the sign-in's one callback).
    assert!(events.get_mut("capabilities").is_some_and(|e| e.remove(&("ANY".into(), "/approvals/{proxy+}".into()))), "the approval pages");
    // The MCP server: `/mcp` and its protected-resource metadata (RFC 9728), both forms.
    let mcp = events.remove("mcp").unwrap_or_default();
    let expected_mcp: BTreeSet<(String, String)> =
        [("ANY", "/mcp"), ("GET", "/.well-known/oauth-protected-resource"), ("GET", "/.well-known/oauth-protected-resource/{proxy+}")]
            .into_iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
    assert_eq!(mcp, expected_mcp, "the MCP function's routes");
    for (binary, routes) in tools::gateway::areas() {
        let roots: BTreeSet<&str> = routes.iter().filter_map(|r| r.path.split('/').nth(1)).collect();
        let expected: BTreeSet<(String, String)> = roots
            .iter()
            .flat_map(|r| [("ANY".to_string(), format!("/api/v1/{r}")), ("ANY".to_string(), format!("/api/v1/{r}/{{proxy+}}"))])
            .collect();
        assert_eq!(events.remove(binary).unwrap_or_default(), expected, "the API routes of the {binary} function");
    }
    assert!(events.is_empty(), "API routes to functions that serve none: {events:?}");
    assert!(t.contains("WEBHOOK_ALLOW_LOOPBACK: \"false\""), "production URL rules");
}

/// A crate under `functions/` that declares an API area is in the tools' one list of areas
/// (so the dev gateway serves it and the contract has it).
#[test]
fn every_area_crate_is_in_the_list_of_areas() {
    let listed: BTreeSet<&str> = tools::api_areas().iter().map(|a| a.name).collect();
    let declaring: BTreeSet<String> =
        tools::stack::functions(&tools::localstack::repo_root()).unwrap().into_iter().filter(|f| f.area).map(|f| f.krate()).collect();
    assert!(declaring.len() >= 13, "found the area crates: {declaring:?}");
    assert_eq!(
        declaring.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        listed,
        "tools::api_areas against the crates declaring an area"
    );
}

#[test]
fn every_binary_is_packaged_and_deployed_by_a_function() {
    let t = std::fs::read_to_string(tools::localstack::repo_root().join("template.yaml")).unwrap();
    let meta = std::process::Command::new(env!("CARGO")).args(["metadata", "--format-version", "1", "--no-deps"]).output().unwrap();
    let meta: serde_json::Value = serde_json::from_slice(&meta.stdout).unwrap();
    let makefile = std::fs::read_to_string(tools::localstack::repo_root().join("Makefile")).unwrap();
    assert!(makefile.contains("FUNCTIONS := $(notdir $(wildcard functions/*))"), "`make package` builds every folder of functions/");
    let makefile_functions = tools::functions();
    for p in meta["packages"].as_array().unwrap() {
        if !p["manifest_path"].as_str().unwrap().contains("/functions/") {
            continue;
        }
        for target in p["targets"].as_array().unwrap().iter().filter(|t| t["kind"][0] == "bin") {
            let bin = target["name"].as_str().unwrap();
            assert!(t.contains(&format!("CodeUri: target/lambda/{bin}/bootstrap.zip\n")), "no function in template.yaml deploys {bin}");
            assert!(makefile_functions.iter().any(|f| f == bin), "`make package` does not build {bin} (FUNCTIONS in the Makefile)");
        }
    }
}

/// The outputs the admin CLI's `--outputs` reads are outputs of the template.
#[test]
fn the_stack_outputs_every_value_the_admin_cli_needs() {
    let t = std::fs::read_to_string(tools::localstack::repo_root().join("template.yaml")).unwrap();
    let outputs = &t[t.find("\nOutputs:\n").expect("an Outputs section")..];
    for (key, var) in tools::admin::STACK_OUTPUTS {
        assert!(outputs.contains(&format!("\n  {key}:\n")), "template.yaml outputs no {key} (the admin CLI's {var})");
    }
}

// ---------- a deploy that works the first time and a stack that is safe to run ----------

use serde_norway::Value;

fn template() -> Value {
    let t = std::fs::read_to_string(tools::localstack::repo_root().join("template.yaml")).unwrap();
    serde_norway::from_str(&t).expect("template.yaml is YAML")
}

/// `!Ref X` / `!GetAtt X.Attr` as (tag, argument).
fn intrinsic(v: &Value) -> Option<(String, String)> {
    match v {
        Value::Tagged(t) => Some((t.tag.to_string().trim_start_matches('!').to_string(), t.value.as_str().unwrap_or_default().to_string())),
        _ => None,
    }
}

fn resources(t: &Value) -> Vec<(String, &Value)> {
    t["Resources"].as_mapping().unwrap().iter().map(|(k, v)| (k.as_str().unwrap().to_string(), v)).collect()
}

fn of_type<'a>(t: &'a Value, ty: &str) -> Vec<(String, &'a Value)> {
    resources(t).into_iter().filter(|(_, r)| r["Type"] == ty).collect()
}

#[test]
fn schedules_and_functions_carry_no_fixed_names_and_no_reserved_concurrency() {
    let t = template();
    for (name, f) in of_type(&t, "AWS::Serverless::Function") {
        assert!(f["Properties"].get("FunctionName").is_none(), "{name}: a fixed name overflows 64 characters with a long stack name");
        assert!(f["Properties"].get("ReservedConcurrentExecutions").is_none(), "{name}: reserved concurrency (ScalingConfig instead)");
        for (event, e) in f["Properties"]["Events"].as_mapping().into_iter().flatten() {
            if e["Type"] == "ScheduleV2" {
                assert_eq!(e["Properties"]["OmitName"], Value::Bool(true), "{name}.{event:?}: a named schedule collides in a second stack");
            }
        }
    }
    let scanner = &t["Resources"]["ScannerFunction"]["Properties"]["Events"]["Jobs"]["Properties"];
    assert_eq!(scanner["ScalingConfig"]["MaximumConcurrency"], Value::from(5), "scans are limited on the event source");
}

#[test]
fn the_receipt_rule_set_exists_only_with_inbound_domains() {
    let t = template();
    for r in ["InboundMailRuleSet", "InboundMailRule"] {
        assert_eq!(t["Resources"][r]["Condition"], "HasInboundMailDomains", "{r}: regions without SES receiving fail otherwise");
    }
    assert_eq!(t["Outputs"]["InboundMailRuleSetName"]["Condition"], "HasInboundMailDomains");
}

#[test]
fn every_function_outlives_the_request_budget() {
    let t = template();
    let globals = &t["Globals"]["Function"];
    let budget_ms: u64 = globals["Environment"]["Variables"]["REQUEST_TIMEOUT_MS"].as_str().unwrap().parse().unwrap();
    assert!(budget_ms <= 25_000, "under API Gateway's 30 s");
    for (name, f) in of_type(&t, "AWS::Serverless::Function") {
        let timeout_s = f["Properties"].get("Timeout").unwrap_or(&globals["Timeout"]).as_u64().unwrap();
        assert!(timeout_s * 1000 >= budget_ms + 3000, "{name}: {timeout_s} s leaves the {budget_ms} ms budget no margin to answer 503");
    }
}

#[test]
fn every_worker_and_every_dead_letter_queue_is_alarmed_and_alarms_notify() {
    let t = template();
    let alarms = of_type(&t, "AWS::CloudWatch::Alarm");
    let watched = |dimension: &str, target: &str| {
        alarms.iter().any(|(_, a)| {
            a["Properties"]["Dimensions"].as_sequence().into_iter().flatten().any(|d| {
                d["Name"] == dimension
                    && intrinsic(&d["Value"]).is_some_and(|(_, arg)| arg == target || arg == format!("{target}.QueueName"))
            })
        })
    };
    let mut checked = (0, 0);
    for (name, q) in of_type(&t, "AWS::SQS::Queue") {
        if let Some((_, dlq)) = intrinsic(&q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]) {
            let dlq = dlq.trim_end_matches(".Arn");
            assert!(watched("QueueName", dlq), "{name}'s dead-letter queue {dlq} has no alarm");
            checked.0 += 1;
        }
    }
    for (name, f) in of_type(&t, "AWS::Serverless::Function") {
        let queue_driven = f["Properties"]["Events"].as_mapping().into_iter().flatten().any(|(_, e)| e["Type"] == "SQS");
        if queue_driven {
            assert!(watched("FunctionName", &name), "{name} consumes a queue and has no Errors alarm");
            checked.1 += 1;
        }
    }
    assert_eq!(checked, (9, 7), "dead-letter queues and queue-driven functions seen");
    for (name, a) in &alarms {
        assert!(a["Properties"].get("AlarmActions").is_some(), "{name} notifies nobody");
    }
    let api = alarms.iter().find(|(n, _)| n == "ApiServerErrorsAlarm").expect("an API 5xx alarm");
    assert!(
        format!("{:?}", api.1).contains("AWS/ApiGateway"),
        "the 5xx alarm counts what the gateway answered, not only what functions logged"
    );
    let ns = t["Globals"]["Function"]["Environment"]["Variables"]["METRICS_NAMESPACE"].clone();
    assert!(format!("{ns:?}").contains("AWS::StackName"), "a metric namespace per stack: {ns:?}");
    // A deploy without a destination is refused unless it says so.
    let rule = format!("{:?}", t["Rules"]["AlarmsNeedADestination"]);
    assert!(rule.contains("AlarmEmail") && rule.contains("AlarmTopicArn") && rule.contains("AlarmsWithoutDestination"), "{rule}");
}

/// Every variable the template gives the functions is in docs/configuration.md.
#[test]
fn every_environment_variable_is_documented() {
    let t = template();
    let doc = std::fs::read_to_string(tools::localstack::repo_root().join("docs/configuration.md")).unwrap();
    let mut names: Vec<String> = vec![];
    let global = t["Globals"]["Function"]["Environment"]["Variables"].as_mapping().cloned().unwrap_or_default();
    names.extend(global.keys().filter_map(|k| k.as_str().map(String::from)));
    for (_, f) in of_type(&t, "AWS::Serverless::Function") {
        if let Some(vars) = f["Properties"]["Environment"]["Variables"].as_mapping() {
            names.extend(vars.keys().filter_map(|k| k.as_str().map(String::from)));
        }
    }
    assert!(names.len() > 20, "{names:?}");
    let missing: Vec<&String> = names.iter().filter(|n| !doc.contains(&format!("`{n}`"))).collect();
    assert!(missing.is_empty(), "not in docs/configuration.md: {missing:?}");
}

/// SES identities are managed by a tag whose value a stack replaced under a new name can keep.
#[test]
fn the_ses_identity_tag_is_a_parameter_defaulting_to_the_stack_name() {
    let text = std::fs::read_to_string(tools::localstack::repo_root().join("template.yaml")).unwrap();
    assert_eq!(
        text.matches("!If [SesIdentityTagGiven, !Ref SesIdentityTag, !Ref AWS::StackName]").count(),
        3,
        "the variable and both conditions"
    );
    assert!(!text.contains("platform-stack\": !Ref AWS::StackName"));
}

#[test]
fn logs_expire_and_the_data_outlives_the_stack() {
    let t = template();
    let retention = |group: &str| t["Resources"][group]["Properties"]["RetentionInDays"].clone();
    for (name, f) in of_type(&t, "AWS::Serverless::Function") {
        let group = intrinsic(&f["Properties"]["LoggingConfig"]["LogGroup"]).map(|(_, g)| g).unwrap_or_default();
        assert_eq!(intrinsic(&retention(&group)).map(|(_, p)| p), Some("LogRetentionDays".into()), "{name}: its logs never expire");
    }
    let access = intrinsic(&t["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"]["DestinationArn"]).unwrap().1;
    assert_eq!(intrinsic(&retention(access.trim_end_matches(".Arn"))).map(|(_, p)| p), Some("LogRetentionDays".into()));
    let secret = &t["Resources"]["PlatformSecret"];
    // Kept, except when the stack's first create fails (then they hold nothing, and a kept
    // table is deletion-protected, a kept secret billed).
    assert_eq!(
        (secret["DeletionPolicy"].as_str(), secret["UpdateReplacePolicy"].as_str()),
        (Some("RetainExceptOnCreate"), Some("Retain")),
        "the keys to the table's data"
    );
    let table = &t["Resources"]["Table"];
    assert_eq!((table["DeletionPolicy"].as_str(), table["UpdateReplacePolicy"].as_str()), (Some("RetainExceptOnCreate"), Some("Retain")));
    assert_eq!(table["Properties"]["DeletionProtectionEnabled"], Value::Bool(true));
    assert_eq!(table["Properties"]["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"], Value::Bool(true));
}

// ---------- one list of functions: the folders of functions/ (tools/src/stack.rs) ----------

#[test]
fn what_every_function_repeats_is_generated_and_current() {
    let stale: Vec<String> = tools::stack::generated(&tools::localstack::repo_root())
        .unwrap()
        .into_iter()
        .filter(|(_, current, new)| current != new)
        .map(|(p, ..)| p.display().to_string())
        .collect();
    assert!(stale.is_empty(), "stale: {stale:?}: run `make generate`");
}

/// Adding an area is its crate with its `stack.yaml`, its domain module and `make generate`:
/// in a copy of the repository a throwaway area gets its function, log group and routes in
/// the template, its place in the workspace, the tools' dependencies and `api_areas!`, and
/// nothing else needs a hand edit. (The copy is not compiled: the generated line is the same
/// `api_areas!` every area's `shared::area!` satisfies, and the real areas build in this run.)
#[test]
fn a_new_area_needs_its_crate_and_make_generate_only() {
    let root = tools::localstack::repo_root();
    let copy = std::env::temp_dir().join(format!("new-area-{}-{}", std::process::id(), shared::ids::new_id("d")));
    let files = std::process::Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(files.status.success(), "git ls-files");
    for f in files.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let f = std::str::from_utf8(f).unwrap();
        // The working tree as it is (uncommitted files too), without what git ignores.
        if root.join(f).is_file() {
            std::fs::create_dir_all(copy.join(f).parent().unwrap()).unwrap();
            std::fs::copy(root.join(f), copy.join(f)).unwrap();
        }
    }
    for (path, _, new) in tools::stack::generated(&root).unwrap() {
        std::fs::write(copy.join(path.strip_prefix(&root).unwrap()), new).unwrap();
    }
    let area = copy.join("functions/widgets");
    std::fs::create_dir_all(area.join("src")).unwrap();
    let manifest = std::fs::read_to_string(root.join("functions/deals/Cargo.toml")).unwrap().replace("\"deals\"", "\"widgets\"");
    std::fs::write(area.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(area.join("src/lib.rs"), "shared::area!(tag = \"widgets\", description = \"Widgets\", operations = []);\n").unwrap();
    std::fs::write(area.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(area.join("stack.yaml"), "Api: [widgets, widget-kinds]\nDescription: Widgets area of the API\nPolicies:\n  - Statement:\n      - Sid: TableItems\n        Effect: Allow\n        Action: [dynamodb:GetItem]\n        Resource: !GetAtt Table.Arn\n").unwrap();

    let mut changed: Vec<String> =
        tools::stack::write(&copy).unwrap().iter().map(|p| p.strip_prefix(&copy).unwrap().display().to_string()).collect();
    changed.sort();
    assert_eq!(changed, ["Cargo.toml", "template.yaml", "tools/Cargo.toml", "tools/src/lib.rs"], "what `make generate` wrote");
    assert!(tools::stack::generated(&copy).unwrap().iter().all(|(_, c, n)| c == n), "generating again changes nothing");

    let t: Value = serde_norway::from_str(&std::fs::read_to_string(copy.join("template.yaml")).unwrap()).unwrap();
    let f = &t["Resources"]["WidgetsFunction"];
    assert_eq!(f["Type"].as_str(), Some("AWS::Serverless::Function"));
    assert_eq!(f["Properties"]["CodeUri"].as_str(), Some("target/lambda/widgets/bootstrap.zip"));
    assert_eq!(intrinsic(&f["Properties"]["LoggingConfig"]["LogGroup"]), Some(("Ref".into(), "WidgetsLogs".into())));
    assert_eq!(t["Resources"]["WidgetsLogs"]["Type"].as_str(), Some("AWS::Logs::LogGroup"));
    assert_eq!(f["Properties"]["Policies"][0]["Statement"][0]["Sid"].as_str(), Some("TableItems"), "its own properties");
    let paths: BTreeSet<&str> =
        f["Properties"]["Events"].as_mapping().unwrap().values().filter_map(|e| e["Properties"]["Path"].as_str()).collect();
    assert_eq!(
        paths,
        BTreeSet::from(["/api/v1/widgets", "/api/v1/widgets/{proxy+}", "/api/v1/widget-kinds", "/api/v1/widget-kinds/{proxy+}"])
    );
    let areas = std::fs::read_to_string(copy.join("tools/src/lib.rs")).unwrap();
    assert!(areas.lines().any(|l| l.starts_with("api_areas!(") && l.contains(", widgets, ")), "api_areas! names it");

    // Cargo sees the crate as a member and the tools depending on it.
    let meta = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline", "--manifest-path"])
        .arg(copy.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(meta.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&meta.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&meta.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    assert!(packages.iter().any(|p| p["name"] == "widgets"), "a workspace member");
    let tools_pkg = packages.iter().find(|p| p["name"] == "tools").unwrap();
    assert!(tools_pkg["dependencies"].as_array().unwrap().iter().any(|d| d["name"] == "widgets"), "the tools depend on it");
    std::fs::remove_dir_all(&copy).unwrap();
}
