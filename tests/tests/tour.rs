//! The curl tour of docs/tour.md, run as a user runs it: the ```sh blocks of `## A curl tour`, in one
//! bash process, against this binary's local stack, from a directory whose `.local/dev.env`
//! describes that stack and a demo workspace made as `make dev` makes it.
//!
//! Before the tour, the script defines `curl` as a function that behaves the same (the body on
//! stdout, curl's exit status) and logs each call's script line and HTTP status, and `cargo` as
//! a function that runs the real cargo from the repository root. The test fails when a command
//! exits non-zero, when a call answers 4xx/5xx (or nothing) and its command does not announce
//! that status with a trailing `# expect NNN`, and when an announced status never occurs. The
//! only change to the tour's text: the webhook receiver's port 8099 becomes a free port.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const SECTION: &str = "## A curl tour";
const RECEIVER_PORT: &str = "8099";
/// A failsafe: the tour takes seconds once the admin CLI is built.
const DEADLINE: Duration = Duration::from_secs(180);

/// Runs before the tour (not part of it): the curl and cargo wrappers, and cleanup.
const PRELUDE: &str = r#"curl() {
    local body status rc=0
    body=$(mktemp "$TOUR_LOG_DIR/body.XXXXXX")
    status=$(command curl -q "$@" -o "$body" -w '%{http_code}') || rc=$?
    cat "$body"
    printf '%s\t%s\t%s\t%s\n' "${BASH_LINENO[0]}" "${status:-000}" "$body" "$(printf '%q ' "$@")" >>"$TOUR_LOG_DIR/calls.tsv"
    return $rc
}
cargo() { (cd "$TOUR_REPO_ROOT" && command cargo "$@"); }
trap 'echo "$? $LINENO" >"$TOUR_LOG_DIR/failed"' ERR
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
"#;

/// The ```sh blocks of the tour section, up to the next `## ` heading.
fn tour_blocks(text: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| l.trim_end() != SECTION);
    assert!(lines.next().is_some(), "docs/tour.md has no `{SECTION}` section");
    let (mut blocks, mut current): (Vec<String>, Option<String>) = (vec![], None);
    for line in lines.take_while(|l| !l.starts_with("## ")) {
        match current.as_mut() {
            None if line.trim_end() == "```sh" => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    assert!(current.is_none(), "an unclosed ```sh block in the tour");
    blocks
}

/// One shell command of the tour: its lines in the tour text (1-based, inclusive) and the
/// statuses its comments announce.
#[derive(Debug, PartialEq)]
struct Cmd {
    first: usize,
    last: usize,
    expect: Vec<u16>,
}

/// Splits shell text into commands: a newline ends one unless it is escaped, inside quotes or
/// inside parentheses (`$(...)`). Enough shell for the tour, which has no heredocs or `case`.
fn commands(text: &str) -> Vec<Cmd> {
    let (mut out, mut words) = (vec![], false);
    let (mut single, mut double, mut depth, mut comment) = (false, false, 0i32, None::<String>);
    let (mut first, mut line, mut expect) = (1, 1, vec![]);
    let mut chars = text.chars();
    let mut at_word_start = true;
    while let Some(c) = chars.next() {
        if c != '\n'
            && let Some(com) = comment.as_mut()
        {
            com.push(c);
            continue;
        }
        if let Some(com) = comment.take() {
            expect.extend(announced(&com));
        }
        match c {
            '\n' => {
                line += 1;
                at_word_start = true;
                if !single && !double && depth <= 0 {
                    if words || !expect.is_empty() {
                        out.push(Cmd { first, last: line - 1, expect: std::mem::take(&mut expect) });
                    }
                    (first, words, depth) = (line, false, 0);
                }
                continue;
            }
            // The escaped character is skipped; an escaped newline continues the command.
            '\\' if !single => line += usize::from(chars.next() == Some('\n')),
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '(' if !single && !double => depth += 1,
            ')' if !single && !double => depth -= 1,
            '#' if !single && !double && at_word_start => {
                comment = Some(String::new());
                continue;
            }
            _ => {}
        }
        words |= !c.is_whitespace();
        at_word_start = c.is_whitespace() || (!single && !double && matches!(c, ';' | '&' | '|' | '('));
    }
    if let Some(com) = comment {
        expect.extend(announced(&com));
    }
    if words || !expect.is_empty() {
        out.push(Cmd { first, last: line, expect });
    }
    out
}

/// The status a comment (the text after `#`) announces: `expect NNN` at its start.
fn announced(comment: &str) -> Option<u16> {
    comment.trim_start().strip_prefix("expect ")?.get(..3)?.parse().ok()
}

/// One curl call the tour made.
#[derive(Debug)]
struct Call {
    /// Line in the tour text.
    line: usize,
    status: u16,
    body: String,
    args: String,
}

/// What is wrong with the calls: unannounced 4xx/5xx (or no answer, status 0), and announced
/// statuses that did not occur.
fn problems(cmds: &[Cmd], calls: &[Call], source: &[&str]) -> Vec<String> {
    let cmd_of = |line: usize| cmds.iter().find(|c| (c.first..=c.last).contains(&line));
    let show = |c: Option<&Cmd>, line: usize| match c {
        Some(c) => source[c.first - 1..c.last].join("\n"),
        None => format!("(line {line} of the tour)"),
    };
    let mut out = vec![];
    for call in calls {
        let cmd = cmd_of(call.line);
        let announced = cmd.is_some_and(|c| c.expect.contains(&call.status));
        if (call.status >= 400 || call.status < 100) && !announced {
            let body: String = call.body.chars().take(2000).collect();
            out.push(format!("HTTP {} not announced by\n{}\n  curl {}\n  body: {body}", call.status, show(cmd, call.line), call.args));
        }
    }
    for cmd in cmds {
        for status in &cmd.expect {
            if !calls.iter().any(|c| (cmd.first..=cmd.last).contains(&c.line) && c.status == *status) {
                out.push(format!("announced HTTP {status} did not occur in\n{}", show(Some(cmd), cmd.first)));
            }
        }
    }
    out
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let dir = std::env::temp_dir().join(format!("curl-tour-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(dir.join(".local")).expect("temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // TOUR_KEEP=1 keeps the script, its logs and each response body for a look.
        if std::env::var_os("TOUR_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The README's first request is the tour's opening lines, so the front door runs as tested.
#[test]
fn the_readmes_first_request_is_the_tours_beginning() {
    let root = tools::localstack::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let tour = std::fs::read_to_string(root.join("docs/tour.md")).expect("docs/tour.md");
    let first = tour_blocks(&tour).into_iter().next().expect("the tour's first block");
    let snippets: Vec<&str> =
        readme.split("```sh\n").skip(1).filter_map(|b| b.split("```").next()).filter(|b| b.contains("curl ")).collect();
    assert!(!snippets.is_empty(), "the README shows a first request");
    for s in snippets {
        assert!(first.starts_with(s), "the README's first request is not how docs/tour.md begins:\n{s}");
    }
}

#[test]
fn the_curl_tour_runs() {
    let root = tools::localstack::repo_root();
    let text = std::fs::read_to_string(root.join("docs/tour.md")).expect("docs/tour.md");
    let blocks = tour_blocks(&text);
    assert!(blocks.len() >= 4, "the tour has its posts, contacts, emails and webhooks blocks: {}", blocks.len());
    assert!(blocks[0].starts_with("set -a; . .local/dev.env; set +a"), "the tour starts by loading .local/dev.env");
    let tour = blocks.join("\n");
    assert!(tour.contains(RECEIVER_PORT), "the webhook receiver listens on {RECEIVER_PORT}");
    let tour = tour.replace(RECEIVER_PORT, &tools::localstack::free_port().to_string());

    let h = e2e::harness();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    // As `make dev` does: the demo workspace, and a local Bluesky PDS connected to it.
    let (ws, key, _pds, bluesky) = rt
        .block_on(async {
            let (ws, key) = tools::demo_workspace(&h.app().await).await?;
            let (pds, lines) = tools::demo_bluesky(&h.base, &key).await?;
            Ok::<_, String>((ws, key, pds, lines))
        })
        .expect("demo workspace");
    let dir = TempDir::new();
    std::fs::write(dir.0.join(".local/dev.env"), tools::dev_env_file(&h.env, &ws, &key) + &bluesky).expect("dev.env");
    let logs = dir.0.join("tour-log");
    std::fs::create_dir(&logs).expect("log dir");
    let script = dir.0.join("tour.sh");
    std::fs::write(&script, format!("{PRELUDE}{tour}")).expect("script");
    let offset = PRELUDE.lines().count();

    let (stdout, stderr) = (dir.0.join("stdout"), dir.0.join("stderr"));
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["-euo", "pipefail"])
        .arg(&script)
        .current_dir(&dir.0)
        .env("TOUR_LOG_DIR", &logs)
        .env("TOUR_REPO_ROOT", &root)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr).expect("stderr file"))
        // Its own process group, so a timeout can stop the receiver and anything else it started.
        .process_group(0);
    for proxy in ["http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        cmd.env_remove(proxy);
    }
    tools::as_a_user_shell(&mut cmd);
    // The tour's `cargo run` of the admin CLI is built first, outside the deadline, as `make
    // dev` has built it for a user: `cargo test --workspace` may have built its crates with
    // other features, and on a clean checkout relinking them takes minutes on 2 cores.
    let build = Instant::now();
    let mut cargo = tools::cargo();
    cargo.args(["build", "-q", "-p", "tools", "--bin", "admin"]).current_dir(&root);
    assert!(cargo.status().expect("cargo").success(), "cargo build -p tools --bin admin");
    println!("admin CLI built in {:?}", build.elapsed());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("bash");
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if started.elapsed() > DEADLINE {
            let _ = std::process::Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };

    let source: Vec<&str> = tour.lines().collect();
    let cmds = commands(&tour);
    let calls: Vec<Call> = read(&logs.join("calls.tsv"))
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(4, '\t').collect();
            let line: usize = f[0].parse().expect("line");
            Call {
                line: line.saturating_sub(offset),
                status: f[1].parse().unwrap_or(0),
                body: read(Path::new(f[2])),
                args: f.get(3).unwrap_or(&"").trim_end().to_string(),
            }
        })
        .collect();
    let mut found = problems(&cmds, &calls, &source);
    match status {
        None => found.push(format!("the tour did not finish within {DEADLINE:?}")),
        Some(s) if !s.success() => {
            let failed = read(&logs.join("failed"));
            let mut it = failed.split_whitespace().map(|v| v.parse::<usize>().unwrap_or(0));
            let (code, line) = (it.next().unwrap_or(0), it.next().unwrap_or(0).saturating_sub(offset));
            let text = cmds
                .iter()
                .find(|c| (c.first..=c.last).contains(&line))
                .map(|c| source[c.first - 1..c.last].join("\n"))
                .unwrap_or_else(|| format!("(line {line} of the tour)"));
            found.push(format!("the tour stopped ({s}); exit {code} from\n{text}"));
        }
        Some(_) => {}
    }
    let transcript = format!("--- stdout\n{}\n--- stderr\n{}", read(&stdout), read(&stderr));
    println!("{} curl calls in {:?}", calls.len(), started.elapsed());
    assert!(found.is_empty(), "the tour of docs/tour.md failed:\n\n{}\n\n{transcript}", found.join("\n\n"));
}

#[test]
fn commands_span_continuations_quotes_and_parentheses() {
    let text = "a=$(curl -s x \\\n  -d '{\"k\":\n  1}' | jq .)   # expect 409\n\n# a comment # expect 500 inside it\ncurl -s y  # expect 404: gone\necho '# expect 201' \"#x\" $(date) # not: expect 201\n";
    let cmds = commands(text);
    assert_eq!(
        cmds,
        vec![
            Cmd { first: 1, last: 3, expect: vec![409] },
            Cmd { first: 6, last: 6, expect: vec![404] },
            Cmd { first: 7, last: 7, expect: vec![] },
        ]
    );
}

#[test]
fn unannounced_errors_and_missing_announced_statuses_are_problems() {
    let text = "curl a\ncurl b # expect 409\ncurl c # expect 404\n";
    let cmds = commands(text);
    let source: Vec<&str> = text.lines().collect();
    let call = |line, status| Call { line, status, body: String::new(), args: String::new() };
    assert!(problems(&cmds, &[call(1, 200), call(2, 409), call(3, 404)], &source).is_empty());
    let found = problems(&cmds, &[call(1, 500), call(2, 200), call(3, 404), call(3, 0)], &source);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("HTTP 500 not announced by\ncurl a"));
    assert!(found[1].starts_with("HTTP 0 not announced by\ncurl c"));
    assert!(found[2].contains("announced HTTP 409 did not occur in\ncurl b"));
}
