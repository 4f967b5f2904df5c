//! The areas' data and rules, below every function crate: models, the key registry, state
//! transitions, and the operations one area performs on another's data (a contact's
//! suppression status, unlinking a contact's deals, a workspace's email senders, the webhook
//! endpoints of a workspace). Function crates depend on this crate and `shared`, never on
//! each other.

pub mod bookings;
pub mod capabilities;
pub mod channels;
pub mod contacts;
pub mod deals;
pub mod effects;
pub mod emails;
pub mod gdpr;
pub mod helpdesk;
pub mod keys;
pub mod portal;
pub mod posts;
pub mod privacy;
pub mod publishing;
pub mod scans;
pub mod webhooks;
pub mod workspaces;
