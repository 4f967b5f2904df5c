//! Snoozed conversations wake up by themselves: each snooze has a due entry (sharded, keyed by
//! its time), written and removed in the same transaction as the conversation's change; the
//! minute tick reads the entries that are due and reopens their conversations.

use super::{Conversation, ConversationStatus, conversation_event, conversation_sk, record};
use crate::ids::ConversationId;
use crate::keys;
use shared::auth::WorkspaceId;
use shared::events::EventType;
use shared::outbox::Tx;
use shared::store::TxError;
use shared::store::{self, Item, s};
use shared::{ApiResult, App};

const SHARDS: u32 = 4;

fn shard(conv: &str) -> u32 {
    conv.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32)) % SHARDS
}

fn due_key(ws: &WorkspaceId, conv: &ConversationId, until: shared::ids::Timestamp) -> Option<(String, String)> {
    let ms = until.timestamp_millis().max(0);
    Some((keys::SNOOZE_DUE.pk(&shard(conv).to_string()), keys::SNOOZE_DUE.sk((&format!("{ms:013}"), ws, conv))))
}

/// The due entries to add to `tx` when a conversation goes from `old` to `new`.
pub fn changes(mut tx: Tx, ws: &WorkspaceId, old: &Conversation, new: &Conversation) -> Tx {
    if old.snoozed_until == new.snoozed_until {
        return tx;
    }
    if let Some((pk, sk)) = old.snoozed_until.and_then(|u| due_key(ws, &old.id, u)) {
        tx = tx.delete_if(pk, sk, "", vec![]);
    }
    if let Some((pk, sk)) = new.snoozed_until.and_then(|u| due_key(ws, &new.id, u)) {
        tx = tx.put(Item::from([
            ("pk".into(), s(pk)),
            ("sk".into(), s(sk)),
            ("workspace_id".into(), s(ws)),
            ("conversation_id".into(), s(&new.id)),
        ]));
    }
    tx
}

/// Reopen every conversation whose snooze has run out; answers how many woke.
pub async fn tick(app: &App) -> ApiResult<usize> {
    let upper = format!("{:013}#~", chrono::Utc::now().timestamp_millis());
    let mut woke = 0;
    for shard in 0..SHARDS {
        let pk = keys::SNOOZE_DUE.pk(&shard.to_string());
        let items = app.db.scan_range_on(None, &pk, &upper, None, 100, 10, usize::MAX).await?;
        for item in items {
            let (Some(sk), Some(ws), Some(conv)) =
                (store::get_str(&item, "sk"), store::get_str(&item, "workspace_id"), store::get_str(&item, "conversation_id"))
            else {
                continue;
            };
            if wake(app, &WorkspaceId::trusted(ws), &ConversationId::trusted(conv)).await? {
                woke += 1;
            } else {
                // The conversation is gone or no longer snoozed until then: the entry is stale.
                app.db.delete(&pk, sk).await?;
            }
        }
    }
    if woke > 0 {
        tracing::info!(woke, "helpdesk tick reopened snoozed conversations");
    }
    Ok(woke)
}

async fn wake(app: &App, ws: &WorkspaceId, conv: &ConversationId) -> ApiResult<bool> {
    let Some((old, version)) = app.db.get_object::<Conversation>(ws, &conversation_sk(conv)).await? else { return Ok(false) };
    let due = old.snoozed_until.is_some_and(|u| *u <= chrono::Utc::now());
    if old.status != ConversationStatus::Snoozed || !due {
        return Ok(false);
    }
    let mut c = old.clone();
    c.status = ConversationStatus::Open;
    c.snoozed_until = None;
    c.updated_at = shared::ids::Timestamp::now();
    let tx = changes(Tx::new(), ws, &old, &c)
        .replace(record(ws, &c)?, version)
        .event(conversation_event(ws, EventType::HelpdeskConversationUpdated, &c))
        .event(conversation_event(ws, EventType::HelpdeskConversationReopened, &c));
    match tx.commit(app).await {
        Ok(()) => Ok(true),
        // Changed meanwhile (a message, a PATCH): that change handled the snooze.
        Err(TxError::Condition(_)) => Ok(true),
        Err(e) => Err(TxError::stale(e)),
    }
}
