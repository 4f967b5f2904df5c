//! Request body parsing and field validation that collects every problem, so a client fixes
//! all fields in one round instead of one per request.

use crate::error::{ApiError, ErrorCode, ErrorDetail};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use std::collections::BTreeMap;

/// Parse a JSON body into `T`. Malformed JSON and type errors become VALIDATION_ERROR naming the field.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(ErrorCode::ValidationError, "the request body must be a JSON object")
            .with_details(vec![ErrorDetail::field("body", "required")]));
    }
    // Every body of the contract is an object; serde would also read a struct from an array
    // (`[]` as an empty PATCH), so the shape is checked first.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::new(ErrorCode::ValidationError, "the request body must be a JSON object")
            .with_details(vec![ErrorDetail::field("body", "must be a JSON object")]));
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::new(ErrorCode::ValidationError, format!("malformed JSON: {inner}"))
                .with_details(vec![ErrorDetail::field("body", "malformed JSON")])
        } else {
            // serde's message carries "at line X column Y", which means nothing to API clients.
            let msg = inner.to_string();
            let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
            // A missing field is named as the field itself, below the object that lacks it.
            let missing = msg.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`'));
            let field = match (missing, path.as_str()) {
                (Some(name), ".") => name.to_string(),
                (Some(name), p) => format!("{p}.{name}"),
                (None, ".") => "body".to_string(),
                (None, _) => path,
            };
            let msg = if missing.is_some() { "is required".to_string() } else { msg };
            ApiError::new(ErrorCode::ValidationError, format!("{field}: {msg}")).with_details(vec![ErrorDetail::field(field, msg)])
        }
    })
}

/// A PATCH field: absent (leave alone), `null` (clear) or a value.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Patch<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => Patch::Null,
            Some(v) => Patch::Value(v),
        })
    }
}

impl<T> Patch<T> {
    pub fn is_absent(&self) -> bool {
        matches!(self, Patch::Absent)
    }
    /// For a field that cannot be cleared: the new value, `None` when absent; `null` is
    /// recorded as "cannot be null".
    pub fn required(self, errs: &mut Errors, field: &str) -> Option<T> {
        match self {
            Patch::Absent => None,
            Patch::Null => {
                errs.add(field, "cannot be null");
                None
            }
            Patch::Value(v) => Some(v),
        }
    }
    /// For a collection: the new value, the empty one for `null`, `None` when absent.
    pub fn or_empty(self) -> Option<T>
    where
        T: Default,
    {
        match self {
            Patch::Absent => None,
            Patch::Null => Some(T::default()),
            Patch::Value(v) => Some(v),
        }
    }
    /// The same change of another type (a checked string becoming its id type).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Patch<U> {
        match self {
            Patch::Absent => Patch::Absent,
            Patch::Null => Patch::Null,
            Patch::Value(v) => Patch::Value(f(v)),
        }
    }
    /// Apply to a nullable stored field.
    pub fn apply_to(self, target: &mut Option<T>) {
        match self {
            Patch::Absent => {}
            Patch::Null => *target = None,
            Patch::Value(v) => *target = Some(v),
        }
    }
}

/// One VALIDATION_ERROR carrying every detail, its message summing them up.
pub fn validation_error(details: Vec<ErrorDetail>) -> ApiError {
    let summary = details.iter().map(|d| format!("{}: {}", d.field.as_deref().unwrap_or("body"), d.message)).collect::<Vec<_>>().join("; ");
    ApiError::new(ErrorCode::ValidationError, summary).with_details(details)
}

/// Collects field errors; `finish` turns them into one VALIDATION_ERROR.
#[derive(Default, Debug)]
pub struct Errors(Vec<ErrorDetail>);

/// Can DynamoDB store this number? It keeps 38 significant digits between 1e-130 and
/// 9.99e125 (and zero); JSON allows far more (`1e200`), which would fail the write.
pub fn storable_number(n: &serde_json::Number) -> bool {
    if n.is_i64() || n.is_u64() {
        return true;
    }
    let Some(f) = n.as_f64() else { return false };
    let a = f.abs();
    f.is_finite() && (a == 0.0 || (1e-130..1e126).contains(&a))
}

/// The first number in `v` DynamoDB cannot store, as a JSON path below `field`.
pub fn unstorable_number(field: &str, v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Number(n) if !storable_number(n) => Some(field.to_string()),
        serde_json::Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| unstorable_number(&format!("{field}[{i}]"), x)),
        serde_json::Value::Object(o) => o.iter().find_map(|(k, x)| unstorable_number(&format!("{field}.{k}"), x)),
        _ => None,
    }
}

impl Errors {
    /// User JSON that will be stored: every number must fit DynamoDB's range.
    pub fn storable(&mut self, field: &str, v: &serde_json::Value) {
        if let Some(path) = unstorable_number(field, v) {
            self.add(path, "numbers must be between 1e-130 and 9.99e125 in magnitude (or 0), with at most 38 digits");
        }
    }
    pub fn new() -> Self {
        Self::default()
    }
    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(ErrorDetail::field(field, message));
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn finish(self) -> Result<(), ApiError> {
        if self.0.is_empty() {
            return Ok(());
        }
        Err(validation_error(self.0))
    }

    /// A required or optional text field: trimmed length within bounds, no control characters.
    pub fn text(&mut self, field: &str, value: &str, min: usize, max: usize) {
        let n = value.chars().count();
        if n < min {
            self.add(field, if min == 1 { "must not be empty".into() } else { format!("must be at least {min} characters") });
        } else if n > max {
            self.add(field, format!("must be at most {max} characters"));
        } else if value.chars().any(|c| c.is_control() && c != '\n' && c != '\r' && c != '\t') {
            self.add(field, "must not contain control characters");
        }
    }

    /// `metadata`: string to string, at most 50 keys, keys up to 40 chars, values up to 500.
    pub fn metadata(&mut self, field: &str, m: &BTreeMap<String, String>) {
        if m.len() > 50 {
            self.add(field, "must have at most 50 keys");
        }
        for (k, v) in m {
            if k.is_empty() || k.chars().count() > 40 {
                self.add(format!("{field}.{k}"), "keys must be 1 to 40 characters");
            }
            if v.chars().count() > 500 {
                self.add(format!("{field}.{k}"), "values must be at most 500 characters");
            }
        }
    }

    /// Apply a PATCH of a `metadata` map (null clears it), validating the new value.
    pub fn patch_metadata(&mut self, field: &str, patch: Patch<BTreeMap<String, String>>, target: &mut BTreeMap<String, String>) {
        match patch {
            Patch::Absent => {}
            Patch::Null => target.clear(),
            Patch::Value(m) => {
                self.metadata(field, &m);
                *target = m;
            }
        }
    }

    /// An absolute https URL without credentials.
    pub fn https_url(&mut self, field: &str, value: &str) {
        match url::Url::parse(value) {
            Ok(u) if u.scheme() == "https" && u.host_str().is_some() && u.username().is_empty() && u.password().is_none() => {
                if value.len() > 2048 {
                    self.add(field, "must be at most 2048 characters");
                }
            }
            Ok(_) => self.add(field, "must be an https URL with a host and no credentials"),
            Err(_) => self.add(field, "must be an absolute https URL"),
        }
    }

    /// An RFC 3339 timestamp; returns it normalised to UTC.
    pub fn timestamp(&mut self, field: &str, value: &str) -> Option<chrono::DateTime<chrono::Utc>> {
        match chrono::DateTime::parse_from_rfc3339(value) {
            Ok(t) => Some(t.with_timezone(&chrono::Utc)),
            Err(_) => {
                self.add(field, "must be an RFC 3339 time such as 2026-03-15T10:00:00Z");
                None
            }
        }
    }
}

/// ISO 4217 active currency codes.
pub const CURRENCIES: &[&str] = &[
    "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT", "BGN", "BHD", "BIF", "BMD", "BND", "BOB",
    "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD", "CDF", "CHF", "CLP", "CNY", "COP", "CRC", "CUP", "CVE", "CZK", "DJF", "DKK", "DOP",
    "DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS", "GIP", "GMD", "GNF", "GTQ", "GYD", "HKD", "HNL", "HTG", "HUF",
    "IDR", "ILS", "INR", "IQD", "IRR", "ISK", "JMD", "JOD", "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", "LAK",
    "LBP", "LKR", "LRD", "LSL", "LYD", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN", "MYR", "MZN",
    "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "PYG", "QAR", "RON", "RSD", "RUB", "RWF",
    "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE", "SOS", "SRD", "SSP", "STN", "SVC", "SYP", "SZL", "THB", "TJS", "TMT", "TND",
    "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "UYU", "UZS", "VES", "VND", "VUV", "WST", "XAF", "XCD", "XCG", "XOF", "XPF",
    "YER", "ZAR", "ZMW", "ZWG",
];

/// An email address, trimmed and lower-cased, if it has the usual shape (`local@domain.tld`).
pub fn normalise_email(raw: &str) -> Option<String> {
    let e = raw.trim().to_lowercase();
    let (local, domain) = e.split_once('@')?;
    let ok = e.len() <= 254
        && (1..=64).contains(&local.len())
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains("..")
        && !e.chars().any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | ',' | ';' | '"' | '(' | ')' | '[' | ']'))
        && !domain.contains('@');
    ok.then_some(e)
}

/// `Name <addr>` or `addr` -> (name, lower-cased address).
pub fn parse_mailbox(raw: &str) -> Option<(Option<String>, String)> {
    let raw = raw.trim();
    match raw.rfind('<') {
        Some(i) if raw.ends_with('>') => {
            let addr = normalise_email(&raw[i + 1..raw.len() - 1])?;
            let name = raw[..i].trim().trim_matches('"').trim();
            if name.chars().any(char::is_control) || name.contains('"') || name.chars().count() > 100 {
                return None;
            }
            Some(((!name.is_empty()).then(|| name.to_string()), addr))
        }
        Some(_) => None,
        None => Some((None, normalise_email(raw)?)),
    }
}

/// A DNS domain name, lower-cased without a trailing dot, if it is one a mail domain can be:
/// at least two labels of letters, digits and inner hyphens (1..63 each, 253 in all) and a
/// TLD that is not all digits (so no IP address).
pub fn domain_name(raw: &str) -> Option<String> {
    let d = raw.trim().trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = d.split('.').collect();
    let label_ok = |l: &&str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let tld_ok = labels.last().is_some_and(|t| t.bytes().any(|b| b.is_ascii_lowercase()));
    (d.len() <= 253 && labels.len() >= 2 && labels.iter().all(label_ok) && tld_ok).then_some(d)
}

/// Is `domain` equal to `parent` or one of its subdomains? (Both lower-cased.)
pub fn within_domain(domain: &str, parent: &str) -> bool {
    domain == parent || domain.strip_suffix(parent).is_some_and(|head| head.ends_with('.'))
}

/// A snake_case enum value from a query parameter or CSV cell (its serde name), if it is one.
pub fn parse_enum<T: serde::de::DeserializeOwned>(v: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(v.into())).ok()
}

/// Lower-case hex of a SHA-256 (64 digits), as the API names bodies, files and values.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub fn is_currency(code: &str) -> bool {
    CURRENCIES.binary_search(&code).is_ok()
}

pub fn is_timezone(tz: &str) -> bool {
    crate::zone::Zone::named(tz).is_some()
}

/// A BCP 47 language tag of the common shape: `en`, `de-AT`, `zh-Hant-TW`.
pub fn is_locale(tag: &str) -> bool {
    let mut parts = tag.split('-');
    let lang = parts.next().unwrap_or("");
    if !(2..=3).contains(&lang.len()) || !lang.bytes().all(|b| b.is_ascii_lowercase()) {
        return false;
    }
    parts.all(|p| {
        (p.len() == 2 && p.bytes().all(|b| b.is_ascii_uppercase()))
            || (p.len() == 3 && p.bytes().all(|b| b.is_ascii_digit()))
            || (p.len() == 4 && p.as_bytes()[0].is_ascii_uppercase() && p[1..].bytes().all(|b| b.is_ascii_lowercase()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mailbox_is_a_bare_address_or_a_name_and_an_address() {
        assert_eq!(parse_mailbox(" Ada@Example.org "), Some((None, "ada@example.org".into())));
        assert_eq!(parse_mailbox("\"Ada L.\" <ADA@example.org>"), Some((Some("Ada L.".into()), "ada@example.org".into())));
        assert_eq!(parse_mailbox("<ada@example.org>"), Some((None, "ada@example.org".into())));
        for bad in ["Ada <ada@example.org", "Ada\r\nBcc: x <ada@example.org>", "a\"b <ada@example.org>", "Ada <not an address>"] {
            assert_eq!(parse_mailbox(bad), None, "{bad}");
        }
    }

    #[test]
    fn domain_names() {
        assert_eq!(domain_name(" Mail.Example.COM. ").as_deref(), Some("mail.example.com"));
        for bad in ["localhost", "127.0.0.1", "-a.com", "a-.com", "a..com", "a_b.com", "a.com/x", "x@a.com", "", "a.123"] {
            assert_eq!(domain_name(bad), None, "{bad}");
        }
        assert!(domain_name(&format!("{}.com", "a".repeat(64))).is_none());
        assert!(within_domain("a.b.example.com", "example.com") && within_domain("example.com", "example.com"));
        assert!(!within_domain("notexample.com", "example.com") && !within_domain("example.com", "a.example.com"));
    }

    #[test]
    fn a_missing_field_is_named() {
        #[derive(Deserialize, Debug)]
        struct Inner {
            #[allow(dead_code)]
            b: String,
        }
        #[derive(Deserialize, Debug)]
        struct Outer {
            #[allow(dead_code)]
            a: Inner,
        }
        let e = parse_json::<Outer>(br#"{}"#).unwrap_err();
        assert_eq!(e.details[0].field.as_deref(), Some("a"));
        let e = parse_json::<Outer>(br#"{"a": {}}"#).unwrap_err();
        assert_eq!((e.details[0].field.as_deref(), e.details[0].message.as_str()), (Some("a.b"), "is required"));
    }

    #[test]
    fn only_numbers_dynamodb_stores_pass() {
        let v: serde_json::Value = serde_json::from_str(r#"{"a": [1, -2.5, 0, 1e125, 2e-130], "b": {"c": 1e200}}"#).unwrap();
        assert_eq!(unstorable_number("f", &v), Some("f.b.c".into()));
        assert_eq!(unstorable_number("f", &v["a"]), None);
        for bad in ["1e126", "-1e200", "1e-131"] {
            assert!(!storable_number(&bad.parse().unwrap()), "{bad}");
        }
        assert!(storable_number(&u64::MAX.into()) && storable_number(&i64::MIN.into()));
    }

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct In {
        #[allow(dead_code)]
        name: String,
        #[serde(default)]
        note: Patch<String>,
    }

    #[test]
    fn parse_errors_name_the_field() {
        let e = parse_json::<In>(br#"{"name": 5}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::ValidationError);
        assert_eq!(e.details[0].field.as_deref(), Some("name"));
        let e = parse_json::<In>(br#"{"name": "a", "bogus": 1}"#).unwrap_err();
        assert!(e.message.contains("bogus"), "{}", e.message);
        let e = parse_json::<In>(b" []").unwrap_err();
        assert_eq!(e.details[0].field.as_deref(), Some("body"), "an array is not an object, even for a struct serde could read from one");
        let e = parse_json::<In>(b"{not json").unwrap_err();
        assert!(e.message.starts_with("malformed JSON"));
        let e = parse_json::<In>(b"").unwrap_err();
        assert_eq!(e.details[0].field.as_deref(), Some("body"));
    }

    #[test]
    fn patch_distinguishes_absent_null_and_value() {
        assert_eq!(parse_json::<In>(br#"{"name":"a"}"#).unwrap().note, Patch::Absent);
        assert_eq!(parse_json::<In>(br#"{"name":"a","note":null}"#).unwrap().note, Patch::Null);
        assert_eq!(parse_json::<In>(br#"{"name":"a","note":"x"}"#).unwrap().note, Patch::Value("x".into()));
    }

    #[test]
    fn errors_collect_and_summarise() {
        let mut e = Errors::new();
        e.text("name", "", 1, 10);
        e.https_url("url", "http://x.test");
        e.https_url("ok", "https://example.com/a.png");
        let err = e.finish().unwrap_err();
        assert_eq!(err.details.len(), 2);
        assert!(err.message.contains("name: must not be empty"));
    }

    #[test]
    fn reference_lists() {
        assert!(CURRENCIES.windows(2).all(|w| w[0] < w[1]), "sorted for binary search");
        assert!(is_currency("EUR") && !is_currency("EURO") && !is_currency("eur"));
        assert!(is_timezone("Europe/Berlin") && is_timezone("UTC") && !is_timezone("Mars/Base"));
        assert!(is_locale("en") && is_locale("de-AT") && is_locale("zh-Hant-TW") && !is_locale("english") && !is_locale("EN"));
    }
}
