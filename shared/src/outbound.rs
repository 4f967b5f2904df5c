//! Outbound HTTP (webhook deliveries, the identity provider's keys, and any other URL the
//! platform calls): https only, and only globally routable addresses, checked when a URL is
//! saved and again, on the resolved addresses, when it is called (DNS rebinding). Development
//! can allow http and loopback (never private or link-local ranges) with
//! `WEBHOOK_ALLOW_LOOPBACK=true`. Every request goes through [`Client`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UrlPolicy {
    /// Allow `http://` and loopback addresses: local development and tests only.
    pub allow_loopback: bool,
    /// Reach loopback only, and resolve no name but `localhost` (no DNS query leaves the
    /// machine): the local stack's default, so tests and fuzzers never call out.
    pub loopback_only: bool,
    /// Allow plain `http://` to public addresses too (website scans: a site may be http only).
    pub allow_http: bool,
}

pub const MAX_URL_LEN: usize = 2048;

fn v4_global(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64/10 shared address space (CGNAT)
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0/24 protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18/15 benchmarking
        || o[0] >= 240) // reserved
}

fn v6_global(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_global(v4);
    }
    let seg = ip.segments();
    // NAT64 (64:ff9b::/96) reaches the embedded IPv4 address.
    if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0, 0, 0, 0] {
        return v4_global(Ipv4Addr::new((seg[6] >> 8) as u8, seg[6] as u8, (seg[7] >> 8) as u8, seg[7] as u8));
    }
    // Only global unicast (2000::/3), minus documentation, 6to4 and the IETF block (Teredo,
    // ORCHID...), which can tunnel to anything.
    (seg[0] & 0xe000) == 0x2000 && !(seg[0] == 0x2001 && seg[1] == 0x0db8) && seg[0] != 0x2002 && !(seg[0] == 0x2001 && seg[1] < 0x0200)
}

/// May the platform send a request to this address?
pub fn ip_allowed(ip: IpAddr, policy: UrlPolicy) -> bool {
    let loopback = match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v| v.is_loopback()),
    };
    if loopback {
        return policy.allow_loopback;
    }
    if policy.loopback_only {
        return false;
    }
    match ip {
        IpAddr::V4(v4) => v4_global(v4),
        IpAddr::V6(v6) => v6_global(v6),
    }
}

/// Why a URL was refused: its shape, or where it points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlError {
    Invalid(String),
    Blocked(String),
    /// The HTTP client could not be built (no usable TLS trust store): not the URL's fault.
    Client(String),
}

impl std::fmt::Display for UrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(m) | Self::Blocked(m) | Self::Client(m) => f.write_str(m),
        }
    }
}

/// Check a URL's shape, and its address when the host is an IP literal (or a local name).
pub fn check_url(raw: &str, policy: UrlPolicy) -> Result<url::Url, UrlError> {
    let invalid = |m: &str| Err(UrlError::Invalid(m.into()));
    if raw.len() > MAX_URL_LEN {
        return Err(UrlError::Invalid(format!("must be at most {MAX_URL_LEN} characters")));
    }
    let Ok(u) = url::Url::parse(raw) else { return invalid("must be an absolute URL") };
    match u.scheme() {
        "https" => {}
        "http" if policy.allow_loopback || policy.allow_http => {}
        _ => return invalid("must be an https URL"),
    }
    if !u.username().is_empty() || u.password().is_some() {
        return invalid("must not contain credentials");
    }
    match u.host() {
        None => invalid("must have a host"),
        Some(url::Host::Ipv4(ip)) if !ip_allowed(IpAddr::V4(ip), policy) => Err(UrlError::Blocked(refused(IpAddr::V4(ip)))),
        Some(url::Host::Ipv6(ip)) if !ip_allowed(IpAddr::V6(ip), policy) => Err(UrlError::Blocked(refused(IpAddr::V6(ip)))),
        Some(url::Host::Domain(d)) if !policy.allow_loopback && is_local_name(d) => {
            Err(UrlError::Blocked("must not point at a local host name".into()))
        }
        Some(_) => Ok(u),
    }
}

fn is_local_name(d: &str) -> bool {
    let d = d.trim_end_matches('.').to_ascii_lowercase();
    d == "localhost" || d.ends_with(".localhost") || d.ends_with(".local") || d.ends_with(".internal") || !d.contains('.')
}

fn refused(ip: IpAddr) -> String {
    format!("must not point at a private, loopback, link-local or otherwise non-public address ({ip})")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    NotFound(String),
    Refused(IpAddr),
}

impl std::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound(e) => write!(f, "does not resolve ({e})"),
            Self::Refused(ip) => f.write_str(&refused(*ip)),
        }
    }
}

impl std::error::Error for ResolveError {}

/// Resolve a host and check every address. Used at save time and by the delivery client's
/// resolver, so the address connected to is the one checked (no DNS rebinding window).
pub async fn resolve_checked(host: &str, port: u16, policy: UrlPolicy) -> Result<Vec<SocketAddr>, ResolveError> {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    if policy.loopback_only && h != "localhost" && !h.ends_with(".localhost") && h.parse::<IpAddr>().is_err() {
        return Err(ResolveError::NotFound("this stack reaches loopback only (OUTBOUND_LOOPBACK_ONLY)".into()));
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await.map_err(|e| ResolveError::NotFound(e.to_string()))?.collect();
    if addrs.is_empty() {
        return Err(ResolveError::NotFound("no addresses".into()));
    }
    // One forbidden address is enough to refuse: a name that mixes public and private
    // addresses is a rebinding attempt or a misconfiguration.
    if let Some(bad) = addrs.iter().find(|a| !ip_allowed(a.ip(), policy)) {
        return Err(ResolveError::Refused(bad.ip()));
    }
    Ok(addrs)
}

/// Check a URL fully: shape, then (for names) what it resolves to now.
pub async fn check_url_resolved(raw: &str, policy: UrlPolicy) -> Result<url::Url, String> {
    let u = check_url(raw, policy).map_err(|e| e.to_string())?;
    if let Some(url::Host::Domain(d)) = u.host() {
        resolve_checked(d, u.port_or_known_default().unwrap_or(443), policy).await.map_err(|e| e.to_string())?;
    }
    Ok(u)
}

/// The one HTTP client for calls out of the platform: URLs checked before sending, a resolver
/// that refuses non-public addresses (so what is connected to is what was checked), no
/// redirects, no proxy, bounded timeouts. Build one per container: the reqwest client inside
/// (its pool and TLS configuration, whose trust store is read from disk) is built by the
/// first request, so a cold start does not pay for it before it is needed.
pub struct Client {
    http: std::sync::OnceLock<Result<reqwest::Client, String>>,
    settings: Settings,
    policy: UrlPolicy,
}

struct Settings {
    timeout: std::time::Duration,
    user_agent: String,
    any_certificate: bool,
}

struct GuardedResolver(UrlPolicy);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let (policy, host) = (self.0, name.as_str().to_string());
        Box::pin(async move {
            let addrs = resolve_checked(&host, 0, policy).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

impl Client {
    pub fn new(policy: UrlPolicy, timeout: std::time::Duration, user_agent: &str) -> Result<Self, String> {
        Self::build(policy, timeout, user_agent, false)
    }

    /// A client that also talks to hosts whose certificate it cannot verify: for website
    /// scans, which report the certificate (with a [`Client::new`] request) rather than stop
    /// at it. Everything else (addresses, redirects, timeouts) is checked as always.
    pub fn new_accepting_any_certificate(policy: UrlPolicy, timeout: std::time::Duration, user_agent: &str) -> Result<Self, String> {
        Self::build(policy, timeout, user_agent, true)
    }

    fn build(policy: UrlPolicy, timeout: std::time::Duration, user_agent: &str, any_certificate: bool) -> Result<Self, String> {
        reqwest::header::HeaderValue::from_str(user_agent).map_err(|e| format!("user agent: {e}"))?;
        let settings = Settings { timeout, user_agent: user_agent.to_string(), any_certificate };
        Ok(Self { http: std::sync::OnceLock::new(), settings, policy })
    }

    fn http(&self) -> Result<&reqwest::Client, UrlError> {
        let s = &self.settings;
        let built = self.http.get_or_init(|| {
            crate::crypto::install();
            reqwest::Client::builder()
                .tls_danger_accept_invalid_certs(s.any_certificate)
                .redirect(reqwest::redirect::Policy::none())
                .timeout(s.timeout)
                .connect_timeout(s.timeout.min(std::time::Duration::from_secs(5)))
                .no_proxy()
                .user_agent(&s.user_agent)
                .dns_resolver(std::sync::Arc::new(GuardedResolver(self.policy)))
                .pool_idle_timeout(std::time::Duration::from_secs(30))
                .build()
                .map_err(|e| format!("http client: {e}"))
        });
        built.as_ref().map_err(|e| UrlError::Client(e.clone()))
    }

    pub fn policy(&self) -> UrlPolicy {
        self.policy
    }

    /// A request to `url` once the URL itself passes the policy (IP literals never reach the
    /// resolver, so they are checked here).
    pub fn request(&self, method: reqwest::Method, url: &str) -> Result<reqwest::RequestBuilder, UrlError> {
        check_url(url, self.policy)?;
        Ok(self.http()?.request(method, url))
    }
}

/// A failed request's cause in one word, for records and logs: `blocked_address`, `dns`,
/// `timeout`, `connect` or `request`.
pub fn error_kind(e: &reqwest::Error) -> &'static str {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(r) = s.downcast_ref::<ResolveError>() {
            return match r {
                ResolveError::Refused(_) => "blocked_address",
                ResolveError::NotFound(_) => "dns",
            };
        }
        src = s.source();
    }
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else {
        "request"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: UrlPolicy = UrlPolicy { allow_loopback: false, loopback_only: false, allow_http: false };
    const DEV: UrlPolicy = UrlPolicy { allow_loopback: true, loopback_only: false, allow_http: false };
    const LOCAL: UrlPolicy = UrlPolicy { allow_loopback: true, loopback_only: true, allow_http: false };

    #[tokio::test]
    async fn a_loopback_only_stack_reaches_loopback_and_resolves_nothing_else() {
        assert!(ip_allowed("127.0.0.1".parse().unwrap(), LOCAL));
        assert!(!ip_allowed("8.8.8.8".parse().unwrap(), LOCAL));
        assert!(resolve_checked("localhost", 80, LOCAL).await.is_ok());
        // Refused before any DNS query is made.
        assert!(
            matches!(resolve_checked("example.com", 443, LOCAL).await, Err(ResolveError::NotFound(m)) if m.contains("OUTBOUND_LOOPBACK_ONLY"))
        );
    }

    #[test]
    fn addresses() {
        for bad in [
            "10.0.0.1",
            "169.254.169.254",
            "127.0.0.1",
            "192.168.1.1",
            "172.16.0.1",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
            "2002:a00:1::1",
        ] {
            assert!(!ip_allowed(bad.parse().unwrap(), STRICT), "{bad} must be refused");
        }
        for good in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"] {
            assert!(ip_allowed(good.parse().unwrap(), STRICT), "{good} is public");
        }
        assert!(ip_allowed("127.0.0.1".parse().unwrap(), DEV));
        assert!(ip_allowed("::1".parse().unwrap(), DEV));
        assert!(!ip_allowed("10.0.0.1".parse().unwrap(), DEV), "dev mode allows loopback only");
        assert!(!ip_allowed("169.254.169.254".parse().unwrap(), DEV));
    }

    #[test]
    fn urls() {
        assert!(check_url("https://hooks.example.com/in", STRICT).is_ok());
        assert!(check_url("http://hooks.example.com/in", STRICT).is_err());
        assert!(check_url("https://10.0.0.1/x", STRICT).is_err());
        assert!(check_url("https://[::1]/x", STRICT).is_err());
        assert!(check_url("https://169.254.169.254/latest/meta-data", DEV).is_err());
        assert!(check_url("https://user:pw@example.com/", STRICT).is_err());
        assert!(check_url("https://localhost/x", STRICT).is_err());
        assert!(check_url("https://metadata/x", STRICT).is_err());
        assert!(check_url("ftp://example.com/", DEV).is_err());
        assert!(check_url("not a url", DEV).is_err());
        assert!(check_url("http://127.0.0.1:9/x", DEV).is_ok());
        assert!(check_url("http://localhost:9/x", DEV).is_ok());
        assert!(check_url(&format!("https://example.com/{}", "a".repeat(2100)), STRICT).is_err());
        // Decimal and hex IPv4 forms are normalised by the URL parser, then checked.
        assert!(check_url("https://2130706433/", STRICT).is_err());
        assert!(check_url("https://0x7f.1/", STRICT).is_err());
    }

    #[tokio::test]
    async fn resolution_is_checked() {
        // IP literals and localhost resolve without leaving the machine.
        assert!(resolve_checked("127.0.0.1", 80, STRICT).await.is_err());
        assert_eq!(resolve_checked("127.0.0.1", 80, DEV).await.unwrap()[0].port(), 80);
        assert!(check_url_resolved("http://localhost:1/x", DEV).await.is_ok());
        assert!(check_url_resolved("https://10.0.0.1/x", DEV).await.is_err());
    }
}
