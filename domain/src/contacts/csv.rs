//! RFC 4180 CSV: comma-separated, `"` quotes (a doubled `""` inside quotes is one quote),
//! commas and line breaks inside quoted fields, CRLF or LF line ends, a leading UTF-8 BOM
//! ignored. Returns records with the 1-based line each starts on, for error messages.

#[derive(Debug, PartialEq)]
pub struct Record {
    pub line: usize,
    pub fields: Vec<String>,
}

pub fn parse(text: &str) -> Result<Vec<Record>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut records = Vec::new();
    let mut fields: Vec<String> = Vec::new();
    let mut field = String::new();
    let (mut line, mut start_line) = (1usize, 1usize);
    let mut in_quotes = false;
    let mut quoted = false; // this field was quoted: what follows the closing quote must be , or EOL
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if in_quotes {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => in_quotes = false,
                '\n' => {
                    line += 1;
                    field.push('\n');
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() && !quoted => {
                in_quotes = true;
                quoted = true;
            }
            '"' => return Err(format!("line {line}: a quote inside an unquoted field")),
            ',' => {
                fields.push(std::mem::take(&mut field));
                quoted = false;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                fields.push(std::mem::take(&mut field));
                quoted = false;
                if !(fields.len() == 1 && fields[0].is_empty()) {
                    records.push(Record { line: start_line, fields: std::mem::take(&mut fields) });
                }
                fields.clear();
                line += 1;
                start_line = line;
            }
            _ if quoted => return Err(format!("line {line}: text after a closing quote")),
            _ => field.push(c),
        }
    }
    if in_quotes {
        return Err(format!("line {start_line}: a quoted field is not closed"));
    }
    if !field.is_empty() || !fields.is_empty() || quoted {
        fields.push(field);
        records.push(Record { line: start_line, fields });
    }
    Ok(records)
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
        let r = parse(t).unwrap();
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
    fn no_trailing_newline_and_errors() {
        assert_eq!(f(&parse("a,b\n1,2").unwrap()), vec![vec!["a", "b"], vec!["1", "2"]]);
        assert_eq!(f(&parse("a\n\"\"").unwrap()), vec![vec!["a"], vec![""]]);
        assert!(parse("a,\"b\n").unwrap_err().contains("not closed"));
        assert!(parse("a,b\"c\n").is_err());
        assert!(parse("\"a\"b\n").is_err());
        assert!(parse("").unwrap().is_empty());
    }
}
