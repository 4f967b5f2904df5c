//! Every webhook event type and the contract schema of its `data`: the one declaration the
//! contract's `webhooks` section, `GET /webhooks/event-types` and the payload check of the
//! end-to-end suite are made from. A test holds it to `shared::events::EVENT_TYPES`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub struct EventType {
    pub name: &'static str,
    /// The component schema of the event's `data`.
    pub data: &'static str,
    /// When it is sent, in a sentence.
    pub about: &'static str,
}

/// An event type as `GET /webhooks/event-types` lists it; one type's read adds its schema
/// and an example.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug)]
#[schema(as = WebhookEventType)]
pub struct EventTypeInfo {
    /// Always `event_type`.
    pub object: String,
    /// The event type, e.g. `post.published`.
    #[serde(rename = "type")]
    pub kind: String,
    pub description: String,
    /// The contract's component schema of the event's `data`.
    pub data_schema: String,
    /// The whole event's JSON Schema (draft 2020-12, with its `$defs`): on one type's read only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub schema: Option<serde_json::Value>,
    /// An event of this type, made from its schema: on one type's read only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub example: Option<serde_json::Value>,
}

pub const EVENT_CATALOG: &[EventType] = &[
    EventType { name: "api_key.created", data: "ApiKey", about: "An API key was created." },
    EventType { name: "api_key.revoked", data: "ApiKey", about: "An API key was revoked." },
    EventType { name: "approval.approved", data: "ApprovalEventData", about: "An approval request was approved." },
    EventType { name: "approval.denied", data: "ApprovalEventData", about: "An approval request was denied." },
    EventType { name: "approval.expired", data: "ApprovalEventData", about: "An approval request expired unanswered." },
    EventType { name: "approval.requested", data: "ApprovalEventData", about: "An approval request was asked for." },
    EventType {
        name: "approval.stale",
        data: "ApprovalEventData",
        about: "An approved request's run was refused, nothing ran: what it would do changed since the approval.",
    },
    EventType { name: "booking.cancelled", data: "Booking", about: "A booking was cancelled." },
    EventType { name: "booking.completed", data: "Booking", about: "A booking was completed." },
    EventType { name: "booking.confirmed", data: "Booking", about: "A booking was confirmed." },
    EventType { name: "booking.created", data: "Booking", about: "A booking was created." },
    EventType { name: "booking.no_show", data: "Booking", about: "A booking was marked a no-show." },
    EventType { name: "booking.rescheduled", data: "BookingRescheduledData", about: "A booking was moved to another time." },
    EventType { name: "booking.resource.created", data: "Resource", about: "A bookable resource was created." },
    EventType { name: "booking.resource.deleted", data: "Resource", about: "A bookable resource was deleted." },
    EventType { name: "booking.resource.updated", data: "Resource", about: "A bookable resource was changed." },
    EventType { name: "booking.service.created", data: "Service", about: "A bookable service was created." },
    EventType { name: "booking.service.deleted", data: "Service", about: "A bookable service was deleted." },
    EventType { name: "booking.service.updated", data: "Service", about: "A bookable service was changed." },
    EventType {
        name: "capability.confirmed",
        data: "CapabilityConfirmation",
        about: "A capability confirmation was issued (by a person, or by approving an approval request).",
    },
    EventType {
        name: "capability.used",
        data: "CapabilityUsedData",
        about: "A capability confirmation was used by the request it confirms.",
    },
    EventType { name: "channel.connected", data: "Channel", about: "A channel was connected." },
    EventType { name: "channel.deleted", data: "Channel", about: "A channel was deleted." },
    EventType { name: "channel.disconnected", data: "Channel", about: "A channel was disconnected." },
    EventType { name: "channel.updated", data: "Channel", about: "A channel was changed." },
    EventType { name: "contact.created", data: "Contact", about: "A contact was created." },
    EventType { name: "contact.deleted", data: "Contact", about: "A contact was deleted." },
    EventType { name: "contact.import.completed", data: "ImportJob", about: "A contact import was completed." },
    EventType { name: "contact.note.added", data: "Activity", about: "A note was added to a contact." },
    EventType {
        name: "contact.unsubscribed",
        data: "ContactUnsubscribedData",
        about: "An address unsubscribed from marketing mail through an email's unsubscribe link (its contact, if any, also changes: contact.updated).",
    },
    EventType { name: "contact.updated", data: "Contact", about: "A contact was changed." },
    EventType { name: "deal.created", data: "Deal", about: "A deal was created." },
    EventType { name: "deal.deleted", data: "Deal", about: "A deal was deleted." },
    EventType { name: "deal.lost", data: "Deal", about: "A deal was lost." },
    EventType { name: "deal.reopened", data: "Deal", about: "A deal was reopened." },
    EventType { name: "deal.updated", data: "Deal", about: "A deal was changed." },
    EventType { name: "deal.won", data: "Deal", about: "A deal was won." },
    EventType { name: "email.bounced", data: "Email", about: "An email bounced." },
    EventType { name: "email.cancelled", data: "Email", about: "An email was cancelled." },
    EventType { name: "email.complained", data: "Email", about: "An email drew a complaint." },
    EventType { name: "email.delivered", data: "Email", about: "An email was delivered." },
    EventType { name: "email.domain.created", data: "SendingDomain", about: "A sending domain was created." },
    EventType { name: "email.domain.deleted", data: "SendingDomain", about: "A sending domain was deleted." },
    EventType { name: "email.domain.failed", data: "SendingDomain", about: "A sending domain failed its verification." },
    EventType { name: "email.domain.verified", data: "SendingDomain", about: "A sending domain was verified." },
    EventType { name: "email.failed", data: "Email", about: "An email failed." },
    EventType { name: "email.queued", data: "Email", about: "An email was queued for sending." },
    EventType { name: "email.scheduled", data: "Email", about: "An email was scheduled." },
    EventType { name: "email.sent", data: "Email", about: "An email was sent." },
    EventType { name: "email.suppressed", data: "Email", about: "An email was not sent: every recipient is suppressed." },
    EventType {
        name: "email.suppression.removed",
        data: "SuppressionRemovedData",
        about: "An address was taken off the suppression list.",
    },
    EventType { name: "gdpr.consent.granted", data: "Consent", about: "A consent was granted." },
    EventType { name: "gdpr.consent.withdrawn", data: "Consent", about: "A consent was withdrawn." },
    EventType { name: "gdpr.erasure.completed", data: "ErasureEventData", about: "A GDPR erasure was completed." },
    EventType { name: "gdpr.erasure.failed", data: "ErasureEventData", about: "A GDPR erasure failed." },
    EventType { name: "gdpr.export.completed", data: "ExportEventData", about: "A GDPR export was completed." },
    EventType { name: "gdpr.export.failed", data: "ExportEventData", about: "A GDPR export failed." },
    EventType { name: "helpdesk.conversation.assigned", data: "Conversation", about: "A helpdesk conversation was assigned." },
    EventType { name: "helpdesk.conversation.closed", data: "Conversation", about: "A helpdesk conversation was closed." },
    EventType { name: "helpdesk.conversation.created", data: "Conversation", about: "A helpdesk conversation was created." },
    EventType { name: "helpdesk.conversation.reopened", data: "Conversation", about: "A helpdesk conversation was reopened." },
    EventType { name: "helpdesk.conversation.updated", data: "Conversation", about: "A helpdesk conversation was changed." },
    EventType {
        name: "helpdesk.message.delivery_updated",
        data: "HelpdeskDeliveryUpdate",
        about: "A staff reply's delivery status changed.",
    },
    EventType { name: "helpdesk.message.received", data: "Message", about: "A helpdesk message was received." },
    EventType { name: "helpdesk.message.sent", data: "Message", about: "A helpdesk message was sent." },
    EventType { name: "helpdesk.note.added", data: "Message", about: "A staff note was added to a conversation." },
    EventType { name: "portal.session.created", data: "PortalSessionCreatedData", about: "A customer portal session was created." },
    EventType { name: "post.created", data: "Post", about: "A post was created." },
    EventType { name: "post.deleted", data: "Post", about: "A post was deleted." },
    EventType { name: "post.failed", data: "Post", about: "A post failed." },
    EventType { name: "post.partially_failed", data: "Post", about: "A post was published on some channels and failed on others." },
    EventType { name: "post.published", data: "Post", about: "A post was published." },
    EventType { name: "post.publishing", data: "Post", about: "A post started publishing." },
    EventType { name: "post.scheduled", data: "Post", about: "A post was scheduled." },
    EventType { name: "post.unscheduled", data: "Post", about: "A post was unscheduled." },
    EventType { name: "post.updated", data: "Post", about: "A post was changed." },
    EventType { name: "post.variant.failed", data: "VariantEventData", about: "A post's variant on one channel failed." },
    EventType { name: "post.variant.published", data: "VariantEventData", about: "A post's variant on one channel was published." },
    EventType { name: "scan.completed", data: "ScanEventData", about: "A website scan was completed." },
    EventType { name: "scan.failed", data: "ScanEventData", about: "A website scan failed." },
    EventType { name: "webhook.endpoint.created", data: "Endpoint", about: "A webhook endpoint was created." },
    EventType { name: "webhook.endpoint.deleted", data: "Endpoint", about: "A webhook endpoint was deleted." },
    EventType { name: "webhook.endpoint.disabled", data: "Endpoint", about: "A webhook endpoint was disabled by the platform." },
    EventType { name: "webhook.endpoint.secret_rotated", data: "Endpoint", about: "A webhook endpoint's secret was rotated." },
    EventType { name: "webhook.endpoint.updated", data: "Endpoint", about: "A webhook endpoint was changed." },
    EventType {
        name: "webhook.replay.completed",
        data: "Replay",
        about: "A webhook replay ended (its status says whether it completed or failed).",
    },
    EventType { name: "webhook.test", data: "TestEventData", about: "A test event, sent to one endpoint by POST /webhooks/{id}/test." },
    EventType { name: "workspace.created", data: "Workspace", about: "The workspace was created." },
    EventType { name: "workspace.member.added", data: "Member", about: "A member was added to the workspace." },
    EventType { name: "workspace.member.updated", data: "Member", about: "A member of the workspace was changed." },
    EventType { name: "workspace.updated", data: "Workspace", about: "The workspace was changed." },
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_catalog_lists_every_event_type_once() {
        let listed: Vec<&str> = super::EVENT_CATALOG.iter().map(|t| t.name).collect();
        assert_eq!(listed, shared::events::EVENT_TYPES, "the catalog is EVENT_TYPES, in its order");
    }
}
