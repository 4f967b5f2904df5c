//! `testrun [--jobs N] [--list]`: every test of the workspace, as `cargo test --workspace` runs them
//! (unit, integration and doc tests), with N test binaries at a time (`TEST_JOBS`, default 1).
//!
//! Each binary's output is kept in `target/test-output/<binary>.log` and printed whole when
//! it fails, so parallel runs never interleave lines, and each binary's duration is printed
//! and kept (`target/test-output/durations.json`): where CI time goes is visible per binary.
//! Binaries share nothing: each end-to-end binary has its own emulators on free ports and
//! its own log directory (`target/e2e-logs/<binary>`).
//!
//! Default 1: on the 2-core CI machine two at a time was not faster (741 s against about
//! 790 s one at a time), because each end-to-end binary keeps both cores busy by itself
//! (DynamoDB Local, moto, the gateways), and the wall-clock budgets some tests assert were
//! missed next to another stack. On more cores, `TEST_JOBS=4 make test`: the longest binaries
//! start first (by the last run's durations), and those in [`ALONE`] run last, one at a time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The longest binaries, longest first (about 90 s each run alone).
const LONG: &[&str] = &["e2e/crm", "e2e/gdpr"];

/// Binaries that run last, one at a time, on an otherwise idle machine. The fuzzer keeps both
/// cores busy by itself (schemathesis, DynamoDB Local), and next to it requests of the other
/// stack took seconds, past a 5 s hold. The others assert wall-clock budgets (a hung
/// dependency answers within the request budget; a dispatcher invocation ends within its
/// time), which the emulators, not the code, exceeded next to another stack.
const ALONE: &[&str] = &["e2e/contract_fuzz", "e2e/hung_dependencies", "e2e/webhooks"];

/// Binaries run as several processes, one per part (its name and test-name arguments), each
/// with its own stack and log directory. The reliability binary's crash test kills an export
/// worker mid-upload, and moto keeps the parts it was sent: its state dump (what the fault
/// matrix reads to count SES's copies) then stops answering. Apart, each gets its own moto, as
/// in `make chaos`; the last part runs whatever a new module adds.
type Part = (&'static str, &'static [&'static str]);
const SPLIT: &[(&str, &[Part])] = &[(
    "e2e/reliability",
    &[("faults", &["faults::"]), ("crashes", &["crashes::"]), ("rest", &["--skip", "faults::", "--skip", "crashes::"])],
)];

struct Job {
    /// `package/target` (`e2e/api`, `shared/lib`), unique in the workspace.
    name: String,
    cmd: Command,
}

fn main() {
    let mut jobs_n: usize = std::env::var("TEST_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let mut list_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--jobs" | "-j" => jobs_n = args.next().and_then(|v| v.parse().ok()).expect("--jobs N"),
            "--list" => list_only = true,
            other => panic!("unknown argument {other}: testrun [--jobs N] [--list]"),
        }
    }
    let root = tools::localstack::repo_root();
    let out_dir = root.join("target/test-output");
    std::fs::create_dir_all(&out_dir).expect("target/test-output");
    let durations_file = out_dir.join("durations.json");
    let last: BTreeMap<String, f64> =
        std::fs::read_to_string(&durations_file).ok().and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default();

    let mut jobs = binaries(&root);
    let mut doc = tools::cargo();
    // The whole workspace, not `-p` the libraries with examples: cargo unifies features over
    // the packages it is given, so a subset rebuilt ~40 crates with other features (52 s of a
    // fresh `make test`), while `--workspace` reuses what `cargo test --workspace --no-run`
    // built (`--doc` ignores `doctest = false`; the libraries without examples cost ~5 s).
    doc.current_dir(&root).args(["test", "--workspace", "--doc", "-q"]);
    jobs.push(Job { name: "doctests".into(), cmd: doc });
    // Longest first, so the last binary to finish is a short one: by the last run's durations,
    // or on a fresh checkout the ones known to be long, then the other end-to-end binaries.
    let rank = |j: &Job| match last.get(&j.name) {
        Some(secs) => (0, -secs.round() as i64),
        None => match LONG.iter().position(|n| *n == j.name) {
            Some(i) => (1, i as i64),
            None => (if j.name.starts_with("e2e/") { 2 } else { 3 }, 0),
        },
    };
    jobs.sort_by_key(rank);

    let total = jobs.len();
    let (alone, parallel): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| ALONE.contains(&j.name.as_str()));
    if list_only {
        // The build and the order only (a check that nothing is rebuilt, a look at the order).
        for j in parallel.iter().chain(&alone) {
            println!("{}", j.name);
        }
        return;
    }
    eprintln!("testrun: {total} test binaries, {jobs_n} at a time, then {} alone", alone.len());
    let started = Instant::now();
    let mut results = run_all(parallel, jobs_n, &out_dir);
    results.extend(run_all(alone, 1, &out_dir));

    let mut durations = last;
    durations.extend(results.iter().map(|(n, _, s)| (n.clone(), *s)));
    std::fs::write(&durations_file, serde_json::to_string_pretty(&durations).unwrap()).ok();
    let failed: Vec<_> = results.iter().filter(|r| !r.1).map(|r| r.0.as_str()).collect();
    eprintln!("testrun: {} of {total} binaries passed in {:.0} s", total - failed.len(), started.elapsed().as_secs_f64());
    if !failed.is_empty() {
        eprintln!("testrun: FAILED: {}", failed.join(", "));
        std::process::exit(1);
    }
}

/// Run `jobs` in order, `n` at a time: (name, passed, seconds) of each.
fn run_all(jobs: Vec<Job>, n: usize, out_dir: &Path) -> Vec<(String, bool, f64)> {
    let queue = Arc::new(Mutex::new(jobs.into_iter()));
    let results = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..n.max(1))
        .map(|_| {
            let (queue, results, out_dir) = (queue.clone(), results.clone(), out_dir.to_path_buf());
            std::thread::spawn(move || {
                loop {
                    let Some(mut job) = queue.lock().unwrap().next() else { return };
                    let (ok, secs) = run(&mut job, &out_dir);
                    results.lock().unwrap().push((job.name, ok, secs));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    std::mem::take(&mut *results.lock().unwrap())
}

/// Run one job with its output in a file; print the file if it failed.
fn run(job: &mut Job, out_dir: &Path) -> (bool, f64) {
    let log = out_dir.join(format!("{}.log", job.name.replace('/', "-")));
    let file = std::fs::File::create(&log).expect("test log");
    let start = Instant::now();
    let status = job.cmd.stdin(Stdio::null()).stdout(file.try_clone().expect("log")).stderr(file).status();
    let secs = start.elapsed().as_secs_f64();
    let ok = status.as_ref().is_ok_and(|s| s.success());
    if ok {
        eprintln!("ok      {:<32} {secs:>6.1} s", job.name);
    } else {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        eprintln!("FAILED  {:<32} {secs:>6.1} s ({status:?})\n{text}", job.name);
    }
    (ok, secs)
}

/// The test binaries `cargo test --workspace` would run, built if needed, each as cargo runs
/// it: in its package's directory, with `CARGO_MANIFEST_DIR` set.
fn binaries(root: &Path) -> Vec<Job> {
    // The same build as `make build-tests` did (tools::cargo: not a rebuild of ring and up).
    let out = tools::cargo()
        .current_dir(root)
        .args(["test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"])
        .stderr(Stdio::inherit())
        .output()
        .expect("cargo");
    assert!(out.status.success(), "the test build failed");
    let mut jobs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let (Some(exe), true) = (m["executable"].as_str(), m["profile"]["test"] == true) else { continue };
        let package_dir = PathBuf::from(m["manifest_path"].as_str().expect("manifest_path")).parent().expect("package").to_path_buf();
        let package = m["package_id"].as_str().and_then(package_name).unwrap_or_default();
        let kind = m["target"]["kind"][0].as_str().unwrap_or_default();
        let target = m["target"]["name"].as_str().unwrap_or_default();
        // A library's unit tests are named after the package; a binary's or test's after the target.
        let name = if kind == "lib" { format!("{package}/lib") } else { format!("{package}/{target}") };
        let parts: &[Part] = SPLIT.iter().find(|(n, _)| *n == name).map_or(&[("", &[])], |(_, p)| p);
        for (part, args) in parts {
            let mut cmd = Command::new(exe);
            cmd.current_dir(&package_dir).env("CARGO_MANIFEST_DIR", &package_dir).args(*args);
            let name = if part.is_empty() {
                name.clone()
            } else {
                // Each part's emulator logs in a directory of its own (`tests/src/lib.rs`).
                cmd.env("E2E_LOG_PART", part);
                format!("{name}/{part}")
            };
            jobs.push(Job { name, cmd });
        }
    }
    jobs
}

/// `path+file:///work/main/tests#e2e@0.1.0` -> `e2e`; `path+file:///x/posts#0.1.0` -> `posts`.
fn package_name(id: &str) -> Option<String> {
    let (path, frag) = id.rsplit_once('#')?;
    Some(match frag.split_once('@') {
        Some((name, _)) => name.to_string(),
        None => path.rsplit('/').next()?.to_string(),
    })
}
