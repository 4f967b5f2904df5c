//! Every effect of the platform, declared once: what leaves the workspace or cannot be undone.
//! Each is a type; the one `domain` function that performs it takes a
//! `shared::authority::Authority` of that type, which only the request pipeline grants (after
//! scope and, for a restricted credential, a person's confirmation). Routes list the effects
//! they may reach (`[effects = ...]` in `area!`), and `GET /capabilities` is made of those lists.
//!
//! | effect | capability | least scope | portal customer |
//! |---|---|---|---|
//! | [`SendEmail`] | `emails.send` | write | to themselves only |
//! | [`PublishPost`] | `posts.publish` | write | no |
//! | [`EraseSubject`] | `gdpr.erasure` | admin | themselves, with an emailed code |
//! | [`ExportSubject`] | `gdpr.export.subject` | write | themselves, link to their address |
//! | [`ExportWorkspace`] | `gdpr.export.workspace` | admin | no |
//! | [`CreateApiKey`] | `api_keys.create` | admin | no |
//! | [`RevokeApiKey`] | `api_keys.revoke` | admin | no |
//! | [`ChangeMember`] | `members.change` | admin | no |
//! | [`EmailSignInLink`] | `portal.sign_in` | none: anyone, to the address's owner only | yes |
//! | [`OpenPortalSession`] | `portal.sessions.return` | admin | no |
//! | [`CreateWebhook`], [`UpdateWebhook`], [`DeleteWebhook`], [`RotateWebhookSecret`] | `webhooks.*` | admin | no |
//! | [`ConnectChannel`], [`UpdateChannel`], [`DeleteChannel`] | `channels.*` | admin | no |
//! | [`CreateSendingDomain`], [`DeleteSendingDomain`] | `emails.domains.*` | admin | no |
//! | [`UpdateWorkspace`] | `workspaces.update` | admin | no |

use shared::auth::Scope;
pub use shared::authority::{Authority, Effect, EffectInfo, Notice, Unvalued, Valued};

/// An effect's kind of value: `valued = true` marks one whose function builds a value, the complete
/// description of what it will do, and asks for authority over exactly that; its `impl Valued`
/// sits beside the value's type in the area that builds it (an area is above this module). An
/// effect without the mark is `Unvalued`: its approval binds the request and the objects it names.
macro_rules! valued {
    ($name:ident) => {
        impl Unvalued for $name {}
    };
    ($name:ident true) => {};
}

macro_rules! effects {
    ($( $(#[$doc:meta])* $name:ident = ($cap:literal, $needs:ident, $summary:literal, $self_service:literal $(, public = $public:literal)? $(, valued = $valued:tt)?); )*) => {
        $(
            $(#[$doc])*
            pub struct $name;
            impl Effect for $name {
                const INFO: EffectInfo =
                    EffectInfo {
                    capability: $cap,
                    needs: Scope::$needs,
                    summary: $summary,
                    self_service: $self_service,
                    public: false $(|| $public)?,
                    valued: false $(|| $valued)?,
                };
            }
            valued!($name $($valued)?);
        )*
        /// Every effect, for the capability list and the docs.
        pub const ALL: &[EffectInfo] = &[$(<$name as Effect>::INFO),*];
    };
}

effects! {
    /// An email leaves through SES: `POST /emails`, a batch, a helpdesk reply or a conversation
    /// started by staff, a booking's notifications, a portal sign-in link.
    SendEmail = ("emails.send", Write, "Send an email", true, valued = true);
    /// A post goes out to its channels, now or at its scheduled time, or again after a failure.
    PublishPost = ("posts.publish", Write, "Publish a post to its channels", false, valued = true);
    /// A person's data is erased for good.
    EraseSubject = ("gdpr.erasure", Admin, "Erase a person's data", true, valued = true);
    /// A person's data is exported.
    ExportSubject = ("gdpr.export.subject", Write, "Export a person's data", true, valued = true);
    /// The whole workspace's data is exported.
    ExportWorkspace = ("gdpr.export.workspace", Admin, "Export the whole workspace's data", false, valued = true);
    /// A new API key.
    CreateApiKey = ("api_keys.create", Admin, "Create an API key", false, valued = true);
    RevokeApiKey = ("api_keys.revoke", Admin, "Revoke an API key", false, valued = true);
    /// A person gains, changes or loses a role.
    ChangeMember = ("members.change", Admin, "Change a member's role", false, valued = true);
    /// A sign-in link and code emailed to whoever owns the address a visitor typed (the portal's
    /// sign-in page, `POST /portal/sign-in`): anyone may ask, only the owner receives it.
    EmailSignInLink = ("portal.sign_in", Write, "Email a customer a sign-in link to their own address", false, public = true);
    /// A portal session token handed to the caller instead of the customer's inbox.
    OpenPortalSession = ("portal.sessions.return", Admin, "Open a customer's portal session for the caller", false, valued = true);
    CreateWebhook = ("webhooks.create", Admin, "Create a webhook endpoint", false, valued = true);
    UpdateWebhook = ("webhooks.update", Admin, "Change a webhook endpoint", false, valued = true);
    DeleteWebhook = ("webhooks.delete", Admin, "Delete a webhook endpoint", false, valued = true);
    RotateWebhookSecret = ("webhooks.rotate_secret", Admin, "Rotate a webhook endpoint's signing secret", false, valued = true);
    ConnectChannel = ("channels.connect", Admin, "Connect a publishing channel", false, valued = true);
    /// A channel's destination or credentials change.
    UpdateChannel = ("channels.update", Admin, "Change a publishing channel", false, valued = true);
    DeleteChannel = ("channels.delete", Admin, "Delete a publishing channel", false, valued = true);
    CreateSendingDomain = ("emails.domains.create", Admin, "Add a sending domain", false, valued = true);
    DeleteSendingDomain = ("emails.domains.delete", Admin, "Delete a sending domain", false, valued = true);
    /// The workspace's settings (name, portal origins, look).
    UpdateWorkspace = ("workspaces.update", Admin, "Change the workspace's settings", false, valued = true);
}

/// The effects whose function sends an email through `emails::compose::send`: each decides to
/// whom before it calls it.
pub trait Mails: Effect {}
impl Mails for SendEmail {}
impl Mails for EmailSignInLink {}
/// Booking notices, helpdesk replies and portal links are still authorised before their message
/// exists (docs/authority.md).
impl Notice for SendEmail {}
