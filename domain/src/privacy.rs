//! Personal data, the vocabulary every area uses: who a request is about (a [`Subject`]), how
//! an area's items of a personal kind are found and erased (its [`Rule`]s), what an export
//! shows of an item, and the tombstones of erased addresses.
//!
//! Every item kind says in the key registry whether it holds personal data
//! (`keys::Kind::data`); each area declares a [`Rule`] for each of its personal kinds, and the
//! GDPR jobs (`crate::gdpr`, above every area) run them. This module sits below the areas, so
//! they can name a subject and declare their rules without depending on the jobs.

use crate::ids::ContactId;
use crate::keys::{self, Absent, Kind, List};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use shared::auth::WorkspaceId;
use shared::store::{self, Item, ws_pk};
use shared::{ApiResult, App};

/// A resolved subject: the address (lower-cased), the contact when there is one, the
/// contact's search terms (their entries are keyed by them), and every identity the contact had
/// before (former addresses, phones and names, from `contacts::formers`). Kept sealed in an
/// erasure job, so a restarted erasure finds what it has not erased yet even after the contact
/// is gone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Subject {
    pub email: String,
    pub contact_id: Option<ContactId>,
    #[serde(default)]
    pub terms: Vec<String>,
    /// Addresses the contact had before, lower-cased (not those another contact holds now).
    #[serde(default)]
    pub former_emails: Vec<String>,
    /// Phones, current first (E.164).
    #[serde(default)]
    pub phones: Vec<String>,
    /// Full names, current first, as written.
    #[serde(default)]
    pub names: Vec<String>,
}

impl Subject {
    /// Every address: the current one first.
    pub fn emails(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.email.as_str()).chain(self.former_emails.iter().map(String::as_str)).filter(|e| !e.is_empty())
    }

    /// The strings whose presence in an item names the subject: every address and the contact
    /// id. Not phones or names: a customer may set their phone to a prefix of other people's
    /// numbers (the portal lets them), and people share names; items found by these lose the
    /// names too (see the areas' erase functions).
    pub fn needles(&self) -> Vec<String> {
        let mut n: Vec<String> = self.emails().map(String::from).collect();
        n.extend(self.contact_id.as_ref().map(String::from));
        n
    }

    /// Is this address (or recipient entry, `Name <addr>`) one of the subject's addresses? The
    /// whole address, not a part: erasing `ada@example.com` leaves `lada@example.com` alone.
    pub fn addressed(&self, entry: &str) -> bool {
        shared::validate::parse_mailbox(entry).is_some_and(|(_, bare)| self.emails().any(|a| a == bare))
    }

    /// Is this item someone else's: linked to another contact and naming the subject only by a
    /// former address (which may have been another person's before or after)?
    pub fn others(&self, item: &Item) -> bool {
        let Some(owner) = store::get_str(item, "contact_id").filter(|c| !c.is_empty()) else { return false };
        if self.contact_id.as_deref() == Some(owner) {
            return false;
        }
        let current: Vec<String> = std::iter::once(self.email.clone()).chain(self.contact_id.as_ref().map(String::from)).collect();
        !mentions(item, &current)
    }
}

/// How a subject's items of a kind are found.
#[derive(Clone, Copy)]
pub enum Find {
    /// One item of the workspace partition, by a sort key made from the subject.
    Key(fn(&Subject) -> Option<String>),
    /// Several items by their sort keys.
    Keys(fn(&Subject) -> Vec<String>),
    /// The items whose sort keys start with one of these (the kind's prefix and the subject's
    /// part: their contact id, each of their addresses).
    Prefixes(fn(&Subject) -> Vec<String>),
    /// A list on an index partitioned by the subject's contact (`pk` parts: workspace, contact).
    ContactIndex(List<(WorkspaceId, ContactId), Absent>),
    /// Every item of the kind that names the address or the contact id anywhere in it: copies
    /// of data (stored responses, event bodies, deliveries) and items without an index by
    /// person. Reads the whole kind, so only background jobs use it.
    Mentions,
    /// Found and erased with the items of another kind's rule (an email's bodies with the
    /// email, an event's deliveries with the event): the parent's kind name, and the sort keys
    /// of the companions from the parent item.
    WithParent(&'static str, fn(&Item) -> Vec<String>),
    /// Erased by the parent kind's own `Erase::Custom`, which derives their keys with the
    /// platform's keys (a conversation's reply-address token).
    ErasedByParent(&'static str),
}

pub type EraseFn = for<'a> fn(&'a App, &'a WorkspaceId, Item, &'a Subject) -> BoxFuture<'a, ApiResult<()>>;

/// How one found item is erased.
#[derive(Clone, Copy)]
pub enum Erase {
    Delete,
    /// Remove these attributes and keep the item (a deal's value stays, its contact link goes).
    Remove(&'static [&'static str]),
    /// The area's own code (an email is cancelled if it has not left, then redacted).
    Custom(EraseFn),
}

/// One area's rule for one personal kind.
#[derive(Clone, Copy)]
pub struct Rule {
    pub kind: Kind,
    /// The export document's section.
    pub area: &'static str,
    pub find: Find,
    /// In the subject's export? (Copies such as stored responses are erased, not exported.)
    pub export: bool,
    pub erase: Erase,
}

/// Attributes never exported: keys, index keys and secrets (hashes, sealed credentials).
const NOT_EXPORTED: &[&str] = &[
    // An email's sealed credentials and links: unreadable, and not the subject's data.
    "sealed_secrets",
    "pk",
    "sk",
    "gsi1pk",
    "gsi1sk",
    "gsi2pk",
    "gsi2sk",
    "hash",
    "credentials",
    "session",
    "secrets",
    "claim_token",
    "claim_until",
    "job",
    "subject_sealed",
    "resume",
];

/// An item as its export shows it.
pub fn exported(mut item: Item) -> serde_json::Value {
    use shared::store::Value as A;
    for a in NOT_EXPORTED {
        item.remove(*a);
    }
    // Bytes that are text (a signed body) read as text.
    for v in item.values_mut() {
        if let A::B(b) = v
            && let Ok(text) = std::str::from_utf8(b.as_ref())
        {
            *v = A::S(text.to_string());
        }
    }
    shared::store::item_json(item)
}

/// Does any string in the item name one of the needles, whole and case-insensitively
/// ([`names`])?
pub fn mentions(item: &Item, needles: &[String]) -> bool {
    use shared::store::Value as A;
    fn walk(v: &A, needles: &[String]) -> bool {
        let hit = |text: &str| {
            let t = text.to_lowercase();
            needles.iter().any(|n| names(&t, n))
        };
        match v {
            A::S(x) => hit(x),
            A::B(b) => hit(&String::from_utf8_lossy(b.as_ref())),
            A::Ss(l) => l.iter().any(|x| hit(x)),
            A::L(l) => l.iter().any(|x| walk(x, needles)),
            A::M(m) => m.values().any(|x| walk(x, needles)),
            _ => false,
        }
    }
    let needles: Vec<String> = needles.iter().map(|n| n.to_lowercase()).collect();
    item.values().any(|v| walk(v, &needles))
}

/// Does `text` hold `needle` (both lower-cased) whole, not as part of a longer address or id?
/// `ada@example.com` is named in `"ada@example.com"`, `<ada@example.com>`, `to=ada@example.com`,
/// `write to ada@example.com.` and `请联系ada@example.com`, but not in `lada@example.com`,
/// `x.ada@example.com` or `ada@example.com.au`: erasing one person must not touch another's
/// data. Before the match stands no ASCII letter or digit and none of `._%+-` (what addresses
/// are made of in practice), unless it ends an escape of another character: a JSON escape
/// (`\n`, `\u003c`), a percent or quoted-printable octet (`%3c`, `=20`), as stored copies of
/// bodies hold them. A non-ASCII character before it is a boundary too (`请联系ada@…`), so an
/// internationalised address (`müller@…`) names its ASCII tail (`ller@…`): the price of
/// finding addresses in text without spaces. After the match stands no ASCII letter, digit,
/// `_` or `-`, and no `.` that goes on with one.
pub fn names(text: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let word = |c: char| c.is_ascii_alphanumeric();
    text.match_indices(needle).any(|(i, _)| {
        let before = &text[..i];
        let free_before = match before.chars().next_back() {
            None => true,
            Some(c) if word(c) || matches!(c, '.' | '_' | '%' | '+' | '-') => ends_with_escape(before),
            // After an odd run of backslashes the match's first letter is an escape's (`\nada@`
            // holds `ada@` after a line break, not `nada@`).
            Some('\\') => before.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 0,
            Some(_) => true,
        };
        let mut after = text[i + needle.len()..].chars();
        let free_after = match after.next() {
            None => true,
            Some('.') => !after.next().is_some_and(word),
            Some(c) => !(word(c) || matches!(c, '_' | '-')),
        };
        free_before && free_after
    })
}

/// Does `s` end with an escape of a character that cannot be part of an address: `\x` (an
/// odd run of backslashes before a letter: `\n`, `\t`), or `\uXXXX` or `%XX` whose character
/// is not an ASCII letter, digit or one of `._%+-` (`%3c` is `<`, `\u00e9` a non-ASCII letter;
/// `%2b` is not, as in `bob%2bada@…`). Quoted-printable (`=20`) is not read: the table holds
/// decoded text, and `=` more often separates a key from its value (`to=12ada@…`).
fn ends_with_escape(s: &str) -> bool {
    let b = s.as_bytes();
    let n = b.len();
    let odd_backslashes = |end: usize| b[..end].iter().rev().take_while(|c| **c == b'\\').count() % 2 == 1;
    let not_address = |code: u32| code >= 0x80 || !(char::from(code as u8).is_ascii_alphanumeric() || b"._%+-".contains(&(code as u8)));
    let hex = |x: &[u8]| {
        std::str::from_utf8(x).ok().filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit())).and_then(|h| u32::from_str_radix(h, 16).ok())
    };
    // An octet of a non-ASCII character counts only as its last byte (a continuation byte
    // after another octet): `%ed` alone is not a character.
    let octet = |end: usize| (end >= 3 && b[end - 3] == b'%').then(|| hex(&b[end - 2..end])).flatten();
    if let Some(code) = octet(n) {
        let continuation = (0x80..0xc0).contains(&code) && octet(n - 3).is_some_and(|c| c >= 0x80);
        if (code < 0x80 && not_address(code)) || continuation {
            return true;
        }
    }
    if n >= 6 && b[n - 5] == b'u' && odd_backslashes(n - 5) && hex(&b[n - 4..]).is_some_and(not_address) {
        return true;
    }
    n >= 2 && b[n - 1].is_ascii_alphabetic() && b[n - 1] != b'u' && odd_backslashes(n - 1)
}

/// The tombstone's key for an address: HMAC-SHA256 keyed per workspace, so the table names no
/// one and the same address in two workspaces gives two unrelated values.
pub async fn tombstone_sk(app: &App, ws: &WorkspaceId, email: &str) -> ApiResult<String> {
    let key = &app.platform_secret().await?.tombstone_key;
    Ok(keys::TOMBSTONE.sk(&tombstone_hash(key, ws, email)))
}

/// Which of these addresses were erased here (one BatchGetItem of their tombstones).
pub async fn erased(app: &App, ws: &WorkspaceId, emails: &[&str]) -> ApiResult<std::collections::HashSet<String>> {
    if emails.is_empty() {
        return Ok(Default::default());
    }
    let owned: Vec<String> = emails.iter().map(|e| e.to_string()).collect();
    let by_sk = tombstone_keys(app, ws, &owned).await?;
    let keys: Vec<(String, String)> = by_sk.keys().map(|sk| (ws_pk(ws), sk.clone())).collect();
    let found = app.db.batch_get(&keys).await?;
    Ok(found.iter().filter_map(|i| by_sk.get(store::get_str(i, "sk")?).cloned()).collect())
}

/// The tombstone hashes of these addresses (hash -> address): the keys of their tombstones and
/// of what outlives their erasure (hashed suppressions and consents).
pub async fn address_hashes(app: &App, ws: &WorkspaceId, emails: &[String]) -> ApiResult<std::collections::HashMap<String, String>> {
    let key = &app.platform_secret().await?.tombstone_key;
    Ok(emails.iter().map(|e| (tombstone_hash(key, ws, e), e.clone())).collect())
}

/// The tombstone keys of these addresses, for a caller's own batch read, by sort key.
pub async fn tombstone_keys(app: &App, ws: &WorkspaceId, emails: &[String]) -> ApiResult<std::collections::HashMap<String, String>> {
    let key = &app.platform_secret().await?.tombstone_key;
    Ok(emails.iter().map(|e| (keys::TOMBSTONE.sk(&tombstone_hash(key, ws, e)), e.clone())).collect())
}

pub const ERASED_MESSAGE: &str = "this address was erased (GDPR); it can only come back with new consent (resubscribe)";

pub fn tombstone_hash(key: &[u8], ws: &WorkspaceId, email: &str) -> String {
    shared::crypto::hex(&shared::crypto::hmac_sha256(key, format!("{ws}\n{}", email.to_lowercase()).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_the_subjects_only_by_its_whole_address() {
        let s = Subject { email: "ada@example.com".into(), former_emails: vec!["a.l@old.example".into()], ..Default::default() };
        for yes in ["ada@example.com", " ADA@Example.com ", "Ada L <ada@example.com>", "\"Ada, L\" <Ada@Example.COM>", "<a.l@old.example>"]
        {
            assert!(s.addressed(yes), "{yes}");
        }
        for no in ["lada@example.com", "ada@example.com.evil", "Ada <lada@example.com>", "ada@example.co", "", "<>"] {
            assert!(!s.addressed(no), "{no}");
        }
    }

    #[test]
    fn mentions_are_found_in_nested_values_and_case_insensitively() {
        use shared::store::Value as A;
        let item: Item = [
            ("pk".to_string(), A::S("WS#ws_1".into())),
            ("body".to_string(), A::M([("to".to_string(), A::L(vec![A::S("Ada@Example.com".into())]))].into())),
        ]
        .into();
        assert!(mentions(&item, &["ada@example.com".into()]));
        assert!(!mentions(&item, &["bob@example.com".into(), "ct_1".into()]));
        assert!(!mentions(&item, &["da@example.com".into(), "ada@example.co".into()]), "part of another address");
    }

    #[test]
    fn a_needle_is_named_only_whole() {
        for yes in [
            "ada@example.com",
            "\"ada@example.com\"",
            "to: <ada@example.com>",
            "?to=ada@example.com&x",
            "write to ada@example.com.",
            "ada@example.com,bob@x.org",
            r#"{"text":"regards,\nada@example.com"}"#,
            r"tab\tada@example.com",
            r"\u003cada@example.com\u003e",
            "to%3cada@example.com%3e",
            "%e4%b8%a5ada@example.com",
            "请联系ada@example.com",
            "ada@example.comまで",
        ] {
            assert!(names(yes, "ada@example.com"), "{yes}");
        }
        for no in [
            "lada@example.com",
            "x.ada@example.com",
            "bob+ada@example.com",
            "ada@example.com.au",
            "ada@example.community",
            "ada@example.com-x",
            r"\\nada@example.com",
            "bob%2bada@example.com",
            r"\\u00e9ada@example.com",
            r"\u0041ada@example.com",
            "user%ada@example.com",
        ] {
            assert!(!names(no, "ada@example.com"), "{no}");
        }
        assert!(!names("to=edward@example.com", "ward@example.com"));
        assert!(!names("to=12ada@example.com", "ada@example.com"), "a key's value, not quoted-printable");
        assert!(!names(r#"regards,\nada@example.com"#, "nada@example.com"), "the n is the escape's");
        assert!(names(r#"regards,\\nada@example.com"#, "nada@example.com"), "a backslash, then nada@");
        assert!(names("act#ct_01abc#act_1", "ct_01abc"));
        assert!(!names("ct_01abcd", "ct_01abc"));
        assert!(!names("anything", ""));
    }

    #[test]
    fn tombstones_differ_per_workspace_and_ignore_case() {
        let k = b"0123456789abcdef0123456789abcdef";
        let ws1 = WorkspaceId::trusted("ws_1");
        assert_eq!(tombstone_hash(k, &ws1, "A@x.org"), tombstone_hash(k, &ws1, "a@x.org"));
        assert_ne!(tombstone_hash(k, &ws1, "a@x.org"), tombstone_hash(k, &WorkspaceId::trusted("ws_2"), "a@x.org"));
        assert!(!tombstone_hash(k, &ws1, "a@x.org").contains('@'));
    }

    #[test]
    fn exports_leave_out_keys_and_secrets() {
        use shared::store::Value as A;
        let item: Item = [
            ("pk".to_string(), A::S("x".into())),
            ("credentials".to_string(), A::S("sealed".into())),
            ("name".to_string(), A::S("n".into())),
        ]
        .into();
        assert_eq!(exported(item), serde_json::json!({"name": "n"}));
    }
}
