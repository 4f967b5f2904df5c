//! The id of every kind of object, in one place below the areas: a model that names another
//! area's object (a booking's contact, a post's channels) holds its typed id without
//! depending on that area. Each is a `#[serde(transparent)]` newtype over `<prefix>_<ULID>`.

/// Declared in `shared`: the mechanisms there key by them (API keys, confirmations, approval
/// requests, a contact's portal sessions).
pub use shared::ids::{ApiKeyId, ApprovalRequestId, ConfirmationId, ContactId};

shared::prefixed_id!(ActivityId, "act", "activity");
shared::prefixed_id!(BookingId, "bk", "booking");
shared::prefixed_id!(ChannelId, "ch", "channel");
shared::prefixed_id!(ConsentId, "cons", "consent");
shared::prefixed_id!(ConversationId, "conv", "conversation");
shared::prefixed_id!(DealId, "deal", "deal");
shared::prefixed_id!(DeliveryId, "whd", "webhook delivery");
shared::prefixed_id!(DomainId, "dom", "sending domain");
shared::prefixed_id!(EmailBatchId, "eb", "email batch");
shared::prefixed_id!(EmailId, "em", "email");
shared::prefixed_id!(EmailUploadId, "eup", "email upload");
shared::prefixed_id!(EndpointId, "wh", "webhook endpoint");
shared::prefixed_id!(ErasureId, "ge", "erasure");
shared::prefixed_id!(ExportId, "gx", "export");
shared::prefixed_id!(HelpdeskMessageId, "hm", "message");
shared::prefixed_id!(HoldId, "hold", "hold");
shared::prefixed_id!(ImportId, "imp", "import");
shared::prefixed_id!(PostId, "post", "post");
shared::prefixed_id!(ReplayId, "whr", "webhook replay");
shared::prefixed_id!(ResourceId, "res", "resource");
shared::prefixed_id!(ScanId, "scan", "scan");
shared::prefixed_id!(ServiceId, "svc", "service");
