//! The tools: `tools.json` (one per operation, written by `make generate` from the contract)
//! and `await_approval`, read on first use and paged by size.

use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::OnceLock;

/// A `tools/list` page stays under this many bytes of JSON (a client's message limits, and
/// the model's context, are the reason to page at all).
pub const PAGE_BYTES: usize = 90_000;

/// The one tool that is not an operation of the contract.
pub const AWAIT_APPROVAL: &str = "await_approval";

#[derive(Deserialize)]
pub struct Operation {
    pub name: String,
    pub method: String,
    pub path: String,
    pub path_params: Vec<String>,
    pub query_params: Vec<String>,
    /// The operation takes a JSON body.
    pub body: bool,
    #[serde(default)]
    pub capabilities: Vec<String>,
}

pub struct Catalog {
    /// Each tool as `tools/list` shows it.
    pub tools: Vec<rmcp::model::Tool>,
    pub operations: Vec<Operation>,
    /// The index of each page's first tool.
    pub pages: Vec<usize>,
}

impl Catalog {
    pub fn operation(&self, name: &str) -> Option<&Operation> {
        self.operations.iter().find(|o| o.name == name)
    }

    /// The page a cursor names (none: the first), and the next page's cursor.
    pub fn page(&self, cursor: Option<&str>) -> Option<(&[rmcp::model::Tool], Option<String>)> {
        let n = match cursor {
            None => 0,
            Some(c) => c.strip_prefix("page-")?.parse::<usize>().ok().filter(|n| *n < self.pages.len())?,
        };
        let start = self.pages[n];
        let end = self.pages.get(n + 1).copied().unwrap_or(self.tools.len());
        let next = (n + 1 < self.pages.len()).then(|| format!("page-{}", n + 1));
        Some((&self.tools[start..end], next))
    }
}

pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let raw: Vec<Value> = serde_json::from_str(include_str!("tools.json")).expect("tools.json is generated JSON");
        let mut tools = Vec::with_capacity(raw.len() + 1);
        let mut operations = Vec::with_capacity(raw.len());
        for t in raw {
            operations.push(serde_json::from_value(t.clone()).expect("tools.json names each operation"));
            tools.push(listed(&t));
        }
        tools.push(listed(&await_approval()));
        let mut pages = vec![0];
        let mut size = 0;
        for (i, t) in tools.iter().enumerate() {
            let bytes = serde_json::to_vec(t).map_or(0, |v| v.len());
            if size + bytes > PAGE_BYTES && i > 0 {
                pages.push(i);
                size = 0;
            }
            size += bytes;
        }
        Catalog { tools, operations, pages }
    })
}

/// A tool as listed: the generated file's routing fields stay on the server.
fn listed(t: &Value) -> rmcp::model::Tool {
    let shown = json!({
        "name": t["name"], "title": t["title"], "description": t["description"],
        "inputSchema": t["inputSchema"], "annotations": t["annotations"],
    });
    serde_json::from_value(shown).expect("a generated tool is an MCP tool")
}

fn await_approval() -> Value {
    json!({
        "name": AWAIT_APPROVAL,
        "title": "Wait for a person's decision on an approval request",
        "description": "Waits (at most wait_seconds, default 20) until the approval request a tool call answered is approved, denied, expired or stale, and says which. Once it is approved, repeat the tool call exactly as before (same arguments): it runs once, with the approval. The approval itself is never shown to the agent.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "approval_request_id": {"type": "string", "pattern": shared::ids::id_pattern("apr")},
                "wait_seconds": {"type": "integer", "minimum": 0, "maximum": 20, "default": 20}
            },
            "required": ["approval_request_id"],
            "additionalProperties": false
        },
        "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
    })
}
