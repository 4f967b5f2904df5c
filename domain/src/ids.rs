//! The id of every kind of object, in one place below the areas: a model that names another
//! area's object (a booking's contact, a post's channels) holds its typed id without
//! depending on that area. Each is a `#[serde(transparent)]` newtype over `<prefix>_<ULID>`.

shared::prefixed_id!(ActivityId, "act", "activity");
shared::prefixed_id!(ApiKeyId, "key", "api key");
shared::prefixed_id!(ApprovalRequestId, "apr", "approval request");
shared::prefixed_id!(BookingId, "bk", "booking");
shared::prefixed_id!(ChannelId, "ch", "channel");
shared::prefixed_id!(ConfirmationId, "cc", "capability confirmation");
shared::prefixed_id!(ConsentId, "cons", "consent");
shared::prefixed_id!(ContactId, "ct", "contact");
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
    pub fn or_erased<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ContactId, D::Error> {
        let id = <String as serde::Deserialize>::deserialize(d)?;
        match id.is_empty() {
            true => Ok(Self::erased()),
            false => Self::parse(&id).ok_or_else(|| serde::de::Error::custom(Self::malformed())),
        }
    }
}
