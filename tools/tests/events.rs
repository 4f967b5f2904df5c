//! Every sample in events/ is a valid HTTP API v2 event that reaches a real route.

use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequest;

#[test]
fn sample_events_parse_and_route() {
    let dir = tools::localstack::repo_root().join("events");
    let mut n = 0;
    for area in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok).filter(|e| e.path().is_dir()) {
        for f in std::fs::read_dir(area.path()).unwrap().filter_map(Result::ok) {
            let text = std::fs::read_to_string(f.path()).unwrap();
            let ev: ApiGatewayV2httpRequest = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.path().display()));
            let path = ev.raw_path.clone().unwrap();
            let m = shared::routing::match_route(tools::gateway::all_routes(), &ev.request_context.http.method, &path)
                .unwrap_or_else(|e| panic!("{}: {e}", f.path().display()));
            let area_name = area.file_name().into_string().unwrap();
            assert!(m.relative_path.starts_with(&format!("/{area_name}")), "{} belongs to {area_name}", f.path().display());
            n += 1;
        }
    }
    assert!(n >= 8, "found {n} samples");
}
