//! DynamoDB helpers for the single, workspace-partitioned table.
//!
//! Key schema (see docs/data-model.md):
//! - `pk = WS#<workspace_id>`, `sk = <KIND>#<id>`: every object of a workspace; no read by id
//!   ever happens without the caller's workspace in the key.
//! - `gsi1pk/gsi1sk`: alternative access paths (list filters, look-ups by unique value).
//! - `version`: optimistic concurrency; every update is conditional on the version it read.
//! - `expires_at`: TTL (epoch seconds). Emulators and AWS expire lazily, so readers check it.

use crate::error::ApiError;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;

pub type Item = HashMap<String, AttributeValue>;

/// One attribute's value: the store's name for DynamoDB's type, so that the areas name the
/// store, not the SDK (`s`, `n`, `boolean`, `null`, `strings`, `list`, `map` make them).
pub type Value = AttributeValue;

/// What a conditional write answers besides "done" ([`Write::returning`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returning {
    /// The item as it was before the write.
    Old,
    /// The item as the write left it.
    New,
    /// The attributes the update changed, as they are now.
    UpdatedNew,
}

/// One update expression in a transaction ([`crate::outbox::Tx::update`]): the item's key,
/// the expression, its condition, names and values.
#[derive(Clone, Debug)]
#[must_use = "an update does nothing until a transaction carries it"]
pub struct Update {
    pk: String,
    sk: String,
    expression: String,
    parts: Conditions,
}

/// A write's condition and the names and values its expressions use: what a [`Write`] and an
/// [`Update`] both carry, and hand to the SDK the same way.
#[derive(Clone, Debug, Default)]
struct Conditions {
    condition: Option<String>,
    names: Vec<(String, String)>,
    values: Vec<(String, Value)>,
}

/// What the SDK takes: the condition, and the names and values (none when empty).
type SdkConditions = (Option<String>, Option<HashMap<String, String>>, Option<HashMap<String, Value>>);

impl Conditions {
    fn when(&mut self, condition: impl Into<String>) {
        self.condition = Some(condition.into());
    }
    fn name(&mut self, placeholder: impl Into<String>, attribute: impl Into<String>) {
        self.names.push((placeholder.into(), attribute.into()));
    }
    fn value(&mut self, placeholder: impl Into<String>, v: Value) {
        self.values.push((placeholder.into(), v));
    }
    fn into_sdk(self) -> SdkConditions {
        let names = (!self.names.is_empty()).then(|| self.names.into_iter().collect());
        let values = (!self.values.is_empty()).then(|| self.values.into_iter().collect());
        (self.condition, names, values)
    }
}

impl Update {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>, expression: impl Into<String>) -> Self {
        Self { pk: pk.into(), sk: sk.into(), expression: expression.into(), parts: Conditions::default() }
    }
    /// Only if `condition` holds (a DynamoDB condition expression).
    pub fn when(mut self, condition: impl Into<String>) -> Self {
        self.parts.when(condition);
        self
    }
    /// `#placeholder` for an attribute name.
    pub fn name(mut self, placeholder: impl Into<String>, attribute: impl Into<String>) -> Self {
        self.parts.name(placeholder, attribute);
        self
    }
    /// `:placeholder` for a value.
    pub fn value(mut self, placeholder: impl Into<String>, v: Value) -> Self {
        self.parts.value(placeholder, v);
        self
    }
    /// The SDK's form, for the transaction that carries it.
    pub(crate) fn into_sdk(self) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
        let (condition, names, values) = self.parts.into_sdk();
        aws_sdk_dynamodb::types::Update::builder()
            .key("pk", s(self.pk))
            .key("sk", s(self.sk))
            .update_expression(self.expression)
            .set_condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
    }
}

pub const GSI1: &str = "gsi1";
pub const GSI2: &str = "gsi2";

pub use crate::keys::ws_pk;

/// The table and the client that reaches it: everything the data layer needs (built once per
/// container by `App`).
#[derive(Clone, Debug)]
pub struct Db {
    // Only the store reaches DynamoDB: outside `shared`, everything goes through `Db`'s methods.
    pub(crate) client: aws_sdk_dynamodb::Client,
    pub table: String,
}

/// One conditional write of one item, as the areas need them beside transactions: a put, an
/// update expression or a delete, with its condition, names and values. `apply` answers
/// `None` when the condition did not hold, `Some(attributes)` (those asked for with
/// `returning`, else empty) when the write happened.
#[must_use = "a write does nothing until applied"]
pub struct Write<'a> {
    db: &'a Db,
    op: WriteOp,
    parts: Conditions,
    returns: Option<aws_sdk_dynamodb::types::ReturnValue>,
}

enum WriteOp {
    Put(Item),
    Update { pk: String, sk: String, expression: String },
    Delete { pk: String, sk: String },
}

impl Write<'_> {
    /// Only if `condition` holds (a DynamoDB condition expression).
    pub fn when(mut self, condition: impl Into<String>) -> Self {
        self.parts.when(condition);
        self
    }
    /// `#placeholder` for an attribute name (reserved words, or names built at run time).
    pub fn name(mut self, placeholder: impl Into<String>, attribute: impl Into<String>) -> Self {
        self.parts.name(placeholder, attribute);
        self
    }
    /// `:placeholder` for a value.
    pub fn value(mut self, placeholder: impl Into<String>, v: AttributeValue) -> Self {
        self.parts.value(placeholder, v);
        self
    }
    /// Answer the item as it was before the write, as it is after, or the updated attributes.
    pub fn returning(mut self, r: Returning) -> Self {
        use aws_sdk_dynamodb::types::ReturnValue;
        self.returns = Some(match r {
            Returning::Old => ReturnValue::AllOld,
            Returning::New => ReturnValue::AllNew,
            Returning::UpdatedNew => ReturnValue::UpdatedNew,
        });
        self
    }

    async fn send(self) -> Result<Item, Failed> {
        let db = self.db;
        let (condition, names, values) = self.parts.into_sdk();
        let key = |pk: String, sk: String| HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))]);
        match self.op {
            WriteOp::Put(item) => db
                .client
                .put_item()
                .table_name(&db.table)
                .set_item(Some(item))
                .set_condition_expression(condition)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
                .set_return_values(self.returns)
                .send()
                .await
                .map(|o| o.attributes.unwrap_or_default())
                .map_err(Failed::from),
            WriteOp::Update { pk, sk, expression } => db
                .client
                .update_item()
                .table_name(&db.table)
                .set_key(Some(key(pk, sk)))
                .update_expression(expression)
                .set_condition_expression(condition)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
                .set_return_values(self.returns)
                .send()
                .await
                .map(|o| o.attributes.unwrap_or_default())
                .map_err(Failed::from),
            WriteOp::Delete { pk, sk } => db
                .client
                .delete_item()
                .table_name(&db.table)
                .set_key(Some(key(pk, sk)))
                .set_condition_expression(condition)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
                .set_return_values(self.returns)
                .send()
                .await
                .map(|o| o.attributes.unwrap_or_default())
                .map_err(Failed::from),
        }
    }

    /// The write; `None` when its condition did not hold.
    pub async fn apply(self) -> Result<Option<Item>, ApiError> {
        match self.send().await {
            Ok(attributes) => Ok(Some(attributes)),
            Err(Failed { condition: true, .. }) => Ok(None),
            Err(f) => Err(f.error),
        }
    }

    /// The write, where a failed condition is a fault like any other (a 500).
    pub async fn required(self) -> Result<Item, ApiError> {
        self.send().await.map_err(|f| f.error)
    }
}

/// A failed write, whichever its kind: whether its condition did not hold, and the failure as
/// the envelope's error.
struct Failed {
    condition: bool,
    error: ApiError,
}

impl<E, R> From<SdkError<E, R>> for Failed
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    fn from(e: SdkError<E, R>) -> Self {
        Failed { condition: e.code() == Some("ConditionalCheckFailedException"), error: ddb_error(e) }
    }
}

pub fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}
pub fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}
pub fn boolean(v: bool) -> Value {
    AttributeValue::Bool(v)
}
pub fn null() -> Value {
    AttributeValue::Null(true)
}
/// A string set (unordered, unique, never empty).
pub fn strings(v: Vec<String>) -> Value {
    AttributeValue::Ss(v)
}
pub fn list(v: Vec<Value>) -> Value {
    AttributeValue::L(v)
}
pub fn map(v: Item) -> Value {
    AttributeValue::M(v)
}
/// A string set's members, or a list's strings (empty when absent or of another type).
pub fn get_strings(item: &Item, attr: &str) -> Vec<String> {
    match item.get(attr) {
        Some(AttributeValue::Ss(v)) => v.clone(),
        Some(AttributeValue::L(v)) => v.iter().filter_map(|x| x.as_s().ok().cloned()).collect(),
        _ => vec![],
    }
}

/// Map an SDK failure to the envelope: throttling and network trouble are 503, the rest 500.
pub fn ddb_error<E, R>(e: SdkError<E, R>) -> ApiError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let throttled = e.code().is_some_and(|c| {
        matches!(c, "ProvisionedThroughputExceededException" | "ThrottlingException" | "RequestLimitExceeded" | "InternalServerError")
    });
    let network = matches!(e, SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) | SdkError::ResponseError(_));
    let text = aws_sdk_dynamodb::error::DisplayErrorContext(&e).to_string();
    if throttled || network { ApiError::unavailable(text) } else { ApiError::internal(text) }
}

// Objects travel to and from attributes through their JSON form (`serde_json::Value`): a
// model's JSON serialiser is in every binary already (responses, events), and one
// non-generic conversion replaces a DynamoDB serialiser instantiated per model (serde_dynamo
// was 60 to 110 kB of each function). The attributes are the ones serde_dynamo wrote: null
// as NULL, numbers as N, sequences as L, maps and structs as M.

/// An object as DynamoDB attributes. A number DynamoDB cannot store (user JSON that no
/// area checked) is the caller's 400, not a failed write and a 500.
pub fn to_item<T: Serialize>(v: &T) -> Result<Item, ApiError> {
    match serde_json::to_value(v).map_err(|e| ApiError::internal(e))? {
        serde_json::Value::Object(map) => map
            .into_iter()
            .map(|(k, v)| match attribute(v) {
                Some(a) => Ok((k, a)),
                None => Err(ApiError::validation(&k, "holds a number outside what can be stored (1e-130 to 9.99e125 in magnitude)")),
            })
            .collect(),
        _ => Err(ApiError::internal("an item is a JSON object")),
    }
}

/// A value as one attribute.
pub fn to_attribute<T: Serialize>(v: &T) -> Result<AttributeValue, ApiError> {
    attribute(serde_json::to_value(v).map_err(|e| ApiError::internal(e))?)
        .ok_or_else(|| ApiError::internal("a number outside what DynamoDB stores"))
}

/// `None` when a number in it cannot be stored.
fn attribute(v: serde_json::Value) -> Option<AttributeValue> {
    use serde_json::Value as J;
    Some(match v {
        J::Null => AttributeValue::Null(true),
        J::Bool(b) => AttributeValue::Bool(b),
        J::Number(n) if crate::validate::storable_number(&n) => AttributeValue::N(n.to_string()),
        J::Number(_) => return None,
        J::String(s) => AttributeValue::S(s),
        J::Array(l) => AttributeValue::L(l.into_iter().map(attribute).collect::<Option<_>>()?),
        J::Object(m) => AttributeValue::M(m.into_iter().map(|(k, v)| Some((k, attribute(v)?))).collect::<Option<_>>()?),
    })
}

/// An attribute's JSON: sets as arrays, binary as base64 text.
pub fn json_of(a: AttributeValue) -> serde_json::Value {
    use base64::Engine;
    use serde_json::Value as J;
    let number = |n: String| n.parse::<serde_json::Number>().map_or(J::String(n), J::Number);
    let base64 = |b: aws_smithy_types::Blob| J::String(base64::engine::general_purpose::STANDARD.encode(b.into_inner()));
    match a {
        AttributeValue::S(s) => J::String(s),
        AttributeValue::N(n) => number(n),
        AttributeValue::Bool(b) => J::Bool(b),
        AttributeValue::M(m) => J::Object(m.into_iter().map(|(k, v)| (k, json_of(v))).collect()),
        AttributeValue::L(l) => J::Array(l.into_iter().map(json_of).collect()),
        AttributeValue::Ss(l) => J::Array(l.into_iter().map(J::String).collect()),
        AttributeValue::Ns(l) => J::Array(l.into_iter().map(number).collect()),
        AttributeValue::B(b) => base64(b),
        AttributeValue::Bs(l) => J::Array(l.into_iter().map(base64).collect()),
        _ => J::Null,
    }
}

/// An item's JSON object.
pub fn item_json(item: Item) -> serde_json::Value {
    serde_json::Value::Object(item.into_iter().map(|(k, v)| (k, json_of(v))).collect())
}

/// An item's size as DynamoDB counts it, near enough to keep a transaction inside its limits:
/// names and values, nested values in full.
pub fn approx_size(item: &Item) -> usize {
    fn value(v: &AttributeValue) -> usize {
        match v {
            AttributeValue::S(s) | AttributeValue::N(s) => s.len(),
            AttributeValue::B(b) => b.as_ref().len(),
            AttributeValue::Ss(l) | AttributeValue::Ns(l) => l.iter().map(String::len).sum(),
            AttributeValue::L(l) => 3 + l.iter().map(|v| 1 + value(v)).sum::<usize>(),
            AttributeValue::M(m) => 3 + m.iter().map(|(k, v)| 1 + k.len() + value(v)).sum::<usize>(),
            _ => 1,
        }
    }
    item.iter().map(|(k, v)| k.len() + value(v)).sum()
}

pub fn from_item<T: DeserializeOwned>(item: Item) -> Result<T, ApiError> {
    serde_json::from_value(item_json(item)).map_err(|e| ApiError::internal(e))
}

/// A value from one attribute.
pub fn from_attribute<T: DeserializeOwned>(a: &AttributeValue) -> Result<T, ApiError> {
    serde_json::from_value(json_of(a.clone())).map_err(|e| ApiError::internal(e))
}

pub fn get_i64(item: &Item, name: &str) -> Option<i64> {
    item.get(name)?.as_n().ok()?.parse().ok()
}
pub fn get_str<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)?.as_s().ok().map(String::as_str)
}

/// An object as stored: its serialized fields plus keys and version.
pub struct Record {
    pub item: Item,
}

impl Record {
    pub fn new<T: Serialize>(pk: String, sk: String, object: &T) -> Result<Self, ApiError> {
        let mut item = to_item(object)?;
        item.insert("pk".into(), s(pk));
        item.insert("sk".into(), s(sk));
        Ok(Self { item })
    }
    pub fn attr(mut self, name: &str, v: AttributeValue) -> Self {
        self.item.insert(name.into(), v);
        self
    }
    pub fn gsi1(self, pk: String, sk: String) -> Self {
        self.attr("gsi1pk", s(pk)).attr("gsi1sk", s(sk))
    }
    pub fn version(self, v: i64) -> Self {
        self.attr("version", n(v))
    }
    /// GSI2 projects keys only: a query on it is followed by `batch_get`.
    pub fn gsi2(self, pk: String, sk: String) -> Self {
        self.attr("gsi2pk", s(pk)).attr("gsi2sk", s(sk))
    }
}

/// One page of a Query on `pk_attr = pk`, sort keys starting with `prefix`, strictly after `after`.
#[derive(Clone)]
pub struct QuerySpec<'a> {
    pub index: Option<&'static str>,
    pub pk_attr: &'static str,
    pub pk: String,
    pub sk_attr: &'static str,
    pub prefix: String,
    pub after: Option<String>,
    pub limit: usize,
    /// Extra filter (expression, values) applied after the key condition.
    pub filter: Option<(&'a str, Vec<(&'a str, AttributeValue)>)>,
    /// With a filter, how many items one page may evaluate before it returns what it has.
    pub scan_budget: usize,
    /// Newest first (sort keys are time-ordered ids).
    pub descending: bool,
}

pub struct PageOut {
    pub items: Vec<Item>,
    /// Sort key to continue after, when there is more.
    pub next_after: Option<String>,
}

impl<'a> QuerySpec<'a> {
    pub fn new(pk: String, prefix: impl Into<String>, after: Option<String>, limit: usize) -> Self {
        Self {
            index: None,
            pk_attr: "pk",
            pk,
            sk_attr: "sk",
            prefix: prefix.into(),
            after,
            limit,
            filter: None,
            scan_budget: 1000,
            descending: false,
        }
    }
    pub fn descending(mut self) -> Self {
        self.descending = true;
        self
    }
    pub fn on_gsi2(mut self) -> Self {
        self.index = Some(GSI2);
        self.pk_attr = "gsi2pk";
        self.sk_attr = "gsi2sk";
        self
    }
    pub fn on_gsi1(mut self) -> Self {
        self.index = Some(GSI1);
        self.pk_attr = "gsi1pk";
        self.sk_attr = "gsi1sk";
        self
    }
    pub fn filter(mut self, expr: &'a str, vals: Vec<(&'a str, AttributeValue)>) -> Self {
        self.filter = Some((expr, vals));
        self
    }
}

/// Which write of a transaction had its condition fail (by the order they were added).
#[derive(Debug)]
pub enum TxError {
    Condition(usize),
    Api(ApiError),
}

/// What a transaction that collided with a concurrent one on the same items answers.
const CONTENDED: &str = "the object was changed concurrently; retry";

impl TxError {
    /// A concurrent transaction on the same items cancelled this one (TransactionConflict):
    /// worth one more try once that one has committed. Any other 409 is final.
    pub fn is_contention(&self) -> bool {
        matches!(self, TxError::Api(e) if e.code == crate::error::ErrorCode::Conflict && e.message == CONTENDED)
    }
}

/// Wait before trying a transaction again after a contention (`TxError::is_contention`): long
/// enough for the other one to commit, with jitter that grows with each `attempt` (from 0).
pub async fn after_contention(attempt: u32) {
    tokio::time::sleep(std::time::Duration::from_millis(20 + rand::random_range(0..30u64 << attempt))).await;
}

impl From<ApiError> for TxError {
    fn from(e: ApiError) -> Self {
        TxError::Api(e)
    }
}

/// The least string above every string that begins with `prefix` (its last character's
/// successor in code-point order, which is UTF-8's byte order and so DynamoDB's): the keys
/// from `prefix` to it are exactly those with the prefix, and it itself. None when the last
/// character is U+10FFFF, which has no successor.
pub fn prefix_end(prefix: &str) -> Option<String> {
    let last = prefix.chars().next_back()?;
    let next = match last as u32 + 1 {
        // The surrogates are not characters.
        0xD800 => '\u{E000}',
        n => char::from_u32(n)?,
    };
    Some(format!("{}{next}", &prefix[..prefix.len() - last.len_utf8()]))
}

pub fn is_expired(item: &Item) -> bool {
    get_i64(item, "expires_at").is_some_and(|t| t <= chrono::Utc::now().timestamp())
}

impl Db {
    /// Write `item` whole (see [`Write`] for the condition).
    pub fn put(&self, item: Item) -> Write<'_> {
        self.write(WriteOp::Put(item))
    }

    /// Apply an update expression to the item `pk`/`sk`.
    pub fn update(&self, pk: impl Into<String>, sk: impl Into<String>, expression: impl Into<String>) -> Write<'_> {
        self.write(WriteOp::Update { pk: pk.into(), sk: sk.into(), expression: expression.into() })
    }

    /// Delete the item `pk`/`sk` under a condition (an unconditional one is [`Db::delete`]).
    pub fn delete_when(&self, pk: impl Into<String>, sk: impl Into<String>, condition: impl Into<String>) -> Write<'_> {
        self.write(WriteOp::Delete { pk: pk.into(), sk: sk.into() }).when(condition)
    }

    fn write(&self, op: WriteOp) -> Write<'_> {
        Write { db: self, op, parts: Conditions::default(), returns: None }
    }

    /// The items of partition `pk` with sort keys between `lo` and `hi` (inclusive), in key
    /// order (`forward`) or reversed, strongly consistent: up to `limit` of them, or all.
    pub async fn query_between(&self, pk: &str, lo: &str, hi: &str, forward: bool, limit: Option<usize>) -> Result<Vec<Item>, ApiError> {
        let mut out = vec![];
        let mut start = None;
        loop {
            let res = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :lo AND :hi")
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":lo", s(lo))
                .expression_attribute_values(":hi", s(hi))
                .scan_index_forward(forward)
                .consistent_read(true)
                .set_limit(limit.map(|l| (l - out.len()).min(i32::MAX as usize) as i32))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(ddb_error)?;
            out.extend(res.items.unwrap_or_default());
            start = res.last_evaluated_key;
            if start.is_none() || limit.is_some_and(|l| out.len() >= l) {
                return Ok(out);
            }
        }
    }

    /// Every item of the table, page by page: for the tests and the operator's tools, which
    /// look at a whole (local) table. No request or worker reads a table whole.
    pub async fn scan_all(&self) -> Result<Vec<Item>, ApiError> {
        let mut out = vec![];
        let mut start = None;
        loop {
            let res = self.client.scan().table_name(&self.table).set_exclusive_start_key(start).send().await.map_err(ddb_error)?;
            out.extend(res.items.unwrap_or_default());
            start = res.last_evaluated_key;
            if start.is_none() {
                return Ok(out);
            }
        }
    }

    /// Consistent read of one item by its full key; an expired item counts as absent.
    pub async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, ApiError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(ddb_error)?;
        Ok(out.item.filter(|i| !is_expired(i)))
    }

    /// Delete an item by its key, unconditionally (a missing item is no error).
    pub async fn delete(&self, pk: &str, sk: &str) -> Result<(), ApiError> {
        self.client.delete_item().table_name(&self.table).key("pk", s(pk)).key("sk", s(sk)).send().await.map_err(ddb_error)?;
        Ok(())
    }

    /// Read an object of a workspace, with its version.
    pub async fn get_object<T: DeserializeOwned>(&self, ws: &crate::ids::WorkspaceId, sk: &str) -> Result<Option<(T, i64)>, ApiError> {
        match self.get(&ws_pk(ws), sk).await? {
            None => Ok(None),
            Some(item) => {
                let v = get_i64(&item, "version").unwrap_or(0);
                Ok(Some((from_item(item)?, v)))
            }
        }
    }

    /// The items of partition `pk` with sort keys up to `upper`, oldest first, that pass
    /// `filter`: up to `want` of them, reading at most `max_pages` pages of `page` items.
    /// DynamoDB applies `Limit` before a filter, so a run of filtered-out items at the head of
    /// the range would hide everything behind it from a single Query; this reads on past them.
    pub async fn scan_range(
        &self,
        pk: &str,
        upper: &str,
        filter: (&str, Vec<(&str, AttributeValue)>),
        page: i32,
        max_pages: usize,
        want: usize,
    ) -> Result<Vec<Item>, ApiError> {
        self.scan_range_on(None, pk, upper, Some(filter), page, max_pages, want).await
    }

    /// `scan_range` on an index (`GSI1`, `GSI2`) or the table (`None`).
    #[allow(clippy::too_many_arguments)]
    pub async fn scan_range_on(
        &self,
        index: Option<&str>,
        pk: &str,
        upper: &str,
        filter: Option<(&str, Vec<(&str, AttributeValue)>)>,
        page: i32,
        max_pages: usize,
        want: usize,
    ) -> Result<Vec<Item>, ApiError> {
        let (pk_attr, sk_attr) = match index {
            Some(GSI1) => ("gsi1pk", "gsi1sk"),
            Some(_) => ("gsi2pk", "gsi2sk"),
            None => ("pk", "sk"),
        };
        let mut out = vec![];
        let mut start = None;
        for _ in 0..max_pages {
            let mut q = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(index.map(String::from))
                .key_condition_expression(format!("{pk_attr} = :pk AND {sk_attr} <= :upper"))
                .set_filter_expression(filter.as_ref().map(|f| f.0.to_string()))
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":upper", s(upper))
                .set_exclusive_start_key(start)
                .limit(page);
            for (k, v) in filter.iter().flat_map(|f| f.1.iter()) {
                q = q.expression_attribute_values(*k, v.clone());
            }
            let res = q.send().await.map_err(ddb_error)?;
            out.extend(res.items.unwrap_or_default());
            start = res.last_evaluated_key;
            if out.len() >= want || start.is_none() {
                break;
            }
        }
        out.truncate(want);
        Ok(out)
    }

    /// `SET attr = value` on an item that still exists (one deleted meanwhile stays deleted);
    /// a failure is logged, for marks whose loss only costs a repeat.
    pub async fn mark(&self, pk: String, sk: String, attr: &str, value: AttributeValue) {
        let res = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression("SET #a = :v")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#a", attr)
            .expression_attribute_values(":v", value)
            .send()
            .await;
        if let Err(e) = res
            && !e.as_service_error().is_some_and(|s| s.is_conditional_check_failed_exception())
        {
            tracing::warn!(attr, error = %aws_sdk_dynamodb::error::DisplayErrorContext(e), "could not mark an item");
        }
    }

    /// Commit prepared writes atomically (TransactWriteItems). A failed condition names the
    /// write by its position; a conflicting concurrent transaction is a 409.
    pub async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<(), TxError> {
        let res = self.client.transact_write_items().set_transact_items(Some(items)).send().await;
        if let Err(e) = res {
            use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError as E;
            if let Some(E::TransactionCanceledException(c)) = e.as_service_error() {
                if let Some(i) = c.cancellation_reasons().iter().position(|r| r.code() == Some("ConditionalCheckFailed")) {
                    return Err(TxError::Condition(i));
                }
                // A concurrent transaction on the same items: the caller's read is stale.
                if c.cancellation_reasons().iter().any(|r| r.code() == Some("TransactionConflict")) {
                    return Err(TxError::Api(ApiError::conflict(CONTENDED)));
                }
            }
            return Err(TxError::Api(ddb_error(e)));
        }
        Ok(())
    }

    /// Read items by key, in the order of `keys` (a repeated key repeats the item); missing or
    /// expired ones are left out.
    /// Consistent, and retried for unprocessed keys.
    pub async fn batch_get(&self, keys: &[(String, String)]) -> Result<Vec<Item>, ApiError> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let mut found: HashMap<(String, String), Item> = HashMap::new();
        // BatchGetItem refuses a repeated key.
        let mut unique: Vec<(String, String)> = keys.to_vec();
        unique.sort();
        unique.dedup();
        for chunk in unique.chunks(100) {
            let mut ka = KeysAndAttributes::builder().consistent_read(true);
            for (pk, sk) in chunk {
                ka = ka.keys(HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))]));
            }
            let mut request = Some(HashMap::from([(self.table.clone(), ka.build().expect("keys are set"))]));
            for attempt in 0..5 {
                let Some(req) = request.take().filter(|r| !r.is_empty()) else { break };
                if attempt > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(20 << attempt)).await;
                }
                let out = self.client.batch_get_item().set_request_items(Some(req)).send().await.map_err(ddb_error)?;
                for item in out.responses.unwrap_or_default().remove(&self.table).unwrap_or_default() {
                    let key = (get_str(&item, "pk").unwrap_or_default().to_string(), get_str(&item, "sk").unwrap_or_default().to_string());
                    if !is_expired(&item) {
                        found.insert(key, item);
                    }
                }
                request = out.unprocessed_keys;
            }
        }
        Ok(keys.iter().filter_map(|k| found.get(k).cloned()).collect())
    }

    /// Write items unconditionally (BatchWriteItem, 25 per call), retrying unprocessed ones.
    pub async fn batch_put(&self, items: Vec<Item>) -> Result<(), ApiError> {
        use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
        let requests = items
            .into_iter()
            .map(|i| WriteRequest::builder().put_request(PutRequest::builder().set_item(Some(i)).build().expect("item set")).build())
            .collect();
        self.batch_write(requests).await
    }

    /// Delete items unconditionally by key (BatchWriteItem, 25 per call).
    pub async fn batch_delete(&self, keys: &[(String, String)]) -> Result<(), ApiError> {
        use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
        let requests = keys
            .iter()
            .map(|(pk, sk)| {
                let key = HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))]);
                WriteRequest::builder().delete_request(DeleteRequest::builder().set_key(Some(key)).build().expect("key set")).build()
            })
            .collect();
        self.batch_write(requests).await
    }

    async fn batch_write(&self, requests: Vec<aws_sdk_dynamodb::types::WriteRequest>) -> Result<(), ApiError> {
        for chunk in requests.chunks(25) {
            let mut pending = chunk.to_vec();
            for attempt in 0.. {
                if pending.is_empty() {
                    break;
                }
                if attempt >= 6 {
                    return Err(ApiError::unavailable("DynamoDB kept throttling a batch write"));
                }
                if attempt > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(25 << attempt)).await;
                }
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, std::mem::take(&mut pending))
                    .send()
                    .await
                    .map_err(ddb_error)?;
                pending = out.unprocessed_items.and_then(|mut m| m.remove(&self.table)).unwrap_or_default();
            }
        }
        Ok(())
    }

    /// One page of a keys-only index (GSI2) query, then the items themselves (one BatchGetItem).
    pub async fn query_keys_then_get(&self, spec: QuerySpec<'_>) -> Result<PageOut, ApiError> {
        let out = self.query_page(spec).await?;
        let keys: Vec<(String, String)> =
            out.items.iter().filter_map(|i| Some((get_str(i, "pk")?.to_string(), get_str(i, "sk")?.to_string()))).collect();
        Ok(PageOut { items: self.batch_get(&keys).await?, next_after: out.next_after })
    }

    /// Reads O(limit) items (plus at most `scan_budget` filtered-out ones): the cost of a page
    /// never grows with the size of the collection.
    pub async fn query_page(&self, spec: QuerySpec<'_>) -> Result<PageOut, ApiError> {
        let mut items: Vec<Item> = Vec::with_capacity(spec.limit + 1);
        let mut after = spec.after.clone();
        let mut evaluated = 0usize;
        loop {
            let mut q = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(spec.index.map(String::from))
                .expression_attribute_names("#pk", spec.pk_attr)
                .expression_attribute_values(":pk", s(&spec.pk))
                .limit((spec.limit + 1 - items.len()).max(if spec.filter.is_some() { 100 } else { 1 }) as i32)
                .consistent_read(spec.index.is_none())
                .scan_index_forward(!spec.descending);
            let after_cond = if spec.descending { "#pk = :pk AND #sk < :after" } else { "#pk = :pk AND #sk > :after" };
            q = match &after {
                // `sk > after` (or `<` when descending) may run past the prefix; those items are cut
                // below, and since keys are sorted the first one outside the prefix ends the list.
                Some(a) => q
                    .key_condition_expression(after_cond)
                    .expression_attribute_names("#sk", spec.sk_attr)
                    .expression_attribute_values(":after", s(a)),
                // An empty prefix is the whole partition (DynamoDB refuses an empty key value and
                // an unused attribute name).
                None if spec.prefix.is_empty() => q.key_condition_expression("#pk = :pk"),
                // The prefix as a range, not `begins_with`: the same items, but DynamoDB Local
                // walks the partition for `begins_with` (a page of 5 took 18 ms in a workspace
                // of 28,000 items, against 2 ms as a range), so list latency on the local stack
                // grew with everything else the workspace held.
                None => match prefix_end(&spec.prefix) {
                    Some(end) => q
                        .key_condition_expression("#pk = :pk AND #sk BETWEEN :prefix AND :prefix_end")
                        .expression_attribute_names("#sk", spec.sk_attr)
                        .expression_attribute_values(":prefix", s(&spec.prefix))
                        .expression_attribute_values(":prefix_end", s(end)),
                    None => q
                        .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                        .expression_attribute_names("#sk", spec.sk_attr)
                        .expression_attribute_values(":prefix", s(&spec.prefix)),
                },
            };
            if let Some((expr, vals)) = &spec.filter {
                q = q.filter_expression(*expr);
                for (k, v) in vals {
                    q = q.expression_attribute_values(*k, v.clone());
                }
            }
            let out = q.send().await.map_err(ddb_error)?;
            evaluated += out.scanned_count() as usize;
            let last_evaluated = out.last_evaluated_key().and_then(|k| k.get(spec.sk_attr)).and_then(|v| v.as_s().ok()).cloned();
            let mut ended = last_evaluated.is_none();
            for item in out.items.unwrap_or_default() {
                let sk = get_str(&item, spec.sk_attr).unwrap_or_default();
                if !sk.starts_with(&spec.prefix) {
                    // The range's end itself (`prefix_end`), first when descending: not ours.
                    if spec.descending && sk > spec.prefix.as_str() {
                        continue;
                    }
                    ended = true;
                    break;
                }
                if is_expired(&item) {
                    continue;
                }
                items.push(item);
                if items.len() > spec.limit {
                    break;
                }
            }
            if items.len() > spec.limit {
                items.truncate(spec.limit);
                let next = items.last().and_then(|i| get_str(i, spec.sk_attr)).map(String::from);
                return Ok(PageOut { items, next_after: next });
            }
            if ended {
                return Ok(PageOut { items, next_after: None });
            }
            if let Some(le) = last_evaluated.as_ref().filter(|le| le.starts_with(&spec.prefix))
                && evaluated >= spec.scan_budget
            {
                // Sparse filter: return a short page and a cursor instead of scanning on.
                return Ok(PageOut { items, next_after: Some(le.clone()) });
            }
            after = last_evaluated;
        }
    }
}

/// A counter item changed by `delta` inside a transaction; an increment carries the
/// condition `< max`, so a cap holds under concurrent creates (the counter and the thing
/// counted commit together or not at all).
pub fn capped_count(pk: String, sk: &str, attr: &str, delta: i64, max: i64) -> Update {
    let u =
        Update::new(pk, sk, "SET #c = if_not_exists(#c, :zero) + :delta").name("#c", attr).value(":zero", n(0)).value(":delta", n(delta));
    if delta > 0 { u.when("attribute_not_exists(#c) OR #c < :max").value(":max", n(max)) } else { u }
}

impl TxError {
    /// Map a failed condition to the error the caller means by it.
    pub fn on_condition(self, f: impl FnOnce(usize) -> ApiError) -> ApiError {
        match self {
            TxError::Condition(i) => f(i),
            TxError::Api(e) => e,
        }
    }
    /// The usual meaning of a failed condition on a versioned write.
    pub fn stale(self) -> ApiError {
        self.on_condition(|_| ApiError::conflict("the object was changed concurrently; read it again and retry"))
    }
}

/// The queries of a list ([`crate::keys::List`]): on its index, in the partition its parts
/// name, over the sort keys that begin with its prefix.
impl<Pk: crate::keys::Parts, Sk> crate::keys::List<Pk, Sk> {
    /// Every item of the list in one partition.
    pub fn query(&self, pk: Pk::Args<'_>, after: Option<String>, limit: usize) -> QuerySpec<'static> {
        self.spec(self.pk(pk), self.prefix().to_string(), after, limit)
    }
    /// The items whose sort keys begin with `first` (a contact's activities).
    pub fn query_within(
        &self,
        pk: Pk::Args<'_>,
        first: <Sk::Part as crate::keys::Part>::Arg<'_>,
        after: Option<String>,
        limit: usize,
    ) -> QuerySpec<'static>
    where
        Sk: crate::keys::First,
    {
        self.spec(self.pk(pk), self.prefix_of(first), after, limit)
    }
    /// The items whose first placeholder's value begins with `partial` (a search term's
    /// prefix: `CSEARCH#` + `lov` finds `CSEARCH#lovelace#ct_1`).
    pub fn query_partial(&self, pk: Pk::Args<'_>, partial: &str, after: Option<String>, limit: usize) -> QuerySpec<'static> {
        self.spec(self.pk(pk), format!("{}{partial}", self.prefix()), after, limit)
    }
    fn spec(&self, pk: String, prefix: String, after: Option<String>, limit: usize) -> QuerySpec<'static> {
        let spec = QuerySpec::new(pk, prefix, after, limit);
        match self.index {
            crate::keys::Index::Table => spec,
            crate::keys::Index::Gsi1 => spec.on_gsi1(),
            crate::keys::Index::Gsi2 => spec.on_gsi2(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Thing {
        id: String,
        n: i64,
        tags: Vec<String>,
        note: Option<String>,
    }

    #[test]
    fn a_prefix_range_holds_exactly_the_keys_with_the_prefix() {
        assert_eq!(prefix_end("POST#").as_deref(), Some("POST$"));
        assert_eq!(prefix_end("CSEARCH#åse").as_deref(), Some("CSEARCH#åsf"));
        assert_eq!(prefix_end("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(prefix_end("a\u{10FFFF}"), None);
        assert_eq!(prefix_end(""), None);
        let (lo, hi) = ("CSEARCH#ab", prefix_end("CSEARCH#ab").unwrap());
        let within = |k: &str| lo <= k && k <= hi.as_str();
        for k in ["CSEARCH#ab", "CSEARCH#ab#ct_1", "CSEARCH#abc#ct_1", "CSEARCH#ab\u{10FFFF}x#ct_1", "CSEARCH#ab\u{FFFF}"] {
            assert!(within(k) && k.starts_with(lo), "{k}");
        }
        for k in ["CSEARCH#a", "CSEARCH#aa\u{10FFFF}", "CSEARCH#ac#ct_1", "CSEARCH#b", "CSEARCH$"] {
            assert!(!within(k) && !k.starts_with(lo), "{k}");
        }
        // The end itself is in the range and not ours: `query_page` passes over it.
        assert!(within("CSEARCH#ac") && !"CSEARCH#ac".starts_with(lo));
    }

    #[test]
    fn records_round_trip_and_carry_keys() {
        let t = Thing { id: "x_1".into(), n: 3, tags: vec![], note: None };
        let rec = Record::new(ws_pk(&crate::ids::WorkspaceId::trusted("ws_a")), "THING#x_1".into(), &t)
            .unwrap()
            .version(1)
            .gsi1("G".into(), "g".into());
        assert_eq!(get_str(&rec.item, "pk"), Some("WS#ws_a"));
        assert_eq!(get_i64(&rec.item, "version"), Some(1));
        let back: Thing = from_item(rec.item).unwrap();
        assert_eq!(back, t);
    }

    /// The attributes serde_dynamo wrote, so items stored before read the same.
    #[test]
    fn attributes_keep_their_dynamodb_types() {
        #[derive(Serialize, serde::Deserialize, PartialEq, Debug)]
        #[serde(rename_all = "snake_case")]
        enum Kind {
            Plain,
            Tagged { at: f64 },
        }
        #[derive(Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Rich {
            kind: Kind,
            other: Kind,
            big: u64,
            neg: i32,
            flag: bool,
            meta: serde_json::Value,
        }
        let r = Rich {
            kind: Kind::Plain,
            other: Kind::Tagged { at: 1.5 },
            big: u64::MAX,
            neg: -7,
            flag: true,
            meta: serde_json::json!({"a": [null, "b"]}),
        };
        let item = to_item(&r).unwrap();
        assert_eq!(item["kind"], s("plain"));
        assert_eq!(
            item["other"],
            AttributeValue::M(HashMap::from([(
                "tagged".into(),
                AttributeValue::M(HashMap::from([("at".into(), AttributeValue::N("1.5".into()))]))
            )]))
        );
        assert_eq!(
            (&item["big"], &item["neg"], &item["flag"]),
            (&AttributeValue::N(u64::MAX.to_string()), &n(-7), &AttributeValue::Bool(true))
        );
        assert_eq!(
            item["meta"],
            AttributeValue::M(HashMap::from([("a".into(), AttributeValue::L(vec![AttributeValue::Null(true), s("b")]))]))
        );
        assert_eq!(from_item::<Rich>(item).unwrap(), r);
        // DynamoDB answers numbers in its own spelling, and sets and binary as such.
        let read = Item::from([
            ("n".into(), AttributeValue::N("1E+2".into())),
            ("ss".into(), AttributeValue::Ss(vec!["a".into()])),
            ("b".into(), AttributeValue::B(aws_smithy_types::Blob::new(b"hi".to_vec()))),
        ]);
        assert_eq!(item_json(read), serde_json::json!({"n": 100.0, "ss": ["a"], "b": "aGk="}));
        assert_eq!(from_attribute::<Vec<String>>(&to_attribute(&vec!["x"]).unwrap()).unwrap(), ["x"]);
    }

    #[test]
    fn numbers_dynamodb_cannot_store_are_a_400() {
        let item = to_item(&serde_json::json!({"x": {"y": [1, 1e200]}}));
        assert_eq!(item.unwrap_err().code, crate::error::ErrorCode::ValidationError);
        assert!(to_item(&serde_json::json!({"x": 1.5e100})).is_ok());
    }

    #[test]
    fn expiry_is_checked_on_read() {
        let mut i = Item::new();
        assert!(!is_expired(&i));
        i.insert("expires_at".into(), n(1));
        assert!(is_expired(&i));
        i.insert("expires_at".into(), n(chrono::Utc::now().timestamp() + 60));
        assert!(!is_expired(&i));
    }
}
