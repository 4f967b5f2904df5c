//! HTML from email, made safe to store and show (`sanitise`) or read as text (`text`).
//!
//! The input is read leniently and only allowlisted elements and attributes are kept; every
//! kept piece is written anew: text and attribute values escaped and double-quoted, tags
//! balanced, nothing copied through raw. So a parse that differs from a browser's can cost a
//! message some formatting but cannot let markup or a script through; that is what lets a
//! small tokenizer replace a full HTML5 parser here (ammonia with html5ever was 0.3 MB of the
//! helpdesk binary). URL attributes are decoded, checked against the allowed schemes and
//! written with every `&` escaped, so the browser reads exactly the URL that was checked.
//!
//! The output also parses in a browser into the elements it names, in the order it names
//! them, so its end tags close only its own elements even where it is pasted into a larger
//! page: wherever a browser would close an element by itself (a `<p>` before a `<div>`, an
//! `<li>` before the next, a table cell before the next cell) the output closes it first, a
//! table gets the `<tbody>` and `<tr>` a browser would add, and what a browser would move out
//! of a table or ignore (a `<div>` between rows, a `<td>` outside a table) is left out.

/// Elements kept (ammonia's default set), with their attributes besides `lang` and `title`.
const ELEMENTS: &[(&str, &[&str])] = &[
    ("a", &["href", "hreflang"]),
    ("abbr", &[]),
    ("acronym", &[]),
    ("area", &["alt", "coords", "href", "shape"]),
    ("article", &[]),
    ("aside", &[]),
    ("b", &[]),
    ("bdi", &[]),
    ("bdo", &["dir"]),
    ("blockquote", &["cite"]),
    ("br", &[]),
    ("caption", &[]),
    ("center", &[]),
    ("cite", &[]),
    ("code", &[]),
    ("data", &[]),
    ("dd", &[]),
    ("del", &["cite", "datetime"]),
    ("details", &[]),
    ("dfn", &[]),
    ("div", &[]),
    ("dl", &[]),
    ("dt", &[]),
    ("em", &[]),
    ("figcaption", &[]),
    ("figure", &[]),
    ("footer", &[]),
    ("h1", &[]),
    ("h2", &[]),
    ("h3", &[]),
    ("h4", &[]),
    ("h5", &[]),
    ("h6", &[]),
    ("header", &[]),
    ("hgroup", &[]),
    ("hr", &["align", "size", "width"]),
    ("i", &[]),
    ("img", &["align", "alt", "height", "src", "width"]),
    ("ins", &["cite", "datetime"]),
    ("kbd", &[]),
    ("li", &[]),
    ("map", &["name"]),
    ("mark", &[]),
    ("nav", &[]),
    ("ol", &["start"]),
    ("p", &[]),
    ("pre", &[]),
    ("q", &["cite"]),
    ("rp", &[]),
    ("rt", &[]),
    ("rtc", &[]),
    ("ruby", &[]),
    ("s", &[]),
    ("samp", &[]),
    ("small", &[]),
    ("span", &[]),
    ("strike", &[]),
    ("strong", &[]),
    ("sub", &[]),
    ("summary", &[]),
    ("sup", &[]),
    ("table", &["align", "char", "charoff", "summary"]),
    ("tbody", &["align", "char", "charoff"]),
    ("td", &["align", "char", "charoff", "colspan", "headers", "rowspan"]),
    ("tfoot", &["align", "char", "charoff"]),
    ("th", &["abbr", "align", "char", "charoff", "colspan", "headers", "rowspan", "scope"]),
    ("thead", &["align", "char", "charoff"]),
    ("time", &[]),
    ("tr", &["align", "char", "charoff"]),
    ("tt", &[]),
    ("u", &[]),
    ("ul", &["type"]),
    ("var", &[]),
    ("wbr", &[]),
];

/// Elements without content or end tag.
const VOID: &[&str] = &["area", "br", "hr", "img", "wbr"];

/// A table's own elements; anything else directly inside one a browser moves before it.
const TABLE_PARTS: &[&str] = &["table", "tbody", "thead", "tfoot", "tr"];
const SECTIONS: &[&str] = &["tbody", "thead", "tfoot"];

/// Where a browser stops looking for an element to close (its "scope" boundaries).
const BOUNDARIES: &[&str] = &["table", "td", "th", "caption"];

/// Start tags before which a browser closes an open `<p>`.
const CLOSE_P: &[&str] = &[
    "article",
    "aside",
    "blockquote",
    "center",
    "details",
    "div",
    "dl",
    "figcaption",
    "figure",
    "footer",
    "header",
    "hgroup",
    "nav",
    "ol",
    "p",
    "summary",
    "ul",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "table",
    "hr",
    "li",
    "dd",
    "dt",
];
const HEADINGS: &[&str] = &["h1", "h2", "h3", "h4", "h5", "h6"];

/// Elements whose content is not text to show (scripts, styles, frames, form values): dropped
/// with their content, up to their end tag.
const DROPPED_WITH_CONTENT: &[&str] =
    &["script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "noscript", "template", "object", "svg", "math"];

/// Open elements kept at most; deeper ones are left out (their text stays).
const MAX_DEPTH: usize = 256;

/// Attributes read of one tag at most.
const MAX_ATTRIBUTES: usize = 64;

/// Attributes holding a URL, and the schemes they may have (a URL without one is relative).
const URL_ATTRIBUTES: &[&str] = &["href", "src", "cite"];
const SCHEMES: &[&str] = &["http", "https", "mailto", "cid"];

/// Every kept link opens without a referrer or the opener's window.
const LINK_REL: &str = "noopener noreferrer nofollow";

/// The HTML a message is stored and shown with: allowlisted elements and attributes only, no
/// scripts, styles, forms or frames, links with `http`/`https`/`mailto` (or relative) URLs
/// and `rel="noopener noreferrer nofollow"`, and images only from the message itself (`cid:`;
/// remote images are tracking pixels more often than not).
pub fn sanitise(html: &str) -> String {
    // Escapes and links' `rel` grow the output: it stops at a bound, whatever the input.
    let cap = html.len().saturating_mul(2).saturating_add(65_536);
    let mut w = Writer { out: String::with_capacity(html.len()), open: vec![], cap };
    for token in Tokens::new(html) {
        if w.out.len() >= cap {
            break;
        }
        match token {
            Token::Text(t) => escape(t, Context::Text, &mut w.out, cap),
            Token::Start { name, attrs } => {
                let Some((name, allowed)) = ELEMENTS.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) else { continue };
                if w.prepare(name) {
                    w.start(name, allowed, &attrs);
                }
            }
            Token::End(name) => {
                // Close up to the matching open element; an end tag nothing opened is dropped.
                if let Some(at) = w.open.iter().rposition(|n| n.eq_ignore_ascii_case(name)) {
                    w.close_to(at);
                }
            }
        }
    }
    w.close_to(0);
    w.out
}

/// The output and its open elements, as a browser's parser will have them.
struct Writer {
    out: String,
    open: Vec<&'static str>,
    /// Escaping stops at this output length (the end tags still follow).
    cap: usize,
}

impl Writer {
    /// The nearest open element named in `names`, unless one of `stop` comes first.
    fn find(&self, names: &[&str], stop: &[&str]) -> Option<usize> {
        for (at, n) in self.open.iter().enumerate().rev() {
            if names.contains(n) {
                return Some(at);
            }
            if stop.contains(n) {
                return None;
            }
        }
        None
    }

    /// Close the open elements from `at` up, innermost first.
    fn close_to(&mut self, at: usize) {
        for n in self.open.drain(at..).rev() {
            self.out.push_str("</");
            self.out.push_str(n);
            self.out.push('>');
        }
    }

    fn close_found(&mut self, names: &[&str], stop: &[&str]) {
        if let Some(at) = self.find(names, stop) {
            self.close_to(at);
        }
    }

    fn implied(&mut self, name: &'static str) {
        self.out.push_str(&format!("<{name}>"));
        self.open.push(name);
    }

    /// Close what a browser would close before this start tag, add what it would add; false
    /// when a browser would not put the element here (so it is left out, its text kept).
    fn prepare(&mut self, name: &'static str) -> bool {
        // The element and what a browser adds for it must fit under the depth limit.
        let fits = |w: &Self, added: usize| w.open.len() + added < MAX_DEPTH;
        match name {
            "td" | "th" => {
                self.close_found(&["td", "th"], &["table"]);
                match self.open.last().copied() {
                    Some("tr") if fits(self, 0) => {}
                    Some(s) if SECTIONS.contains(&s) && fits(self, 1) => self.implied("tr"),
                    Some("table") if fits(self, 2) => {
                        self.implied("tbody");
                        self.implied("tr");
                    }
                    _ => return false,
                }
            }
            "tr" => {
                self.close_found(&["tr", "caption"], &["table"]);
                match self.open.last().copied() {
                    Some(s) if SECTIONS.contains(&s) && fits(self, 0) => {}
                    Some("table") if fits(self, 1) => self.implied("tbody"),
                    _ => return false,
                }
            }
            "tbody" | "thead" | "tfoot" | "caption" => {
                // Directly in the nearest table, whatever of it is open.
                let Some(t) = self.open.iter().rposition(|n| *n == "table") else { return false };
                self.close_to(t + 1);
                return fits(self, 0);
            }
            _ if self.open.last().is_some_and(|t| TABLE_PARTS.contains(t)) => return false,
            _ => {
                if CLOSE_P.contains(&name) {
                    self.close_found(&["p"], BOUNDARIES);
                }
                match name {
                    h if HEADINGS.contains(&h) => self.close_found(HEADINGS, BOUNDARIES),
                    "li" => self.close_found(&["li"], &["ul", "ol", "table", "td", "th", "caption"]),
                    "dd" | "dt" => self.close_found(&["dd", "dt"], &["dl", "table", "td", "th", "caption"]),
                    "a" => self.close_found(&["a"], BOUNDARIES),
                    "rp" | "rt" | "rtc" => {
                        // With a ruby in scope, the elements a browser ends implicitly go first.
                        let implied: &[&str] =
                            if name == "rtc" { &["dd", "dt", "li", "p", "rp", "rt", "rtc"] } else { &["dd", "dt", "li", "p", "rp", "rt"] };
                        let own = &implied[4..];
                        while let Some(at) = self.find(own, &["ruby"]) {
                            self.close_to(at);
                        }
                        if self.find(&["ruby"], BOUNDARIES).is_some() {
                            while self.open.last().is_some_and(|t| implied.contains(t)) {
                                self.close_to(self.open.len() - 1);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        fits(self, 0)
    }

    fn start(&mut self, name: &'static str, allowed: &[&'static str], attrs: &[(&str, &str)]) {
        let out = &mut self.out;
        out.push('<');
        out.push_str(name);
        let mut seen: Vec<&str> = vec![];
        for (key, value) in attrs {
            let Some(key) = ["lang", "title"].iter().chain(allowed.iter()).find(|a| a.eq_ignore_ascii_case(key)) else { continue };
            if seen.contains(key) {
                continue; // the first of a repeated attribute counts, as in browsers
            }
            seen.push(key);
            let (value, context) = if URL_ATTRIBUTES.contains(key) {
                let Some(url) = allowed_url(value, name == "img" && *key == "src") else { continue };
                (std::borrow::Cow::Owned(url), Context::Url)
            } else {
                (std::borrow::Cow::Borrowed(*value), Context::Attribute)
            };
            out.push_str(&format!(" {key}=\""));
            escape(&value, context, out, self.cap);
            out.push('"');
        }
        if name == "a" || name == "area" {
            out.push_str(&format!(" rel=\"{LINK_REL}\""));
        }
        out.push('>');
        if !VOID.contains(&name) {
            self.open.push(name);
        }
    }
}

/// The text of HTML: tags dropped (scripts and styles with their content), a line break
/// where a block or a `<br>` was, character references decoded, a non-breaking space a
/// space, lines trimmed and blank ones dropped. It is text: never to be written into HTML as is.
pub fn text(html: &str) -> String {
    const BREAKS: &[&str] = &[
        "br",
        "p",
        "div",
        "li",
        "tr",
        "table",
        "ul",
        "ol",
        "dl",
        "dd",
        "dt",
        "blockquote",
        "pre",
        "hr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
    ];
    let mut out = String::with_capacity(html.len());
    for token in Tokens::new(html) {
        match token {
            Token::Text(t) => out.push_str(&decode(t).replace('\u{a0}', " ")),
            Token::Start { name, .. } | Token::End(name) if BREAKS.iter().any(|b| b.eq_ignore_ascii_case(name)) => out.push('\n'),
            Token::Start { name, .. } if name.eq_ignore_ascii_case("td") || name.eq_ignore_ascii_case("th") => out.push(' '),
            _ => {}
        }
    }
    out.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n")
}

enum Token<'a> {
    Text(&'a str),
    Start { name: &'a str, attrs: Vec<(&'a str, &'a str)> },
    End(&'a str),
}

/// A lenient HTML tokenizer: text, start tags with their attributes, end tags; comments,
/// doctypes and processing instructions skipped; the elements of `DROPPED_WITH_CONTENT`
/// skipped with their content.
struct Tokens<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Tokens<'a> {
    fn new(s: &'a str) -> Self {
        Self { s, i: 0 }
    }

    fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }

    /// Skip past `end` (or to the end of the input).
    fn skip_past(&mut self, end: &str) {
        self.i = self.rest().find(end).map_or(self.s.len(), |at| self.i + at + end.len());
    }

    /// A tag's name at the position: ASCII letters, digits, `-` and `:` after a letter.
    fn name(&mut self) -> &'a str {
        let rest = self.rest();
        let len = rest.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b':').count();
        self.i += len;
        &rest[..len]
    }

    fn skip_space(&mut self) {
        self.i += self.rest().bytes().take_while(|b| b.is_ascii_whitespace() || *b == b'/').count();
    }

    /// Attributes up to the tag's `>` (consumed).
    fn attributes(&mut self) -> Vec<(&'a str, &'a str)> {
        let mut attrs = vec![];
        loop {
            self.skip_space();
            let rest = self.rest();
            match rest.bytes().next() {
                None => return attrs,
                Some(b'>') => {
                    self.i += 1;
                    return attrs;
                }
                _ => {}
            }
            // A name runs to whitespace, `/`, `>` or `=` (at least one character, so `=x` moves on).
            // It ends at an ASCII byte or the input's end, so on a character boundary.
            let len = rest.bytes().skip(1).take_while(|b| !b.is_ascii_whitespace() && !b"/>=".contains(b)).count() + 1;
            let key = &rest[..len];
            self.i += len;
            self.i += self.rest().bytes().take_while(u8::is_ascii_whitespace).count();
            let mut value = "";
            if self.rest().starts_with('=') {
                self.i += 1;
                self.i += self.rest().bytes().take_while(u8::is_ascii_whitespace).count();
                let rest = self.rest();
                match rest.bytes().next() {
                    Some(q @ (b'"' | b'\'')) => {
                        let end = rest[1..].find(q as char).map_or(rest.len(), |e| e + 1);
                        value = &rest[1..end];
                        self.i += (end + 1).min(rest.len());
                    }
                    _ => {
                        let end = rest.bytes().take_while(|b| !b.is_ascii_whitespace() && *b != b'>').count();
                        value = &rest[..end];
                        self.i += end;
                    }
                }
            }
            if attrs.len() < MAX_ATTRIBUTES {
                attrs.push((key, value));
            }
        }
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        loop {
            let rest = self.rest();
            if rest.is_empty() {
                return None;
            }
            let bytes = rest.as_bytes();
            if bytes[0] != b'<' {
                let end = rest.find('<').unwrap_or(rest.len());
                self.i += end;
                return Some(Token::Text(&rest[..end]));
            }
            let next = bytes.get(1).copied();
            if rest.starts_with("<!--") {
                self.i += 4;
                self.skip_past("-->");
            } else if matches!(next, Some(b'!' | b'?')) {
                self.skip_past(">");
            } else if next == Some(b'/') && bytes.get(2).is_some_and(u8::is_ascii_alphabetic) {
                self.i += 2;
                let name = self.name();
                self.skip_past(">");
                return Some(Token::End(name));
            } else if next.is_some_and(|b| b.is_ascii_alphabetic()) {
                self.i += 1;
                let name = self.name();
                let attrs = self.attributes();
                if let Some(dropped) = DROPPED_WITH_CONTENT.iter().find(|d| d.eq_ignore_ascii_case(name)) {
                    self.skip_element(dropped);
                    continue;
                }
                return Some(Token::Start { name, attrs });
            } else if next == Some(b'/') {
                // `</` not followed by a letter: a bogus comment in HTML.
                self.skip_past(">");
            } else {
                // A `<` that starts no tag is text.
                self.i += 1;
                return Some(Token::Text("<"));
            }
        }
    }
}

impl Tokens<'_> {
    /// Skip an element's content and its end tag (`</name` followed by a space, `/` or `>`).
    fn skip_element(&mut self, name: &str) {
        let mut from = self.i;
        while let Some(at) = self.s[from..].find("</") {
            let tag = from + at + 2;
            let after = tag + name.len();
            let named = self.s.get(tag..after).is_some_and(|n| n.eq_ignore_ascii_case(name));
            if named && self.s.as_bytes().get(after).is_none_or(|b| b.is_ascii_whitespace() || *b == b'/' || *b == b'>') {
                self.i = after;
                self.skip_past(">");
                return;
            }
            from = tag;
        }
        self.i = self.s.len();
    }
}

/// The length of a well-formed character reference at the start of `s` (`&name;`, `&#10;`,
/// `&#x1F600;`), which a browser decodes into a character and which may therefore stay.
fn reference_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let (start, part): (usize, fn(&u8) -> bool) = match (b.get(1), b.get(2)) {
        (Some(b'#'), Some(b'x' | b'X')) => (3, u8::is_ascii_hexdigit),
        (Some(b'#'), _) => (2, u8::is_ascii_digit),
        (Some(c), _) if c.is_ascii_alphabetic() => (1, u8::is_ascii_alphanumeric),
        _ => return None,
    };
    let len = b[start..].iter().take(32).take_while(|c| part(c)).count();
    (len > 0 && b.get(start + len) == Some(&b';')).then_some(start + len + 1)
}

/// Where escaped text goes.
#[derive(Clone, Copy, PartialEq)]
enum Context {
    /// Text content: `<`, `>` and any `&` that starts no character reference escaped.
    Text,
    /// A non-URL attribute value in double quotes: as text, and `"` too.
    Attribute,
    /// A decoded URL in double quotes: every `&` escaped, so the browser reads it as checked.
    Url,
}

/// `s` escaped for its context, until the output reaches `cap`; NUL becomes U+FFFD.
fn escape(s: &str, context: Context, out: &mut String, cap: usize) {
    let mut i = 0;
    while let Some(c) = s[i..].chars().next().filter(|_| out.len() < cap) {
        match c {
            '&' => match reference_len(&s[i..]).filter(|_| context != Context::Url) {
                Some(len) => {
                    out.push_str(&s[i..i + len]);
                    i += len;
                    continue;
                }
                None => out.push_str("&amp;"),
            },
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if context != Context::Text => out.push_str("&quot;"),
            '\0' => out.push('\u{fffd}'),
            c => out.push(c),
        }
        i += c.len_utf8();
    }
}

/// An attribute's URL, decoded as a browser would read it, if its scheme is allowed (`cid:`
/// only for an image's source).
fn allowed_url(raw: &str, cid_only: bool) -> Option<String> {
    // URL parsers drop tabs and newlines anywhere, and controls and spaces around the URL.
    let url: String = decode(raw).chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
    let url = url.trim_matches(|c: char| c <= ' ').to_string();
    let scheme = url.find(':').filter(|at| !url[..*at].contains(['/', '?', '#'])).map(|at| url[..at].to_ascii_lowercase());
    let ok = match (&scheme, cid_only) {
        (Some(s), true) => s == "cid",
        (None, true) => false,
        (Some(s), false) => SCHEMES.contains(&s.as_str()),
        (None, false) => true,
    };
    ok.then_some(url)
}

/// Named references decoded besides the numeric ones: markup, quotes, spaces and dashes,
/// the punctuation a URL scheme could be spelled with, and Latin-1 (`LATIN1`).
const NAMED: &[(&str, char)] = &[
    ("amp", '&'),
    ("lt", '<'),
    ("gt", '>'),
    ("quot", '"'),
    ("apos", '\''),
    ("colon", ':'),
    ("Tab", '\t'),
    ("NewLine", '\n'),
    ("sol", '/'),
    ("period", '.'),
    ("comma", ','),
    ("semi", ';'),
    ("excl", '!'),
    ("quest", '?'),
    ("num", '#'),
    ("lpar", '('),
    ("rpar", ')'),
    ("equals", '='),
    ("plus", '+'),
    ("percnt", '%'),
    ("commat", '@'),
    ("lowbar", '_'),
    ("hyphen", '\u{2010}'),
    ("ensp", '\u{2002}'),
    ("emsp", '\u{2003}'),
    ("thinsp", '\u{2009}'),
    ("zwnj", '\u{200c}'),
    ("zwj", '\u{200d}'),
    ("ndash", '\u{2013}'),
    ("mdash", '\u{2014}'),
    ("lsquo", '\u{2018}'),
    ("rsquo", '\u{2019}'),
    ("sbquo", '\u{201a}'),
    ("ldquo", '\u{201c}'),
    ("rdquo", '\u{201d}'),
    ("bdquo", '\u{201e}'),
    ("bull", '\u{2022}'),
    ("hellip", '\u{2026}'),
    ("euro", '\u{20ac}'),
    ("trade", '\u{2122}'),
];

/// HTML 4's names of U+00A0 to U+00FF, in order.
const LATIN1: [&str; 96] = [
    "nbsp", "iexcl", "cent", "pound", "curren", "yen", "brvbar", "sect", "uml", "copy", "ordf", "laquo", "not", "shy", "reg", "macr",
    "deg", "plusmn", "sup2", "sup3", "acute", "micro", "para", "middot", "cedil", "sup1", "ordm", "raquo", "frac14", "frac12", "frac34",
    "iquest", "Agrave", "Aacute", "Acirc", "Atilde", "Auml", "Aring", "AElig", "Ccedil", "Egrave", "Eacute", "Ecirc", "Euml", "Igrave",
    "Iacute", "Icirc", "Iuml", "ETH", "Ntilde", "Ograve", "Oacute", "Ocirc", "Otilde", "Ouml", "times", "Oslash", "Ugrave", "Uacute",
    "Ucirc", "Uuml", "Yacute", "THORN", "szlig", "agrave", "aacute", "acirc", "atilde", "auml", "aring", "aelig", "ccedil", "egrave",
    "eacute", "ecirc", "euml", "igrave", "iacute", "icirc", "iuml", "eth", "ntilde", "ograve", "oacute", "ocirc", "otilde", "ouml",
    "divide", "oslash", "ugrave", "uacute", "ucirc", "uuml", "yacute", "thorn", "yuml",
];

/// What browsers read for the references `&#128;` to `&#159;` (HTML's table).
const WINDOWS_1252: [char; 32] = [
    '\u{20ac}', '\u{81}', '\u{201a}', '\u{192}', '\u{201e}', '\u{2026}', '\u{2020}', '\u{2021}', '\u{2c6}', '\u{2030}', '\u{160}',
    '\u{2039}', '\u{152}', '\u{8d}', '\u{17d}', '\u{8f}', '\u{90}', '\u{2018}', '\u{2019}', '\u{201c}', '\u{201d}', '\u{2022}', '\u{2013}',
    '\u{2014}', '\u{2dc}', '\u{2122}', '\u{161}', '\u{203a}', '\u{153}', '\u{9d}', '\u{17e}', '\u{178}',
];

fn named(name: &str) -> Option<char> {
    NAMED.iter().find(|(n, _)| *n == name).map(|(_, c)| *c).or_else(|| {
        let at = LATIN1.iter().position(|n| *n == name)?;
        char::from_u32(0xa0 + at as u32)
    })
}

/// Character references decoded: numeric ones (with or without `;`, as browsers read them;
/// invalid code points become U+FFFD) and the names above with `;`. Others stay as written.
fn decode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let b = rest.as_bytes();
        let decoded = if b.get(1) == Some(&b'#') {
            let hex = matches!(b.get(2), Some(b'x' | b'X'));
            let start = if hex { 3 } else { 2 };
            let len = b[start..].iter().take_while(|c| if hex { c.is_ascii_hexdigit() } else { c.is_ascii_digit() }).count();
            (len > 0).then(|| {
                let n = u32::from_str_radix(&rest[start..start + len], if hex { 16 } else { 10 });
                let c = match n {
                    // References to C1 controls mean Windows-1252's characters, as browsers read them.
                    Ok(n @ 0x80..=0x9f) => WINDOWS_1252[n as usize - 0x80],
                    n => n.ok().and_then(char::from_u32).filter(|c| *c != '\0').unwrap_or('\u{fffd}'),
                };
                let end = start + len;
                (c, if b.get(end) == Some(&b';') { end + 1 } else { end })
            })
        } else {
            let len = b[1..].iter().take(32).take_while(|c| c.is_ascii_alphanumeric()).count();
            (len > 0 && b.get(1 + len) == Some(&b';')).then(|| named(&rest[1..1 + len]).map(|c| (c, len + 2))).flatten()
        };
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_text_and_links_and_loses_scripts_handlers_and_remote_content() {
        let dirty = r#"<p onclick="steal()">Hi <b>there</b><script>alert(1)</script></p><img src="https://t.example/pixel.gif"><img src="cid:logo"><a href="javascript:alert(1)">x</a><a href="https://example.com">ok</a><iframe src="https://evil"></iframe><style>p{}</style>"#;
        assert_eq!(
            sanitise(dirty),
            r#"<p>Hi <b>there</b></p><img><img src="cid:logo"><a rel="noopener noreferrer nofollow">x</a><a href="https://example.com" rel="noopener noreferrer nofollow">ok</a>"#
        );
    }

    #[test]
    fn urls_are_checked_as_the_browser_reads_them() {
        for href in [
            "javascript:alert(1)",
            " JaVaScRiPt:alert(1)",
            "java\tscript:alert(1)",
            "jav&#x61;script:alert(1)",
            "jav&#97script:alert(1)",
            "&#0000106avascript:alert(1)",
            "javascript&colon;alert(1)",
            "vbscript:x",
            "data:text/html,<script>alert(1)</script>",
            "\u{1}javascript:alert(1)",
        ] {
            let out = sanitise(&format!(r#"<a href="{href}">x</a>"#));
            assert_eq!(out, r#"<a rel="noopener noreferrer nofollow">x</a>"#, "{href}");
        }
        // An unknown reference is written with its `&` escaped: the browser reads it as text.
        assert_eq!(
            sanitise(r#"<a href="https://x.example/&unknown;">a</a>"#),
            r#"<a href="https://x.example/&amp;unknown;" rel="noopener noreferrer nofollow">a</a>"#
        );
        assert_eq!(
            sanitise(r#"<a href="https://x.example/?a=1&b=2&amp;c=3">q</a>"#),
            r#"<a href="https://x.example/?a=1&amp;b=2&amp;c=3" rel="noopener noreferrer nofollow">q</a>"#
        );
        assert_eq!(
            sanitise("<a href=mailto:a@b.example>m</a>"),
            r#"<a href="mailto:a@b.example" rel="noopener noreferrer nofollow">m</a>"#
        );
        assert_eq!(sanitise(r#"<img src="CID:x" onerror="alert(1)">"#), r#"<img src="CID:x">"#);
        assert_eq!(sanitise(r#"<img src="/relative.png">"#), "<img>");
    }

    #[test]
    fn output_is_balanced_and_nothing_is_copied_raw() {
        assert_eq!(sanitise("<div><b>open"), "<div><b>open</b></div>");
        assert_eq!(sanitise("<b><i>x</b>y</i></p>"), "<b><i>x</i></b>y");
        assert_eq!(sanitise("a < b > c & d &amp; &eacute; &#233;"), "a &lt; b &gt; c &amp; d &amp; &eacute; &#233;");
        assert_eq!(sanitise(r#"<p title='a"b<c>' lang=en>t</p>"#), r#"<p title="a&quot;b&lt;c&gt;" lang="en">t</p>"#);
        assert_eq!(sanitise(r#"<P TITLE="x" title="y">t</P>"#), r#"<p title="x">t</p>"#);
        // Split and nested tricks leave text at most.
        assert_eq!(sanitise("<scr<script>ipt>alert(1)</script>"), "ipt&gt;alert(1)");
        assert_eq!(sanitise("<<script>script>alert(1)</script>"), "&lt;");
        assert_eq!(sanitise("<svg><script>alert(1)</script></svg><math><mi>x</math>t"), "t");
        assert_eq!(sanitise("<!-- <script>alert(1)</script> -->t<!x>u<?y>v</ z>w"), "tuvw");
        assert_eq!(sanitise("<style>a{}</STYLE >b<script>never closed"), "b");
        assert_eq!(sanitise("<form><input value=x><button>go</button></form>"), "go");
        assert_eq!(sanitise("<a href='x' <b>x"), r#"<a href="x" rel="noopener noreferrer nofollow">x</a>"#);
        assert_eq!(sanitise("<p\u{e9}>é</p>"), "<p>é</p>");
        assert_eq!(sanitise("x\0y"), "x\u{fffd}y");
    }

    /// What a browser closes or moves by itself is closed or left out first, so the output's
    /// end tags close its own elements only (these broke out of a wrapping `<div>`).
    #[test]
    fn output_parses_into_the_elements_it_names() {
        assert_eq!(sanitise("<li><div><li>a</li></div>OUT"), "<li><div></div></li><li>a</li>OUT");
        assert_eq!(sanitise("<dd><div><dt>a</dt></div>OUT"), "<dd><div></div></dd><dt>a</dt>OUT");
        assert_eq!(sanitise("<ul><li>a<ul><li>b</ul></ul>"), "<ul><li>a<ul><li>b</li></ul></li></ul>");
        assert_eq!(sanitise("<p>a<div>b</div></p>"), "<p>a</p><div>b</div>");
        assert_eq!(sanitise("<p><b>a<table><tr><td>c</table>"), "<p><b>a</b></p><table><tbody><tr><td>c</td></tr></tbody></table>");
        assert_eq!(sanitise("<table><div><table></div>OUT"), "<table>OUT</table>");
        assert_eq!(
            sanitise("<table><td>a<td>b<tr><th>c</table>"),
            "<table><tbody><tr><td>a</td><td>b</td></tr><tr><th>c</th></tr></tbody></table>"
        );
        assert_eq!(sanitise("<td>x</td><tr>y"), "xy");
        assert_eq!(sanitise("<table><tr><td><div><td>z"), "<table><tbody><tr><td><div></div></td><td>z</td></tr></tbody></table>");
        assert_eq!(
            sanitise("<a href=a>1<div><a href=b>2</a></div>"),
            r#"<a href="a" rel="noopener noreferrer nofollow">1<div></div></a><a href="b" rel="noopener noreferrer nofollow">2</a>"#
        );
        assert_eq!(sanitise("<h1>a<h2>b"), "<h1>a</h1><h2>b</h2>");
        assert_eq!(sanitise("<table><caption>t<tr><td>x"), "<table><caption>t</caption><tbody><tr><td>x</td></tr></tbody></table>");
        assert_eq!(sanitise(r#"<area href="https://x.example">"#), r#"<area href="https://x.example" rel="noopener noreferrer nofollow">"#);
        // Ruby parts end what a browser ends for them, down to the ruby.
        assert_eq!(
            sanitise("<dd><dl><div><ruby><dd><rt></dd></ruby></div>OUT"),
            "<dd><dl><div><ruby><dd></dd><rt></rt></ruby></div></dl></dd>OUT"
        );
        assert_eq!(sanitise("<ruby><p>x<rt>y"), "<ruby><p>x</p><rt>y</rt></ruby>");
        assert_eq!(sanitise("<ruby><rtc><rp><rtc>x"), "<ruby><rtc><rp></rp></rtc><rtc>x</rtc></ruby>");
    }

    /// Hostile shapes cost time and memory in proportion to the input.
    #[test]
    fn deep_wide_and_long_inputs_stay_bounded() {
        let n = 50_000;
        let deep = format!("{}{}", "<b>".repeat(n), "</i>".repeat(n));
        let out = sanitise(&deep);
        assert_eq!(out.matches("<b>").count(), MAX_DEPTH);
        let wide = format!("<p {}>x</p>", "a ".repeat(n));
        assert_eq!(sanitise(&wide), "<p>x</p>");
        // What a browser adds to a table counts against the depth too, so a second pass agrees.
        let edge = format!("{}<a><table><td>x", "<b>".repeat(MAX_DEPTH - 2));
        assert_eq!(sanitise(&sanitise(&edge)), sanitise(&edge));
        let escapes = ">".repeat(n);
        assert!(sanitise(&escapes).len() <= escapes.len() * 2 + 65_536 + 8);
        let links = "<a>".repeat(n);
        assert!(sanitise(&links).len() <= links.len() * 2 + 65_536 + 64);
        assert_eq!(text("&#128;&#150;&#x9F;"), "\u{20ac}\u{2013}\u{178}");
    }

    #[test]
    fn text_drops_tags_and_decodes_references() {
        assert_eq!(text("<p>Hello</p><p>World<br>again</p><table><tr><td>a<td>b</table>"), "Hello\nWorld\nagain\na b");
        assert_eq!(
            text(
                "<p>Hello&nbsp;<b>Ann</b> &amp; co</p>\n<script>x()</script>\n  <div>Fish &lt;3 &eacute;t&#233; &rsquo;&#x2019; &zz;</div>"
            ),
            "Hello Ann & co\nFish <3 été ’’ &zz;"
        );
    }
}
