//! Prefixed, time-ordered ids (`post_01J...`): a ULID sorts by creation time, so a workspace's
//! items of one kind come back from one Query in creation order, and paging by id is stable.

use std::sync::Mutex;
use ulid::{Generator, Ulid};

/// Monotonic within the process: two ids made in the same millisecond still sort in order.
static GENERATOR: Mutex<Generator> = Mutex::new(Generator::new());

pub fn new_id(prefix: &str) -> String {
    let ulid = GENERATOR.lock().map(|mut g| g.generate().ok()).ok().flatten().unwrap_or_else(Ulid::generate);
    format!("{prefix}_{ulid}")
}

/// True when `id` is `<prefix>_<26 Crockford base32 chars>`; used to reject garbage ids before any I/O.
pub fn is_valid(prefix: &str, id: &str) -> bool {
    id.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('_')).is_some_and(|u| u.len() == 26 && Ulid::from_string(u).is_ok())
}

/// What fills one placeholder. An id type (`ContactId`) fills `<ct id>` and nothing else;
/// `keys::Text` fills any placeholder that is not an id (`<status>`, `<sha256 of the URL>`). So
/// `keys::CONTACT.sk(&booking_id)` does not compile, and a kind whose declared parts do not
/// match its pattern fails to compile where it is declared (`keys::Keys::on`).
pub trait Part {
    /// The placeholder it fills (`ct id`), or `""` for `keys::Text`.
    const PLACEHOLDER: &'static str;
    type Arg<'a>: Copy;
    fn text<'a>(arg: Self::Arg<'a>) -> &'a str;
}

/// An id type of one kind (`PostId`): parsing checks the prefix and the ULID, so a handler
/// holding one never sends garbage to DynamoDB. Declare with [`crate::prefixed_id!`].
pub trait PrefixedId: Sized {
    /// `post`, as in `post_01J...`.
    const PREFIX: &'static str;
    /// What a 404 calls it (`post`).
    const OBJECT: &'static str;
    fn new_unchecked(id: String) -> Self;
    /// Some when `id` is a well-formed id of this kind.
    fn parse(id: &str) -> Option<Self> {
        is_valid(Self::PREFIX, id).then(|| Self::new_unchecked(id.to_string()))
    }
}

/// `prefixed_id!(PostId, "post", "post")`: a newtype over the id string.
#[macro_export]
macro_rules! prefixed_id {
    ($name:ident, $prefix:literal, $object:literal) => {
        /// Serialized as its string (`#[serde(transparent)]`); deserializing checks the prefix
        /// and the ULID, so a request naming a malformed one is refused where it is read.
        /// Its schema is a string with the pattern its prefix gives.
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, ::serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);
        impl $name {
            /// A fresh id of this kind.
            pub fn generate() -> Self {
                Self($crate::ids::new_id($prefix))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
            /// What a request naming a malformed id of this kind is told (deserializing says it).
            pub const fn malformed() -> &'static str {
                concat!("must be a ", $object, " id (", $prefix, "_...)")
            }
            /// Some when `id` is a well-formed id of this kind (as deserializing one checks).
            pub fn parse(id: &str) -> Option<Self> {
                <Self as $crate::ids::PrefixedId>::parse(id)
            }
            /// An id the platform made or stored itself (a key it wrote, a record's field), taken
            /// as it is. Never for an id a request names: parse those.
            pub fn trusted(id: impl Into<String>) -> Self {
                Self(id.into())
            }
        }
        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let id = <String as ::serde::Deserialize>::deserialize(d)?;
                <Self as $crate::ids::PrefixedId>::parse(&id).ok_or_else(|| <D::Error as ::serde::de::Error>::custom(Self::malformed()))
            }
        }
        impl ::std::cmp::PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }
        impl ::std::cmp::PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
        impl ::std::cmp::PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }
        impl ::std::cmp::PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }
        impl ::std::cmp::PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                self == &other.0
            }
        }
        impl ::std::convert::From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
        impl ::std::convert::From<&$name> for String {
            fn from(id: &$name) -> String {
                id.0.clone()
            }
        }
        impl $crate::ids::PrefixedId for $name {
            const PREFIX: &'static str = $prefix;
            const OBJECT: &'static str = $object;
            fn new_unchecked(id: String) -> Self {
                Self(id)
            }
        }
        impl ::std::convert::AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl ::std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }
        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl $crate::ids::Part for $name {
            const PLACEHOLDER: &'static str = concat!($prefix, " id");
            type Arg<'a> = &'a $name;
            fn text<'a>(id: Self::Arg<'a>) -> &'a str {
                &id.0
            }
        }
        $crate::scalar_schema!($name, $crate::ids::id_schema($prefix));
    };
}

/// A workspace's id as the platform vouches for it: the workspace a credential reaches, or one
/// read back from the platform's own records. Never made from what a request says (its path,
/// query or body), so an operation that takes one acts in a workspace the caller may reach.
/// Reads as `&str`. Not `Deserialize`: a record that carries one reads it with
/// [`WorkspaceId::from_record`], by name, so no request body or query can yield one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct WorkspaceId(String);

impl WorkspaceId {
    /// An id from the platform's own records: an item, a queue message the platform wrote, the
    /// workspace the admin CLI just created. Not for ids a request names.
    pub fn trusted(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// `#[serde(deserialize_with = "WorkspaceId::from_record")]` on a field of a record the
    /// platform wrote (an item, a queue message), as [`WorkspaceId::trusted`] is for one value.
    pub fn from_record<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <String as serde::Deserialize>::deserialize(d).map(Self)
    }
}

crate::scalar_schema!(WorkspaceId, crate::ids::id_schema("ws"));

impl std::ops::Deref for WorkspaceId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for WorkspaceId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for WorkspaceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&WorkspaceId> for String {
    fn from(ws: &WorkspaceId) -> String {
        ws.0.clone()
    }
}

impl PartialEq<String> for WorkspaceId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<WorkspaceId> for String {
    fn eq(&self, other: &WorkspaceId) -> bool {
        self == &other.0
    }
}

/// The empty id, which no workspace has: what a route without a workspace keys by (a key built
/// from it reads nothing).
pub(crate) static NO_WORKSPACE: WorkspaceId = WorkspaceId(String::new());

impl Part for WorkspaceId {
    const PLACEHOLDER: &'static str = "ws";
    type Arg<'a> = &'a WorkspaceId;
    fn text<'a>(ws: Self::Arg<'a>) -> &'a str {
        &ws.0
    }
}

impl PartialEq<str> for WorkspaceId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

/// `scalar_schema!(Type, schema)`: utoipa's schema traits for a type whose schema is a scalar
/// the contract writes inline at each use (an id, a time), registered under the type's name.
#[macro_export]
macro_rules! scalar_schema {
    ($name:ident, $schema:expr) => {
        impl $crate::reexports::utoipa::PartialSchema for $name {
            fn schema() -> $crate::reexports::utoipa::openapi::RefOr<$crate::reexports::utoipa::openapi::schema::Schema> {
                $schema
            }
        }
        impl $crate::reexports::utoipa::ToSchema for $name {
            fn schemas(
                schemas: &mut Vec<(String, $crate::reexports::utoipa::openapi::RefOr<$crate::reexports::utoipa::openapi::schema::Schema>)>,
            ) {
                schemas.push((stringify!($name).to_string(), <Self as $crate::reexports::utoipa::PartialSchema>::schema()));
            }
        }
    };
}

/// The pattern of an id of kind `prefix`, as the contract states it.
pub fn id_pattern(prefix: &str) -> String {
    format!("^{prefix}_[0-7][0-9A-HJKMNP-TV-Z]{{25}}$")
}

/// An id's schema: a string with its kind's pattern. utoipa refers to it by name; the
/// contract's generator writes such scalar schemas inline where they are used
/// (`x-inline`), so a field reads as a string with a pattern, as before.
pub fn id_schema(prefix: &str) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new().schema_type(Type::String).pattern(Some(id_pattern(prefix))).extensions(Some(inline_mark())).into()
}

/// Marks a component the contract's generator inlines at each use and then drops.
pub fn inline_mark() -> utoipa::openapi::extensions::Extensions {
    utoipa::openapi::extensions::ExtensionsBuilder::new().add("x-inline", true).build()
}

/// A moment, as the models hold it: UTC, to the second. It serializes as RFC 3339 with a `Z`
/// (`2026-03-15T10:00:00Z`), the contract's time format, always the same length, so stored
/// times that sort keys or conditions compare as text compare in time order. It reads any
/// RFC 3339 time (another offset, fractions) and keeps it in UTC to the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(chrono::DateTime<chrono::Utc>);

impl Timestamp {
    pub fn now() -> Self {
        Self::from(chrono::Utc::now())
    }
    /// Seconds since the Unix epoch; `None` outside chrono's range.
    pub fn from_unix(secs: i64) -> Option<Self> {
        chrono::DateTime::from_timestamp(secs, 0).map(Self)
    }
    /// An RFC 3339 time, or `None`.
    pub fn parse(s: &str) -> Option<Self> {
        chrono::DateTime::parse_from_rfc3339(s).ok().map(|t| Self::from(t.with_timezone(&chrono::Utc)))
    }
    pub fn time(self) -> chrono::DateTime<chrono::Utc> {
        self.0
    }
}

impl From<chrono::DateTime<chrono::Utc>> for Timestamp {
    fn from(t: chrono::DateTime<chrono::Utc>) -> Self {
        use chrono::Timelike;
        Self(t.with_nanosecond(0).unwrap_or(t))
    }
}

impl std::ops::Deref for Timestamp {
    type Target = chrono::DateTime<chrono::Utc>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::Add<chrono::Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: chrono::Duration) -> Timestamp {
        Timestamp::from(self.0 + d)
    }
}

impl std::ops::Sub<chrono::Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, d: chrono::Duration) -> Timestamp {
        Timestamp::from(self.0 - d)
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format_time(self.0))
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse(&s).ok_or_else(|| serde::de::Error::custom("must be an RFC 3339 time such as 2026-03-15T10:00:00Z"))
    }
}

crate::scalar_schema!(Timestamp, {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
        .extensions(Some(inline_mark()))
        .into()
});

/// Current time as RFC 3339 UTC with second precision, the contract's time format.
pub fn now_rfc3339() -> String {
    Timestamp::now().to_string()
}

pub fn format_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

// The ids of the objects the shared mechanisms key by; `domain::ids` declares the rest.
crate::prefixed_id!(ApiKeyId, "key", "api key");
crate::prefixed_id!(EventId, "evt", "event");
crate::prefixed_id!(ApprovalRequestId, "apr", "approval request");
crate::prefixed_id!(ConfirmationId, "cc", "capability confirmation");
crate::prefixed_id!(ContactId, "ct", "contact");

impl ContactId {
    /// What a record that outlives its contact holds once an erasure removed the person (a
    /// booking keeps its slot): the empty id, which no contact has. Never a key: check
    /// [`ContactId::is_erased`] before loading or linking by it.
    pub fn erased() -> Self {
        Self::trusted(String::new())
    }
    pub fn is_erased(&self) -> bool {
        self.as_str().is_empty()
    }
    /// `#[serde(deserialize_with)]` for a field that may hold the erased id: the empty string,
    /// or a well-formed contact id.
    pub fn or_erased<'de, D: ::serde::Deserializer<'de>>(d: D) -> Result<ContactId, D::Error> {
        let id = <String as ::serde::Deserialize>::deserialize(d)?;
        match id.is_empty() {
            true => Ok(Self::erased()),
            false => Self::parse(&id).ok_or_else(|| ::serde::de::Error::custom(Self::malformed())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_keep_one_text_form() {
        let t = Timestamp::parse("2026-03-15T11:00:00.123+01:00").unwrap();
        assert_eq!(t.to_string(), "2026-03-15T10:00:00Z");
        assert_eq!(serde_json::to_value(t).unwrap(), serde_json::json!("2026-03-15T10:00:00Z"));
        assert_eq!(serde_json::from_value::<Timestamp>(serde_json::json!("2026-03-15T10:00:00Z")).unwrap(), t);
        assert!(serde_json::from_value::<Timestamp>(serde_json::json!("yesterday")).is_err());
        assert!(Timestamp::parse("2026-03-15T10:00:01Z").unwrap() > t);
    }

    #[test]
    fn ids_are_prefixed_valid_and_ordered() {
        let a = new_id("post");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_id("post");
        assert!(a.starts_with("post_"));
        assert!(is_valid("post", &a));
        assert!(a < b);
        assert!(!is_valid("ct", &a));
        assert!(!is_valid("post", "post_123"));
        assert!(!is_valid("post", "post_../../etc"));
    }

    crate::prefixed_id!(TestId, "tst", "test thing");

    #[test]
    fn ids_deserialize_only_when_well_formed_and_carry_their_pattern() {
        let id = TestId::generate();
        assert_eq!(serde_json::from_value::<TestId>(serde_json::json!(id.as_str())).unwrap(), id);
        for bad in ["", "tst_123", "ct_01HF6Z3Q8M4W2T9K7R5N1B0C6D", "tst_../../etc", "tst_01HF6Z3Q8M4W2T9K7R5N1B0C6DX"] {
            let e = serde_json::from_value::<TestId>(serde_json::json!(bad)).unwrap_err();
            assert_eq!(e.to_string(), "must be a test thing id (tst_...)", "{bad}");
        }
        let schema = serde_json::to_value(<TestId as utoipa::PartialSchema>::schema()).unwrap();
        assert_eq!(schema["pattern"], "^tst_[0-7][0-9A-HJKMNP-TV-Z]{25}$");
        let time = serde_json::to_value(<Timestamp as utoipa::PartialSchema>::schema()).unwrap();
        assert_eq!((time["type"].as_str(), time["format"].as_str()), (Some("string"), Some("date-time")));
    }

    #[test]
    fn time_is_rfc3339_utc_seconds() {
        let t = now_rfc3339();
        assert!(t.ends_with('Z') && t.len() == 20, "{t}");
    }
}
