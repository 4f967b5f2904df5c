//! Authority at the effect. An effect is something that leaves the workspace or cannot be
//! undone (an email, a remote post, an erasure, a new credential, a changed destination); each
//! is one type in `domain::effects` and one function in `domain` that takes an
//! [`Authority`] for it. An `Authority` is made only by [`Grant::authorize`], and a `Grant` only
//! by the request pipeline (`crate::http`) after it authenticated the caller and, for a
//! credential that needs confirmations, consumed a person's token for this exact request. So a
//! handler cannot reach an effect without the proof, whichever route it serves: the compiler
//! says so, not a flag on the route.
//!
//! Routes still declare the effects they may reach (`[effects = ...]` in `area!`): the
//! pipeline must know before the handler runs whether to demand a token, and the published
//! capability list is made of these declarations. A declaration cannot drift from the code:
//! authorising an effect the route did not declare is a 500 for every caller, so any test that
//! reaches it fails.

use crate::auth::{Credential, Principal, RequiresConfirmation, Scope};
use crate::confirmation::{Consumed, Refusal};
pub use crate::effect_value::{Shown, canonical, differences, digest};
use crate::error::ApiError;
use std::marker::PhantomData;

/// What an effect is, for the pipeline and the capability list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectInfo {
    /// The capability a person confirms for a restricted credential (`emails.send`).
    pub capability: &'static str,
    /// The least scope of a workspace credential that may cause it.
    pub needs: Scope,
    /// What it does, for `GET /capabilities`.
    pub summary: &'static str,
    /// A portal customer may cause it for themselves (the domain function checks that the
    /// target is the customer and asks for the customer's proof).
    pub self_service: bool,
    /// Anyone may cause it, without a credential: the domain function alone decides whom it
    /// reaches (a sign-in link goes only to the owner of the address typed).
    pub public: bool,
    /// Its function builds a value and asks authority over it ([`Valued`]): a confirmation runs
    /// it only if it carries the digest of the value the run builds.
    pub valued: bool,
}

impl EffectInfo {
    /// May `p` cause this effect on its own: a workspace credential (a key or a person) with
    /// the effect's least scope, needing no one's confirmation for it. What a person must hold
    /// to approve it for someone else, and what a reader must hold to see what it made (an
    /// export's link).
    pub fn held_by(&self, p: &Principal) -> bool {
        matches!(p.credential, Credential::ApiKey { .. } | Credential::OAuth(_))
            && p.workspace_id.is_some()
            && p.scopes.contains(&self.needs)
            && !p.requires_confirmation.covers(self.capability)
    }
}

/// One effect, as a type: `Authority<SendEmail>` cannot stand in for `Authority<EraseSubject>`.
pub trait Effect: 'static {
    const INFO: EffectInfo;
}

/// An effect whose function builds its complete value (what it will do, resolved against the
/// state: every recipient, file and header of an email; the contact an erasure reaches) before
/// it asks for authority, and performs exactly that value. A person is shown the value whole,
/// approves its digest, and the run is refused as stale when the value built again differs.
pub trait Valued: Effect {
    type Value: serde::Serialize;
}

/// An effect not yet described by a value: its approval binds the request and the objects it
/// names at their versions (`crate::confirmation`), and its preview is the request's body.
pub trait Unvalued: Effect {}

/// A valued effect that some routes still cause as a notice beside their own write (a booking's
/// confirmation, a helpdesk reply, a portal link), authorised before the message exists
/// ([`Grant::authorize_notice`]). docs/authority.md lists them.
pub trait Notice: Valued {}

/// Who may act, as the pipeline established it for one request.
#[derive(Clone, Debug)]
pub struct Grant {
    principal: Principal,
    declared: &'static [EffectInfo],
    confirmation: Option<Consumed>,
    /// The request, for the 428 that names what to confirm.
    method: String,
    path: String,
    body: bytes::Bytes,
}

/// Proof that one effect may happen now, and on whose behalf.
pub struct Authority<E: Effect> {
    by: String,
    customer: Option<String>,
    confirmation: Option<String>,
    /// The workspace's partition and the objects the person approved (none without a token).
    pk: String,
    bound: Vec<crate::confirmation::BoundKey>,
    /// A person approved this effect's value and the run built the same one.
    value_approved: bool,
    _effect: PhantomData<E>,
}

impl<E: Effect> std::fmt::Debug for Authority<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").field("effect", &E::INFO.capability).field("by", &self.by).finish_non_exhaustive()
    }
}

impl<E: Effect> Authority<E> {
    /// The subject on whose behalf (`key:<id>`, a person's `sub`, `portal:<contact>`, `operator:<what>`).
    pub fn by(&self) -> &str {
        &self.by
    }
    /// The contact of a portal customer acting for themselves; None for workspace credentials.
    pub fn customer(&self) -> Option<&str> {
        self.customer.as_deref()
    }
    /// The capability confirmation consumed for this request, if one was needed.
    pub fn confirmation(&self) -> Option<&str> {
        self.confirmation.as_deref()
    }
    /// The platform's operator acting through the admin CLI or the local stack's setup (AWS
    /// credentials, not an API credential). `tools/tests/layout.rs` keeps this out of
    /// `functions/` and `domain/`: no handler or worker may name it.
    #[doc(hidden)]
    pub fn operator(what: &str) -> Self {
        Self {
            by: format!("operator:{what}"),
            customer: None,
            confirmation: None,
            pk: String::new(),
            bound: vec![],
            value_approved: false,
            _effect: PhantomData,
        }
    }

    /// A person approved exactly this value (its digest matched at the run): the effect reaches
    /// nothing beyond it.
    pub fn value_approved(&self) -> bool {
        self.value_approved
    }

    /// The effect changes the object at `sk`, read at `version`: it must still be the version
    /// the person approved (428 `stale` otherwise). Objects nobody bound pass.
    pub fn approved(&self, sk: &str, version: i64) -> Result<(), ApiError> {
        match self.bound.iter().find(|b| b.sk == sk) {
            Some(b) if b.version != version => Err(crate::confirmation::stale(E::INFO.capability, &b.object, &b.id)),
            _ => Ok(()),
        }
    }

    /// The effect's own transaction: `writes` are the objects it writes itself, each read at a
    /// version, which must be the approved one ([`Authority::approved`]); every other object
    /// the person approved gets a condition that it is still at its approved version (or still
    /// absent), so a change after the token was consumed is refused with the write.
    pub fn guarded(&self, mut tx: crate::outbox::Tx, writes: &[(&str, i64)]) -> Result<crate::outbox::Tx, ApiError> {
        for (sk, version) in writes {
            self.approved(sk, *version)?;
        }
        for b in self.bound.iter().filter(|b| !writes.iter().any(|(sk, _)| *sk == b.sk)) {
            tx = b.still_in(tx, &self.pk);
        }
        Ok(tx)
    }

    /// [`Authority::guarded`] on a new transaction.
    pub fn tx(&self, writes: &[(&str, i64)]) -> Result<crate::outbox::Tx, ApiError> {
        self.guarded(crate::outbox::Tx::new(), writes)
    }

    /// The answer to a failed condition `i` of a transaction that began with `tx(&[])` (its
    /// checks, one per approved object, in order): that object changed since the person
    /// approved it (428 `stale`). None when `i` is a later write's.
    pub fn stale_at(&self, i: usize) -> Option<ApiError> {
        self.bound.get(i).map(|b| crate::confirmation::stale(E::INFO.capability, &b.object, &b.id))
    }
}

impl Grant {
    /// The platform's operator (the admin CLI, the local stack's setup, `make bench`): every
    /// effect the route list holds, no confirmation. Kept out of `functions/` and `domain/` as
    /// [`Authority::operator`] is.
    #[doc(hidden)]
    pub fn operator(what: &str, declared: &'static [EffectInfo]) -> Self {
        let principal = Principal {
            workspace_id: None,
            subject: format!("operator:{what}"),
            scopes: vec![Scope::Read, Scope::Write, Scope::Admin],
            credential: Credential::OAuth(Default::default()),
            requires_confirmation: RequiresConfirmation::All(false),
        };
        Self::new(principal, declared, None, "", "", bytes::Bytes::new())
    }

    /// Only the pipeline makes grants: `confirmation` is the token it consumed with the
    /// request's reservation (when the request brought one).
    pub(crate) fn new(
        principal: Principal,
        declared: &'static [EffectInfo],
        confirmation: Option<Consumed>,
        method: &str,
        path: &str,
        body: bytes::Bytes,
    ) -> Self {
        Self { principal, declared, confirmation, method: method.to_string(), path: path.to_string(), body }
    }

    /// The proof for effect `E`, or why not: 403 without the scope, 428 when the credential
    /// needs a person's confirmation and this request brought none, 500 when the route does not
    /// declare the effect (a defect the route's tests find).
    pub fn authorize<E: Unvalued>(&self) -> Result<Authority<E>, ApiError> {
        self.check::<E>(None)
    }

    /// The proof for the valued effect `E` about to do exactly `value`: as [`Grant::authorize`],
    /// and the 428 of a restricted credential carries the value (the approval request shows it
    /// whole and binds its digest). With a person's approval of a value, `value` must be the one
    /// approved: another digest is refused as stale (nothing runs; the pipeline names the fields
    /// that differ).
    pub fn authorize_value<E: Valued>(&self, value: &E::Value) -> Result<Authority<E>, ApiError> {
        let shown = Shown::of(E::INFO.capability, value).map_err(|e| ApiError::internal(format!("an effect's value: {e}")))?;
        self.check::<E>(Some(shown))
    }

    /// The proof for a notice (`E` is valued) sent beside a route's own write, authorised
    /// before its message exists: its approval binds the request and its objects, as an
    /// unvalued effect's does. Only the routes docs/authority.md lists call it.
    pub fn authorize_notice<E: Notice>(&self) -> Result<Authority<E>, ApiError> {
        self.check::<E>(None)
    }

    /// What `authorize_value` would refuse for the credential alone (a route it does not
    /// declare, a portal session, a missing scope), asked before the reads its value needs, so
    /// the refusal says nothing about the state (whether a contact exists). The customer acting
    /// for themselves, when the effect lets them.
    pub fn may<E: Effect>(&self) -> Result<Option<String>, ApiError> {
        let info = E::INFO;
        if !self.declared.iter().any(|d| d.capability == info.capability) {
            tracing::error!(capability = info.capability, "a route reached an effect it does not declare");
            return Err(ApiError::internal(format!("this route does not declare the effect {}", info.capability)));
        }
        let customer = match &self.principal.credential {
            Credential::Portal { contact_id, .. } | Credential::Link { contact_id, .. } if info.self_service => Some(contact_id.clone()),
            // No scope to check: the effect is everyone's, and its function picks the target.
            Credential::Public { .. } if info.public => return Ok(None),
            Credential::Portal { .. } | Credential::Link { .. } | Credential::Public { .. } => {
                return Err(ApiError::forbidden(format!("a portal session cannot {}", info.summary.to_lowercase())));
            }
            Credential::ApiKey { .. } | Credential::OAuth(_) => None,
        };
        if customer.is_none() && !self.principal.scopes.contains(&info.needs) {
            return Err(ApiError::forbidden(format!(
                "this credential lacks the {} scope needed to {}",
                info.needs.name(),
                info.summary.to_lowercase()
            )));
        }
        Ok(customer)
    }

    fn check<E: Effect>(&self, shown: Option<Shown>) -> Result<Authority<E>, ApiError> {
        let info = E::INFO;
        let customer = self.may::<E>()?;
        if matches!(self.principal.credential, Credential::Public { .. }) {
            return Ok(self.authority(None, None));
        }
        let confirmation = if self.principal.requires_confirmation.covers(info.capability) {
            // A request that brought no token runs until it reaches a restricted effect (a PATCH
            // of a draft needs none; of a scheduled post it does). Handlers authorise before
            // they write, and the pipeline frees the Idempotency-Key after a 428. A token
            // approves one effect: on a route that reaches several, it covers only its own.
            let refusal = match &self.confirmation {
                None => Refusal::Missing,
                Some(c) if c.capability != info.capability => Refusal::Mismatch("capability"),
                // A person approved a value: this run must do exactly that.
                Some(c) => match (&c.effect_digest, &shown) {
                    (Some(approved), Some(now)) if *approved != now.digest => {
                        let req = crate::confirmation::Request {
                            capability: info.capability,
                            method: &self.method,
                            path: &self.path,
                            body: &self.body,
                        };
                        let mut e = crate::confirmation::required(&req, Refusal::Changed);
                        if let (Some(meta), Some(apr)) = (e.details.first_mut().and_then(|d| d.meta.as_mut()), &c.approval_request_id) {
                            meta["approval_request_id"] = apr.clone().into();
                        }
                        e.effect = Some(Box::new(now.clone()));
                        return Err(e);
                    }
                    // A confirmation that names no value (minted without `effect_digest`)
                    // approves none: a valued effect runs only on the value a person saw.
                    (None, Some(_)) => Refusal::Mismatch("effect_digest"),
                    (Some(_), Some(_)) => return Ok(Authority { value_approved: true, ..self.authority(customer, Some(c)) }),
                    _ => return Ok(self.authority(customer, Some(c))),
                },
            };
            let req =
                crate::confirmation::Request { capability: info.capability, method: &self.method, path: &self.path, body: &self.body };
            let mut e = crate::confirmation::required(&req, refusal);
            e.effect = shown.map(Box::new);
            return Err(e);
        } else {
            self.confirmation.as_ref()
        };
        Ok(self.authority(customer, confirmation))
    }

    fn authority<E: Effect>(&self, customer: Option<String>, confirmation: Option<&Consumed>) -> Authority<E> {
        Authority {
            by: self.by(),
            customer,
            confirmation: confirmation.map(|c| c.id.clone()),
            pk: crate::store::ws_pk(self.principal.workspace_or_none()),
            // Only a token that approved this very effect binds it.
            bound: confirmation.filter(|c| c.capability == E::INFO.capability).map(|c| c.bound.clone()).unwrap_or_default(),
            value_approved: false,
            _effect: PhantomData,
        }
    }

    fn by(&self) -> String {
        match &self.principal.credential {
            Credential::Portal { contact_id, .. } => format!("portal:{contact_id}"),
            Credential::Link { object, contact_id } => format!("link:{object}:{contact_id}"),
            _ => self.principal.subject.clone(),
        }
    }

    /// The credential's confirmation requirements (a new key may not have fewer).
    pub fn requires_confirmation(&self) -> &RequiresConfirmation {
        &self.principal.requires_confirmation
    }
}

/// The capabilities a route may reach that this credential needs a person's confirmation for
/// (a token must confirm one of them; the first is named in a 428).
pub fn restricted_capabilities(declared: &[EffectInfo], restricted: &RequiresConfirmation) -> Vec<&'static str> {
    declared.iter().map(|d| d.capability).filter(|c| restricted.covers(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test effect's declaration.
    const fn info(capability: &'static str, needs: Scope, self_service: bool, valued: bool) -> EffectInfo {
        EffectInfo { capability, needs, summary: "Do it", self_service, public: false, valued }
    }

    struct Send;
    impl Effect for Send {
        const INFO: EffectInfo = info("emails.send", Scope::Write, false, false);
    }
    struct Erase;
    impl Effect for Erase {
        const INFO: EffectInfo = info("gdpr.erasure", Scope::Admin, true, false);
    }
    impl Unvalued for Send {}
    impl Unvalued for Erase {}

    /// An effect with a value: what it erases.
    struct Wipe;
    impl Effect for Wipe {
        const INFO: EffectInfo = info("gdpr.erasure", Scope::Admin, true, true);
    }
    impl Valued for Wipe {
        type Value = serde_json::Value;
    }

    #[test]
    fn a_valued_effect_runs_only_on_the_value_approved() {
        static WIPE: [EffectInfo; 1] = [Wipe::INFO];
        let p = principal(vec![Scope::Write, Scope::Admin], RequiresConfirmation::All(true));
        let asked = serde_json::json!({"subject": {"contact_id": null, "email": "ghost@example.com"}});
        let approved = Shown::of("gdpr.erasure", &asked).unwrap();
        // Without an approval the 428 carries the value, for the person to see whole.
        let g = Grant::new(p.clone(), &WIPE, None, "POST", "/gdpr/erasures", bytes::Bytes::new());
        let refused = g.authorize_value::<Wipe>(&asked).unwrap_err();
        assert_eq!(refused.status().as_u16(), 428);
        assert_eq!(refused.effect.as_deref(), Some(&approved));
        let consumed = |digest: Option<&str>| Consumed {
            id: "cc_1".into(),
            capability: "gdpr.erasure".into(),
            bound: vec![],
            effect_digest: digest.map(String::from),
            approval_request_id: Some("apr_1".into()),
        };
        let g = Grant::new(p.clone(), &WIPE, Some(consumed(Some(&approved.digest))), "POST", "/gdpr/erasures", bytes::Bytes::new());
        assert!(g.authorize_value::<Wipe>(&asked).is_ok(), "the same value runs");
        // The address moved to someone since: another value, refused, nothing runs.
        let now = serde_json::json!({"subject": {"contact_id": "ct_D", "email": "ghost@example.com"}});
        let stale = g.authorize_value::<Wipe>(&now).unwrap_err();
        let meta = stale.details[0].meta.clone().unwrap();
        assert_eq!(
            (stale.status().as_u16(), meta["reason"].as_str(), meta["approval_request_id"].as_str()),
            (428, Some("stale"), Some("apr_1"))
        );
        assert_eq!(stale.effect.map(|s| s.digest), Some(Shown::of("gdpr.erasure", &now).unwrap().digest));
        assert_eq!(differences(&asked, &now), vec!["/subject/contact_id".to_string()]);
        // A confirmation minted without a digest approves no value: refused, nothing runs.
        let g = Grant::new(p, &WIPE, Some(consumed(None)), "POST", "/gdpr/erasures", bytes::Bytes::new());
        let unbound = g.authorize_value::<Wipe>(&asked).unwrap_err();
        let meta = unbound.details[0].meta.clone().unwrap();
        assert_eq!((meta["reason"].as_str(), meta["mismatch"].as_str()), (Some("mismatch"), Some("effect_digest")));
    }

    #[test]
    fn a_value_digest_is_over_sorted_keys_and_names_every_difference() {
        let a = serde_json::json!({"b": [1, {"y": "x", "x": null}], "a": "\u{e9}"});
        assert_eq!(canonical(&a), r#"{"a":"é","b":[1,{"x":null,"y":"x"}]}"#);
        let mut reordered = serde_json::Map::new();
        reordered.insert("a".into(), "\u{e9}".into());
        reordered.insert("b".into(), serde_json::json!([1, {"x": null, "y": "x"}]));
        assert_eq!(digest(&a), digest(&serde_json::Value::Object(reordered)));
        let b = serde_json::json!({"b": [1, {"y": "z"}, 3], "a": "\u{e9}", "c/d": 1});
        assert_eq!(differences(&a, &b), vec!["/b".to_string(), "/c~1d".to_string()]);
        let c = serde_json::json!({"b": [1, {"y": "z", "x": null}], "a": "\u{e9}"});
        assert_eq!(differences(&a, &c), vec!["/b/1/y".to_string()]);
        assert_eq!(differences(&a, &a), Vec::<String>::new());
    }

    fn principal(scopes: Vec<Scope>, restricted: RequiresConfirmation) -> Principal {
        Principal {
            workspace_id: Some(crate::auth::WorkspaceId::trusted("ws_1")),
            subject: "key:key_1".into(),
            scopes,
            credential: Credential::ApiKey { key_id: "key_1".into() },
            requires_confirmation: restricted,
        }
    }

    #[test]
    fn an_authority_needs_the_declaration_the_scope_and_the_confirmation() {
        static BOTH: [EffectInfo; 2] = [Send::INFO, Erase::INFO];
        static SEND: [EffectInfo; 1] = [Send::INFO];
        let write = principal(vec![Scope::Read, Scope::Write], RequiresConfirmation::All(false));
        let grant = |p: &Principal, d: &'static [EffectInfo], c: Option<&str>| {
            let c = c.map(|id| Consumed {
                id: id.into(),
                capability: "emails.send".into(),
                bound: vec![],
                effect_digest: None,
                approval_request_id: None,
            });
            Grant::new(p.clone(), d, c, "POST", "/emails", bytes::Bytes::from_static(b"{}"))
        };
        assert!(grant(&write, &SEND, None).authorize::<Send>().is_ok());
        assert_eq!(grant(&write, &SEND, None).authorize::<Erase>().unwrap_err().status().as_u16(), 500);
        assert_eq!(grant(&write, &BOTH, None).authorize::<Erase>().unwrap_err().status().as_u16(), 403);
        // An earlier release's name of the capability restricts it as well.
        let restricted = principal(vec![Scope::Write], RequiresConfirmation::Only(vec!["emails.batch".into()]));
        let refused = grant(&restricted, &SEND, None).authorize::<Send>().unwrap_err();
        assert_eq!(refused.status().as_u16(), 428);
        assert_eq!(refused.details[0].meta.as_ref().unwrap()["capability"], "emails.send");
        let a = grant(&restricted, &SEND, Some("cc_1")).authorize::<Send>().unwrap();
        assert_eq!((a.by(), a.confirmation(), a.customer()), ("key:key_1", Some("cc_1"), None));
        // A token for one effect does not approve another the route can reach.
        let all = principal(vec![Scope::Write, Scope::Admin], RequiresConfirmation::All(true));
        let other = grant(&all, &BOTH, Some("cc_1")).authorize::<Erase>().unwrap_err();
        assert_eq!(other.details[0].meta.as_ref().unwrap()["mismatch"], "capability");
    }

    #[test]
    fn the_effect_checks_again_what_the_person_approved() {
        static SEND: [EffectInfo; 1] = [Send::INFO];
        let bound = |sk: &str, version| crate::confirmation::BoundKey { object: "contact".into(), id: sk.into(), sk: sk.into(), version };
        let c = Consumed {
            id: "cc_1".into(),
            capability: "emails.send".into(),
            bound: vec![bound("CT#1", 3), bound("TPL#a", 0)],
            effect_digest: None,
            approval_request_id: None,
        };
        let p = principal(vec![Scope::Write], RequiresConfirmation::All(true));
        let a = Grant::new(p, &SEND, Some(c), "POST", "/emails", bytes::Bytes::new()).authorize::<Send>().unwrap();
        assert!(a.approved("CT#1", 3).is_ok() && a.approved("OTHER", 9).is_ok());
        let stale = a.approved("CT#1", 4).unwrap_err();
        assert_eq!((stale.status().as_u16(), &stale.details[0].meta.as_ref().unwrap()["reason"]), (428, &serde_json::json!("stale")));
        // Every approved object but the ones the effect writes itself joins its transaction.
        assert_eq!(a.tx(&[]).unwrap().len(), 2);
        assert_eq!(a.tx(&[("CT#1", 3)]).unwrap().len(), 1);
        assert_eq!(a.tx(&[("CT#1", 4)]).err().map(|e| e.status().as_u16()), Some(428));
        // Without a token nothing is bound.
        let free = principal(vec![Scope::Write], RequiresConfirmation::All(false));
        let a = Grant::new(free, &SEND, None, "POST", "/emails", bytes::Bytes::new()).authorize::<Send>().unwrap();
        assert!(a.tx(&[]).unwrap().is_empty());
    }

    #[test]
    fn a_portal_session_reaches_only_self_service_effects_for_itself() {
        static BOTH: [EffectInfo; 2] = [Send::INFO, Erase::INFO];
        let p = Principal {
            workspace_id: Some(crate::auth::WorkspaceId::trusted("ws_1")),
            subject: "portal".into(),
            scopes: vec![],
            credential: Credential::Portal { session_id: "ps_1".into(), contact_id: "ct_1".into() },
            requires_confirmation: RequiresConfirmation::All(false),
        };
        let g = Grant::new(p, &BOTH, None, "POST", "/portal/me/erasure", bytes::Bytes::new());
        assert_eq!(g.authorize::<Send>().unwrap_err().status().as_u16(), 403);
        assert_eq!(g.authorize::<Erase>().unwrap().customer(), Some("ct_1"));
    }

    #[test]
    fn a_link_reaches_only_self_service_effects_for_its_contact() {
        static BOTH: [EffectInfo; 2] = [Send::INFO, Erase::INFO];
        let p = Principal::link(&crate::auth::WorkspaceId::trusted("ws_1"), "bk_1", "ct_1");
        assert_eq!((p.tenant_scope(), p.portal_contact()), ("LINK#ct_1".to_string(), None), "not a portal session");
        let g = Grant::new(p, &BOTH, None, "POST", "/booking/cancel", bytes::Bytes::new());
        assert_eq!(g.authorize::<Send>().unwrap_err().status().as_u16(), 403);
        let a = g.authorize::<Erase>().unwrap();
        assert_eq!((a.customer(), a.by()), (Some("ct_1"), "link:bk_1:ct_1"));
    }
}
