//! Raw MIME (as SES stores it in S3) into what the helpdesk records: the sender, the threading
//! headers, the new text of the message (the quoted history cut off, as Gmail and Outlook
//! quote it), its HTML (sanitised later, by the domain), its files, and whether a machine sent
//! it (auto-replies and bounces never reopen a conversation nor notify anyone).

use crate::helpdesk::inbound::{Attachment, Automatic};
use mailparse::{MailHeaderMap, ParsedMail};

/// The largest message whose files are stored one by one. A larger one (SES takes up to
/// 40 MB) is recorded all the same: its text and HTML as usual, its files listed, and the
/// whole original kept as one file (`original.eml`), so nothing a customer sent is lost.
pub const MAX_MESSAGE_BYTES: usize = 30 * 1024 * 1024;
/// Beyond what SES accepts: not an SES message.
pub const MAX_RAW_BYTES: usize = 48 * 1024 * 1024;
/// Larger files are listed on the message (name, type, size) but not stored.
pub const MAX_ATTACHMENT_BYTES: usize = 10 * 1024 * 1024;
/// Files stored per message; the rest are listed only.
pub const MAX_ATTACHMENTS: usize = 20;
/// References kept for threading (the most recent ones).
pub const MAX_REFERENCES: usize = 20;

#[derive(Debug)]
pub struct Parsed {
    pub from: String,
    pub from_name: Option<String>,
    pub to: Vec<String>,
    pub subject: String,
    /// Without angle brackets; `None` when the message has none (SES's id stands in).
    pub message_id: Option<String>,
    /// In-Reply-To first, then References newest first; without angle brackets.
    pub references: Vec<String>,
    /// The new part of the message (quoted history cut off); the whole text if that leaves nothing.
    pub text: String,
    /// The HTML part, its quoted history cut off; not yet sanitised.
    pub html: Option<String>,
    pub attachments: Vec<(Attachment, Option<Vec<u8>>)>,
    pub automatic: Option<Automatic>,
    /// One From header with one mailbox.
    pub single_from: bool,
    /// The `d=` domain of each DKIM-Signature header.
    pub dkim_signers: Vec<String>,
    /// The raw size, when over [`MAX_MESSAGE_BYTES`]: its files were listed, not stored.
    pub oversized: Option<u64>,
}

/// Why a message is not taken, in words an operator can act on.
#[derive(Debug, PartialEq)]
pub enum Refused {
    TooLarge(usize),
    Unparseable(String),
    NoSender,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge(n) => write!(f, "the message is {n} bytes; SES sends at most 40 MB"),
            Self::Unparseable(e) => write!(f, "not a MIME message: {e}"),
            Self::NoSender => write!(f, "the message has no usable From address"),
        }
    }
}

pub fn parse(raw: &[u8]) -> Result<Parsed, Refused> {
    if raw.len() > MAX_RAW_BYTES {
        return Err(Refused::TooLarge(raw.len()));
    }
    let oversized = (raw.len() > MAX_MESSAGE_BYTES).then_some(raw.len() as u64);
    let mail = mailparse::parse_mail(raw).map_err(|e| Refused::Unparseable(e.to_string()))?;
    let h = &mail.headers;
    let (from, from_name) = first_address(h.get_first_header("From")).ok_or(Refused::NoSender)?;
    let mut to = addresses(h.get_first_header("To"));
    to.extend(addresses(h.get_first_header("Cc")));
    let subject = h.get_first_value("Subject").map(|s| s.trim().to_string()).unwrap_or_default();
    let ids = |name: &str| -> Vec<String> {
        h.get_first_value(name)
            .and_then(|v| mailparse::msgidparse(&v).ok())
            .map(|l| l.iter().map(|i| bare_id(i)).collect())
            .unwrap_or_default()
    };
    let message_id = ids("Message-ID").into_iter().next().filter(|i| !i.is_empty());
    let mut references = ids("In-Reply-To");
    for r in ids("References").into_iter().rev() {
        if !references.contains(&r) {
            references.push(r);
        }
    }
    references.truncate(MAX_REFERENCES);
    let mut body = Body { keep_files: oversized.is_none(), ..Body::default() };
    collect(&mail, &mut body);
    let text_full = body.text.unwrap_or_else(|| body.html.as_deref().map(html_to_text).unwrap_or_default());
    let text = match strip_quoted_text(&text_full) {
        t if t.trim().is_empty() => text_full.trim().to_string(),
        t => t,
    };
    let html = body.html.map(|h| strip_quoted_html(&h));
    Ok(Parsed {
        automatic: automatic(&mail, &from),
        single_from: h.get_all_headers("From").len() == 1 && mailboxes(h.get_first_header("From")) == 1,
        dkim_signers: h
            .get_all_headers("DKIM-Signature")
            .iter()
            .filter_map(|s| crate::helpdesk::inbound::dkim_signer(&String::from_utf8_lossy(s.get_value_raw())))
            .collect(),
        oversized,
        from,
        from_name,
        to,
        subject,
        message_id,
        references,
        text,
        html,
        attachments: body.files,
    })
}

/// A Message-ID without its brackets, cut to 500 characters (RFC 5322 lines end at 998; the
/// helpdesk keeps it on the message and in its events).
fn bare_id(id: &str) -> String {
    id.trim().trim_start_matches('<').trim_end_matches('>').trim().chars().take(500).collect()
}

fn first_address(h: Option<&mailparse::MailHeader>) -> Option<(String, Option<String>)> {
    let list = mailparse::addrparse_header(h?).ok()?;
    list.iter().find_map(|a| match a {
        mailparse::MailAddr::Single(s) => {
            Some((shared::validate::normalise_email(&s.addr)?, s.display_name.clone().filter(|n| !n.trim().is_empty())))
        }
        mailparse::MailAddr::Group(g) => {
            g.addrs.first().and_then(|s| Some((shared::validate::normalise_email(&s.addr)?, s.display_name.clone())))
        }
    })
}

/// How many mailboxes a header names, valid or not (0 when it does not parse).
fn mailboxes(h: Option<&mailparse::MailHeader>) -> usize {
    let Some(list) = h.and_then(|h| mailparse::addrparse_header(h).ok()) else { return 0 };
    list.iter()
        .map(|a| match a {
            mailparse::MailAddr::Single(_) => 1,
            mailparse::MailAddr::Group(g) => g.addrs.len(),
        })
        .sum()
}

fn addresses(h: Option<&mailparse::MailHeader>) -> Vec<String> {
    let Some(list) = h.and_then(|h| mailparse::addrparse_header(h).ok()) else { return vec![] };
    let mut out = vec![];
    for a in list.iter() {
        match a {
            mailparse::MailAddr::Single(s) => out.extend(shared::validate::normalise_email(&s.addr)),
            mailparse::MailAddr::Group(g) => out.extend(g.addrs.iter().filter_map(|s| shared::validate::normalise_email(&s.addr))),
        }
    }
    out
}

/// A machine's message, by the headers RFC 3834 and the common autoresponders set, or a
/// delivery report.
fn automatic(mail: &ParsedMail, from: &str) -> Option<Automatic> {
    let h = &mail.headers;
    let local = from.split('@').next().unwrap_or_default();
    if mail.ctype.mimetype.eq_ignore_ascii_case("multipart/report") || ["mailer-daemon", "postmaster"].contains(&local) {
        return Some(Automatic::Bounce);
    }
    let auto_submitted = h.get_first_value("Auto-Submitted").is_some_and(|v| !v.trim().eq_ignore_ascii_case("no"));
    let precedence = h
        .get_first_value("Precedence")
        .is_some_and(|v| ["bulk", "junk", "list", "auto_reply"].contains(&v.trim().to_ascii_lowercase().as_str()));
    let flagged = ["X-Autoreply", "X-Autorespond", "X-Auto-Response-Suppress"].iter().any(|k| h.get_first_header(k).is_some());
    (auto_submitted || precedence || flagged).then_some(Automatic::AutoReply)
}

#[derive(Default)]
struct Body {
    text: Option<String>,
    html: Option<String>,
    files: Vec<(Attachment, Option<Vec<u8>>)>,
    /// False for an oversized message: its files are listed, and the original is kept instead.
    keep_files: bool,
}

/// The first text and HTML bodies and every file, depth first. Delivery reports' machine
/// parts are skipped (their human-readable part is the text).
fn collect(part: &ParsedMail, out: &mut Body) {
    let mime = part.ctype.mimetype.to_ascii_lowercase();
    if mime.starts_with("multipart/") {
        for p in &part.subparts {
            collect(p, out);
        }
        return;
    }
    let disposition = part.get_content_disposition();
    let filename = disposition.params.get("filename").or_else(|| part.ctype.params.get("name")).cloned();
    let attached = disposition.disposition == mailparse::DispositionType::Attachment;
    if !attached && filename.is_none() {
        match mime.as_str() {
            "text/plain" if out.text.is_none() => {
                out.text = part.get_body().ok().map(|t| t.replace("\r\n", "\n"));
                return;
            }
            "text/html" if out.html.is_none() => {
                out.html = part.get_body().ok();
                return;
            }
            "message/delivery-status" | "text/rfc822-headers" | "message/rfc822" | "text/plain" | "text/html" => return,
            _ => {}
        }
    }
    let content_id = part.headers.get_first_value("Content-ID").map(|c| bare_id(&c)).filter(|c| !c.is_empty());
    let bytes = part.get_body_raw().unwrap_or_default();
    let size = bytes.len();
    let stored = out.keep_files && size <= MAX_ATTACHMENT_BYTES && out.files.iter().filter(|(_, b)| b.is_some()).count() < MAX_ATTACHMENTS;
    let meta = Attachment {
        filename: filename.unwrap_or_else(|| format!("attachment-{}", out.files.len() + 1)).chars().take(200).collect(),
        content_type: mime,
        size: size as u64,
        content_id,
        inline: disposition.disposition == mailparse::DispositionType::Inline,
        stored,
        download_url: None,
        sha256: None,
    };
    out.files.push((meta, stored.then_some(bytes)));
}

/// The text before the quoted history: Gmail's "On <date>, <name> wrote:" (which it may wrap
/// over two lines), Outlook's "-----Original Message-----" or its underscore line followed by
/// "From:", and any trailing block of `>` lines.
pub fn strip_quoted_text(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut cut = lines.len();
    for (i, line) in lines.iter().enumerate() {
        let l = line.trim();
        let next = lines.get(i + 1).map(|n| n.trim()).unwrap_or("");
        let gmail = l.starts_with("On ") && (l.ends_with("wrote:") || next.ends_with("wrote:"));
        let outlook = l.starts_with("-----Original Message-----")
            || (l.starts_with("________________________________") && next.starts_with("From:"))
            || (l.starts_with("From:") && lines.get(i + 1).is_some_and(|n| n.trim().starts_with("Sent:")));
        if gmail || outlook || l.starts_with('>') && lines[i..].iter().all(|r| r.trim().is_empty() || r.trim_start().starts_with('>')) {
            cut = i;
            break;
        }
    }
    lines[..cut].join("\n").trim().to_string()
}

/// The HTML before the quoted history, by the markers Gmail (`gmail_quote`) and Outlook
/// (`appendonsend`, `divRplyFwdMsg`) put there. Cutting leaves tags open; the sanitiser
/// closes them.
pub fn strip_quoted_html(html: &str) -> String {
    const MARKERS: &[&str] =
        &[r#"<div class="gmail_quote"#, r#"<blockquote class="gmail_quote"#, r#"<div id="appendonsend""#, r#"<div id="divRplyFwdMsg""#];
    let lower = html.to_ascii_lowercase();
    let cut = MARKERS.iter().filter_map(|m| lower.find(&m.to_ascii_lowercase())).min().unwrap_or(html.len());
    html[..cut].to_string()
}

/// Text for a message that only has HTML: tags dropped (scripts and styles with their
/// content), references decoded.
fn html_to_text(html: &str) -> String {
    shared::html::text(html)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/mail").join(name)).unwrap()
    }

    #[test]
    fn every_fixture_parses_or_is_refused_with_a_reason() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/mail");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "eml") {
                let p = parse(&std::fs::read(&path).unwrap()).unwrap_or_else(|r| panic!("{}: {r}", path.display()));
                assert!(!p.text.is_empty() || !p.attachments.is_empty(), "{}: no content", path.display());
                assert!(p.from.ends_with("example.org"), "{}: from {}", path.display(), p.from);
                n += 1;
            }
        }
        assert_eq!(n, 10);
        let big = vec![b'a'; MAX_RAW_BYTES + 1];
        assert!(matches!(parse(&big), Err(Refused::TooLarge(n)) if n == big.len()));
        assert!(parse(b"\xff\xfe not mail").is_err_and(|r| r == Refused::NoSender));
    }

    #[test]
    fn charsets_and_encoded_words_decode() {
        let p = parse(&fixture("iso-8859-1-qp.eml")).unwrap();
        assert_eq!(p.subject, "Spørsmål om faktura æøå");
        assert_eq!(p.from_name.as_deref(), Some("Bjørn Sæther"));
        assert!(p.text.contains("spørsmål om fakturaen. Beløpet på kr 1\u{a0}200 stemmer ikke"), "{}", p.text);
        let p = parse(&fixture("windows-1252-base64.eml")).unwrap();
        assert_eq!(p.subject, "Kløktig spørsmål om pris");
        assert_eq!(p.text, "Prisen er 50 € – «for høy», sier Grå Ærlig.");
    }

    #[test]
    fn replies_lose_their_quoted_history_and_keep_their_threading() {
        let p = parse(&fixture("gmail-reply.eml")).unwrap();
        assert_eq!(p.text, "Thanks, it arrived today!");
        assert!(!p.html.as_deref().unwrap().contains("on its way"), "{:?}", p.html);
        assert_eq!(p.references[0], "0000000000000000-reply@email.amazonses.com");
        assert_eq!(p.references[1], "plain-1@mail.example.org");
        assert_eq!(p.message_id.as_deref(), Some("CAF=gmail-reply-1@mail.gmail.com"));
        let p = parse(&fixture("outlook-reply.eml")).unwrap();
        assert_eq!(p.text, "That explains it, thank you.");
        assert!(!p.html.as_deref().unwrap().contains("pre-authorisation"));
        assert_eq!(p.automatic, None);
    }

    #[test]
    fn machines_are_recognised_and_files_listed() {
        assert_eq!(parse(&fixture("auto-reply.eml")).unwrap().automatic, Some(Automatic::AutoReply));
        let b = parse(&fixture("bounce.eml")).unwrap();
        assert_eq!(b.automatic, Some(Automatic::Bounce));
        assert!(b.text.contains("could not be delivered") && !b.text.contains("Final-Recipient"), "{}", b.text);
        let p = parse(&fixture("attachments.eml")).unwrap();
        let names: Vec<_> = p.attachments.iter().map(|(a, _)| (a.filename.as_str(), a.inline, a.content_id.as_deref())).collect();
        assert_eq!(names, [("lid.png", true, Some("lid@example.org")), ("receipt.pdf", false, None)]);
        assert!(p.attachments[1].1.as_deref().unwrap().starts_with(b"%PDF"));
        assert!(p.html.unwrap().contains("cid:lid@example.org"));
    }

    #[test]
    fn a_large_message_keeps_its_files_within_the_limits() {
        let p = parse(&super::super::fixtures::large_message(20 * 1024 * 1024)).unwrap();
        assert!(p.attachments.len() >= 3);
        assert!(p.attachments.iter().all(|(a, b)| a.stored && b.as_ref().map(Vec::len) == Some(a.size as usize)));
        let total: u64 = p.attachments.iter().map(|(a, _)| a.size).sum();
        assert!(total > 14 * 1024 * 1024, "{total} bytes of files");
    }
}
