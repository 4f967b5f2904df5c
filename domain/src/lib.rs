//! The areas' data and rules, below every function crate: models, the key registry, state
//! transitions, every operation a route performs (validation, transactions, effects), the
//! operations one area performs on another's data, and the workers (`publishing`, `sending`,
//! `webhooks::dispatch`, `contacts::import`, `gdpr::worker`). Function crates parse, call one
//! operation here and answer; they depend on this crate and `shared`, never on each other.

pub mod approvals;
pub mod bookings;
pub mod capabilities;
pub mod channels;
pub mod contacts;
pub mod deals;
pub mod effects;
pub mod emails;
pub mod gdpr;
pub mod helpdesk;
pub mod ids;
pub mod keys;
pub mod portal;
pub mod posts;
pub mod privacy;
pub mod publishing;
pub mod scans;
pub mod sending;
pub mod webhooks;
pub mod workspaces;
