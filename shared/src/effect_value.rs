//! An effect's value as data: the JSON a person is shown, its canonical form and digest, and
//! where two values differ. A foundation, so an error can carry the value a 428 refused;
//! `crate::authority` is where a value becomes authority.

/// An effect's value as a person is shown it and as its approval binds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub capability: &'static str,
    /// The value as JSON, whole.
    pub value: serde_json::Value,
    /// Hex SHA-256 of [`canonical`] `value`.
    pub digest: String,
}

impl Shown {
    pub fn of(capability: &'static str, value: &impl serde::Serialize) -> serde_json::Result<Self> {
        let value = serde_json::to_value(value)?;
        let digest = digest(&value);
        Ok(Self { capability, value, digest })
    }
}

/// The canonical form a value's digest is taken over: JSON with every object's keys in byte
/// order and no whitespace (serde_json's own number and string forms).
pub fn canonical(v: &serde_json::Value) -> String {
    use serde_json::Value;
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(k.as_str()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(l) => {
                out.push('[');
                for (i, x) in l.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}

/// Hex SHA-256 of a value's canonical form.
pub fn digest(v: &serde_json::Value) -> String {
    crate::crypto::sha256_hex(canonical(v).as_bytes())
}

/// The JSON pointers (`/messages/0/to`) at which two values differ, shallowest first: what a
/// stale approval names.
pub fn differences(approved: &serde_json::Value, now: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    fn walk(a: &Value, b: &Value, at: String, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let path = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                    match (x.get(k), y.get(k)) {
                        (Some(p), Some(q)) => walk(p, q, path, out),
                        _ => out.push(path),
                    }
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    walk(p, q, format!("{at}/{i}"), out);
                }
            }
            _ if a == b => {}
            _ => out.push(if at.is_empty() { "/".into() } else { at }),
        }
    }
    let mut out = vec![];
    walk(approved, now, String::new(), &mut out);
    out
}
