//! Websites for the scanner to audit, served on 127.0.0.1 by nginx (Debian's `nginx-light`,
//! installed by `make deps`): the fixture sites of `tests/fixtures/sites/` (see its README),
//! plus hostile ones made here (a redirect loop, a 50 MB page, a slow drip, a redirect to the
//! cloud metadata address, deeply nested markup). Each site gets its own free port; nginx runs
//! under the same guard as the emulators, so it dies with the process that started it.

use crate::localstack::{free_port, guarded, repo_root, wait_for_port};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Sites {
    /// Site name -> the URL to scan (`http://127.0.0.1:<port>/`).
    pub urls: BTreeMap<String, String>,
    /// The TLS origin of the https fixture sites.
    pub https_origins: BTreeMap<String, String>,
    _nginx: tokio::process::Child,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Remove the folders of earlier runs whose process is gone: a test binary holds its sites in
/// a static, which is never dropped, so its folder (52 MB of hostile pages) outlives it.
fn sweep_orphans() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix("scan-sites-").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

pub const NGINX: &str = "/usr/sbin/nginx";

fn run(cmd: &mut std::process::Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() { Ok(()) } else { Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr))) }
}

impl Sites {
    pub async fn start() -> Result<Self, String> {
        if !Path::new(NGINX).exists() {
            return Err(format!("{NGINX} is missing: run `make deps` (Debian's nginx-light)"));
        }
        sweep_orphans();
        let dir = std::env::temp_dir().join(format!("scan-sites-{}-{}", std::process::id(), shared::ids::new_id("d")));
        let generated = dir.join("generated");
        for sub in ["tmp", "generated/large", "generated/drip", "generated/nested"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(|e| e.to_string())?;
        }
        let dir = TempDir(dir);
        let d = dir.0.clone();
        run(std::process::Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"])
            .args(["-keyout".as_ref(), d.join("key.pem").as_os_str(), "-out".as_ref(), d.join("cert.pem").as_os_str()]))?;
        // The hostile pages: 50 MB, a slow drip, 200,000 nested elements.
        let mut large = b"<!doctype html><html><head><title>Large</title></head><body>".to_vec();
        large.resize(50 * 1024 * 1024, b'x');
        std::fs::write(generated.join("large/index.html"), &large).map_err(|e| e.to_string())?;
        drop(large);
        std::fs::write(generated.join("drip/index.html"), vec![b' '; 256 * 1024]).map_err(|e| e.to_string())?;
        let mut nested = b"<!doctype html><html lang=\"en\"><head><title>Nested markup all the way down</title></head><body>".to_vec();
        nested.extend(std::iter::repeat_n(&b"<div>"[..], 200_000).flatten());
        std::fs::write(generated.join("nested/index.html"), nested).map_err(|e| e.to_string())?;

        let fixtures = repo_root().join("tests/fixtures/sites");
        let mut servers = String::new();
        let mut urls = BTreeMap::new();
        let mut https_origins = BTreeMap::new();
        let mut ports = vec![];
        let mut names: Vec<PathBuf> = std::fs::read_dir(&fixtures)
            .map_err(|e| format!("{}: {e}", fixtures.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        names.sort();
        for site in names {
            let name = site.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            let conf = std::fs::read_to_string(site.join("site.conf")).unwrap_or_default();
            let root = site.display();
            let port = free_port();
            ports.push(port);
            if site.join("https").exists() {
                let tls = free_port();
                ports.push(tls);
                servers.push_str(&format!(
                    "server {{ listen 127.0.0.1:{port}; return 301 https://127.0.0.1:{tls}$request_uri; }}\n\
                     server {{ listen 127.0.0.1:{tls} ssl; ssl_certificate {cert}; ssl_certificate_key {key}; root {root};\n{conf}\n}}\n",
                    cert = d.join("cert.pem").display(),
                    key = d.join("key.pem").display(),
                ));
                https_origins.insert(name.clone(), format!("https://127.0.0.1:{tls}"));
            } else {
                servers.push_str(&format!("server {{ listen 127.0.0.1:{port}; root {root};\n{conf}\n}}\n"));
            }
            urls.insert(name, format!("http://127.0.0.1:{port}/"));
        }
        let mut hostile = |name: &str, body: String| {
            let port = free_port();
            ports.push(port);
            servers.push_str(&format!("server {{ listen 127.0.0.1:{port};\n{body}\n}}\n"));
            urls.insert(name.to_string(), format!("http://127.0.0.1:{port}/"));
        };
        hostile(
            "redirect-loop",
            "location = / { return 302 /a; } location = /a { return 302 /b; } location = /b { return 302 /a; }".into(),
        );
        hostile("large-page", format!("root {};", generated.join("large").display()));
        hostile("slow-drip", format!("root {}; limit_rate 2k;", generated.join("drip").display()));
        hostile("metadata-redirect", "return 302 http://169.254.169.254/latest/meta-data/;".into());
        hostile("nested-markup", format!("root {};", generated.join("nested").display()));

        let tmp = d.join("tmp");
        // Run as root, nginx's workers would drop to `nobody`, which cannot read a checkout
        // under a 0700 directory (`mktemp -d`): they keep the user that started them.
        let as_root = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
        };
        let conf = format!(
            "daemon off; worker_processes 1; pid {pid}; error_log {err} warn;{user}\n\
             events {{ worker_connections 256; }}\n\
             http {{\n access_log off; server_tokens off; sendfile on;\n\
             client_body_temp_path {t}/body; proxy_temp_path {t}/proxy; fastcgi_temp_path {t}/fastcgi; uwsgi_temp_path {t}/uwsgi; scgi_temp_path {t}/scgi;\n\
             types {{ text/html html; text/css css; application/javascript js; image/png png; text/plain txt; application/xml xml; image/jpeg jpg; }}\n\
             default_type application/octet-stream;\n{servers}}}\n",
            pid = d.join("nginx.pid").display(),
            err = d.join("error.log").display(),
            t = tmp.display(),
            user = if as_root { " user root;" } else { "" },
        );
        let conf_path = d.join("nginx.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let args = vec![
            "-c".into(),
            conf_path.display().to_string(),
            "-p".into(),
            d.display().to_string(),
            "-e".into(),
            d.join("error.log").display().to_string(),
        ];
        let nginx = guarded(Path::new(NGINX), &args, &d, &d.join("nginx.out"), &[])?;
        for port in ports {
            wait_for_port(port, "nginx", Duration::from_secs(10))
                .await
                .map_err(|e| format!("{e}: {}", std::fs::read_to_string(d.join("nginx.out")).unwrap_or_default()))?;
        }
        Ok(Self { urls, https_origins, _nginx: nginx, _dir: dir })
    }

    pub fn url(&self, name: &str) -> &str {
        self.urls.get(name).map(String::as_str).unwrap_or_else(|| panic!("no fixture site {name}"))
    }
}
