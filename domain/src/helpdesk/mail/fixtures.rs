//! Generated messages the tests and the benchmark share (too large to commit).

/// A multipart/mixed message of about `bytes` bytes: a text part and base64 files of up to
/// 5 MiB each (decoded), the kind of message a customer sends with photos attached.
pub fn large_message(bytes: usize) -> Vec<u8> {
    use base64::Engine;
    let mut out = String::from(concat!(
        "From: Kari Nordmann <customer@example.org>\r\n",
        "To: support@example.com\r\n",
        "Subject: Photos of the damage\r\n",
        "Message-ID: <large-1@mail.example.org>\r\n",
        "MIME-Version: 1.0\r\n",
        "Content-Type: multipart/mixed; boundary=\"big\"\r\n\r\n",
        "--big\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe photos are attached.\r\n",
    ));
    let mut n = 0;
    while out.len() < bytes {
        n += 1;
        // base64 grows 4/3, plus a CRLF per 76 characters.
        let left = (bytes - out.len()).saturating_sub(200) * 3 / 4 * 76 / 78;
        if left < 1024 {
            break;
        }
        let raw: Vec<u8> = (0..left.clamp(1, 5 * 1024 * 1024)).map(|i| (i * 7 + n) as u8).collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&raw);
        out.push_str(&format!(
            "--big\r\nContent-Type: image/jpeg\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"photo-{n}.jpg\"\r\n\r\n"
        ));
        for line in b64.as_bytes().chunks(76) {
            out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            out.push_str("\r\n");
        }
    }
    out.push_str("--big--\r\n");
    out.into_bytes()
}
