//! The domain's mail authentication records (SPF, DMARC) from the resolver the function uses
//! (`/etc/resolv.conf`), with a minimal DNS client over UDP: one TXT question, one answer. No
//! answer (no resolver, a timeout, a server failure) is `None`: the email category is then
//! not measured rather than guessed.

use crate::scans::rules::MailDns;
use std::net::SocketAddr;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(3);

fn nameserver() -> Option<SocketAddr> {
    let conf = std::fs::read_to_string("/etc/resolv.conf").ok()?;
    conf.lines()
        .find_map(|l| l.trim().strip_prefix("nameserver")?.trim().parse::<std::net::IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53))
}

/// A recursive query for `name`'s TXT records.
pub fn query(id: u16, name: &str) -> Option<Vec<u8>> {
    let mut q = Vec::with_capacity(name.len() + 18);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD; one question
    for label in name.trim_end_matches('.').split('.') {
        if label.is_empty() || label.len() > 63 {
            return None;
        }
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 16, 0, 1]); // root, TXT, IN
    Some(q)
}

fn skip_name(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let len = *b.get(i)? as usize;
        if len == 0 {
            return Some(i + 1);
        }
        if len & 0xc0 == 0xc0 {
            return Some(i + 2);
        }
        i += 1 + len;
    }
}

/// The TXT strings of an answer to query `id` (each record's strings joined); `Some(vec![])`
/// for a name without TXT records, `None` for a failure.
pub fn parse_txt(b: &[u8], id: u16) -> Option<Vec<String>> {
    if b.len() < 12 || u16::from_be_bytes([b[0], b[1]]) != id || b[2] & 0x80 == 0 {
        return None;
    }
    match b[3] & 0x0f {
        0 => {}
        3 => return Some(vec![]), // NXDOMAIN: no such name, so no record
        _ => return None,
    }
    let (qd, an) = (u16::from_be_bytes([b[4], b[5]]), u16::from_be_bytes([b[6], b[7]]));
    let mut i = 12;
    for _ in 0..qd {
        i = skip_name(b, i)? + 4;
    }
    let mut out = vec![];
    for _ in 0..an {
        i = skip_name(b, i)?;
        let rtype = u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]);
        let rdlen = u16::from_be_bytes([*b.get(i + 8)?, *b.get(i + 9)?]) as usize;
        let rdata = b.get(i + 10..i + 10 + rdlen)?;
        if rtype == 16 {
            let mut s = String::new();
            let mut j = 0;
            while j < rdata.len() {
                let l = rdata[j] as usize;
                s.push_str(&String::from_utf8_lossy(rdata.get(j + 1..j + 1 + l)?));
                j += 1 + l;
            }
            out.push(s);
        }
        i += 10 + rdlen;
    }
    Some(out)
}

async fn txt(server: SocketAddr, name: &str) -> Option<Vec<String>> {
    let id: u16 = rand_id();
    let q = query(id, name)?;
    let bind: SocketAddr = if server.is_ipv4() { "0.0.0.0:0".parse().ok()? } else { "[::]:0".parse().ok()? };
    let sock = tokio::net::UdpSocket::bind(bind).await.ok()?;
    sock.send_to(&q, server).await.ok()?;
    let mut buf = vec![0u8; 4096];
    let (n, from) = tokio::time::timeout(TIMEOUT, sock.recv_from(&mut buf)).await.ok()?.ok()?;
    if from != server {
        return None;
    }
    parse_txt(&buf[..n], id)
}

fn rand_id() -> u16 {
    (shared::ids::now_ms() as u64 ^ std::process::id() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) as u16
}

/// SPF of the host's domain (`www.` dropped) and its DMARC policy; None when DNS cannot answer.
pub async fn mail_records(host: &str) -> Option<MailDns> {
    let server = nameserver()?;
    let domain = host.strip_prefix("www.").unwrap_or(host);
    let spf = txt(server, domain).await?.into_iter().find(|t| t.to_ascii_lowercase().starts_with("v=spf1"));
    let dmarc = txt(server, &format!("_dmarc.{domain}")).await?.into_iter().find(|t| t.to_ascii_lowercase().starts_with("v=dmarc1"));
    Some(MailDns { spf, dmarc })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_txt_answer_is_read() {
        let q = query(0x1234, "acme.test").unwrap();
        let mut r = q.clone();
        r[2] = 0x81;
        r[3] = 0x80;
        r[7] = 2; // two answers
        for text in [&["v=spf1 ", "include:_spf.acme.test -all"][..], &["google-site-verification=x"][..]] {
            r.extend_from_slice(&[0xc0, 12, 0, 16, 0, 1, 0, 0, 1, 0]);
            let rdata: Vec<u8> = text.iter().flat_map(|s| std::iter::once(s.len() as u8).chain(s.bytes())).collect();
            r.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            r.extend_from_slice(&rdata);
        }
        assert_eq!(parse_txt(&r, 0x1234).unwrap(), vec!["v=spf1 include:_spf.acme.test -all", "google-site-verification=x"]);
        assert_eq!(parse_txt(&r, 0x9999), None, "another query's answer");
        let mut nx = q.clone();
        nx[2] = 0x81;
        nx[3] = 0x83;
        assert_eq!(parse_txt(&nx, 0x1234), Some(vec![]));
        let mut fail = q;
        fail[2] = 0x81;
        fail[3] = 0x82;
        assert_eq!(parse_txt(&fail, 0x1234), None);
        assert!(query(1, "a..b").is_none());
    }
}
