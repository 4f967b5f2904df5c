//! CSV through the `csv` crate (RFC 4180 quoting, CRLF or LF). Spreadsheet exports differ
//! by locale: Excel in most of Europe writes `;` and a UTF-8 BOM, so the delimiter is taken
//! from the request or detected from the header line. Records carry the 1-based line each
//! starts on, for error messages.

use serde::Deserialize;
use utoipa::ToSchema;

#[derive(Deserialize, ToSchema, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Delimiter {
    Comma,
    Semicolon,
    Tab,
}

impl Delimiter {
    fn byte(self) -> u8 {
        match self {
            Delimiter::Comma => b',',
            Delimiter::Semicolon => b';',
            Delimiter::Tab => b'\t',
        }
    }

    /// The candidate seen most often outside quotes on the first line; comma on a tie or none.
    pub fn detect(text: &str) -> Delimiter {
        let (mut counts, mut quoted) = ([0usize; 3], false);
        for c in text.chars() {
            match c {
                '"' => quoted = !quoted,
                '\n' | '\r' if !quoted => break,
                ',' if !quoted => counts[0] += 1,
                ';' if !quoted => counts[1] += 1,
                '\t' if !quoted => counts[2] += 1,
                _ => {}
            }
        }
        let all = [Delimiter::Comma, Delimiter::Semicolon, Delimiter::Tab];
        // max_by_key keeps the last maximum; iterate reversed so the earliest candidate wins ties.
        let (i, _) = counts.iter().enumerate().rev().max_by_key(|(_, n)| **n).unwrap_or((0, &0));
        all[i]
    }
}

#[derive(Debug, PartialEq)]
pub struct Record {
    pub line: usize,
    pub fields: Vec<String>,
}

pub fn parse(text: &str, delimiter: Option<Delimiter>) -> Result<Vec<Record>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // The crate reads an unclosed quote to the end of the text as one field; a well-formed
    // file has quotes in pairs (enclosing pairs and doubled ones), so an odd count is refused.
    if text.bytes().filter(|b| *b == b'"').count() % 2 == 1 {
        return Err("a quoted field is not closed (the text has an odd number of quotes)".into());
    }
    let delimiter = delimiter.unwrap_or_else(|| Delimiter::detect(text));
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true) // a short or long row is that row's error, reported by the worker
        .delimiter(delimiter.byte())
        .from_reader(text.as_bytes());
    let mut records = Vec::new();
    let mut rec = csv::StringRecord::new();
    let mut lines = Lines { text: text.as_bytes(), at: 0, line: 1 };
    loop {
        match reader.read_record(&mut rec) {
            Ok(false) => break,
            Ok(true) => {
                let line = rec.position().map_or(0, |p| lines.of(p.byte() as usize));
                records.push(Record { line, fields: rec.iter().map(str::to_owned).collect() });
            }
            Err(e) => {
                let line = e.position().map_or(String::new(), |p| format!("line {}: ", lines.of(p.byte() as usize)));
                return Err(format!("{line}{}", describe(e.kind())));
            }
        }
    }
    Ok(records)
}

/// The crate's own line numbers lag behind CRLF ends and skipped blank lines, so lines are
/// counted here from a record's byte offset (moving forward only: O(text) overall).
struct Lines<'a> {
    text: &'a [u8],
    at: usize,
    line: usize,
}

impl Lines<'_> {
    fn of(&mut self, mut byte: usize) -> usize {
        // The reported start may sit on the terminators before the record.
        while matches!(self.text.get(byte), Some(b'\r' | b'\n')) {
            byte += 1;
        }
        let end = byte.min(self.text.len()).max(self.at);
        self.line += self.text[self.at..end].iter().filter(|b| **b == b'\n').count();
        self.at = end;
        self.line
    }
}

fn describe(kind: &csv::ErrorKind) -> String {
    match kind {
        csv::ErrorKind::Utf8 { .. } => "not valid UTF-8".into(),
        other => format!("{other:?}").chars().take(200).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(r: &[Record]) -> Vec<Vec<&str>> {
        r.iter().map(|r| r.fields.iter().map(String::as_str).collect()).collect()
    }

    #[test]
    fn quoting_newlines_bom_and_line_numbers() {
        let t = "\u{feff}email,first_name,company\r\nada@example.com,Ada,\"Analytical, Ltd\"\n\"zoe@example.com\",\"Zoë\nSecond line\",\"Café \"\"Le Bon\"\"\"\n\nlast@example.com,,\n";
        let r = parse(t, None).unwrap();
        assert_eq!(
            f(&r),
            vec![
                vec!["email", "first_name", "company"],
                vec!["ada@example.com", "Ada", "Analytical, Ltd"],
                vec!["zoe@example.com", "Zoë\nSecond line", "Café \"Le Bon\""],
                vec!["last@example.com", "", ""],
            ]
        );
        assert_eq!(r.iter().map(|r| r.line).collect::<Vec<_>>(), vec![1, 2, 3, 6]);
    }

    #[test]
    fn detects_semicolons_and_tabs_from_the_header() {
        let t = "\u{feff}email;first_name;company\r\nola@example.no;Ola;\"Nordmann, AS\"\r\n";
        assert_eq!(Delimiter::detect(t.trim_start_matches('\u{feff}')), Delimiter::Semicolon);
        assert_eq!(
            f(&parse(t, None).unwrap()),
            vec![vec!["email", "first_name", "company"], vec!["ola@example.no", "Ola", "Nordmann, AS"]]
        );
        assert_eq!(f(&parse("email\tlabels\nx@y.z\ta;b\n", None).unwrap())[1], vec!["x@y.z", "a;b"]);
        // A quoted header cell holding the other candidate does not count.
        assert_eq!(Delimiter::detect("\"a;b;c\",d\n"), Delimiter::Comma);
        assert_eq!(Delimiter::detect("email\n"), Delimiter::Comma);
        // An explicit delimiter wins over detection.
        assert_eq!(f(&parse("email,x;y\n", Some(Delimiter::Semicolon)).unwrap()), vec![vec!["email,x", "y"]]);
    }

    #[test]
    fn no_trailing_newline_and_errors() {
        assert_eq!(f(&parse("a,b\n1,2", None).unwrap()), vec![vec!["a", "b"], vec!["1", "2"]]);
        assert_eq!(f(&parse("a\n\"\"", None).unwrap()), vec![vec!["a"], vec![""]]);
        assert!(parse("", None).unwrap().is_empty());
        assert!(parse("a,\"b\n", None).unwrap_err().contains("not closed"));
    }
}
