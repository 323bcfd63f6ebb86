//! API keys: Honcho v3.0.12's JWTs (docs/security.md). HS256, the key is the secret's bytes; claims `ad` (admin),
//! `w` (workspace), `p` (peer), `s` (session), `t` (creation time, informational) and `exp`
//! (expiry, seconds since the epoch). A key decodes to a [`Principal`]; what a principal may reach
//! is decided by the rules of [`crate::access`].
//!
//! Two defects of Honcho v3.0.12 are fixed here: `exp` is numeric (Honcho mints an ISO string that
//! its own verifier then rejects, so expiring keys never worked), and a non-admin token with no
//! scope at all is refused instead of passing the self-authorising routes.
//!
//! Auth is off when no secret is configured (`HONCHO_AUTH_SECRET` unset): every request is then
//! an admin, as in Honcho v3.0.12 with `AUTH_USE_AUTH=false`.

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// Auth's flag: the secret keys are signed with.
#[derive(clap::Args, Clone)]
pub struct AuthArgs {
    /// Secret that signs API keys (HS256). Unset: auth is off and every request is an admin.
    #[arg(long = "auth-secret", env = "HONCHO_AUTH_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
}

impl fmt::Debug for AuthArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secret = self.secret.as_ref().map(|_| "***");
        f.debug_struct("AuthArgs").field("secret", &secret).finish()
    }
}

impl AuthArgs {
    pub fn auth(&self) -> Result<Auth, EmptySecret> {
        Auth::from_secret(self.secret.as_deref())
    }
}

/// Who is calling, as far as authorization is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// Everything (an admin key, or any request while auth is off).
    Admin,
    /// Everything in one workspace.
    Workspace(String),
    /// One peer of a workspace: its own data, and what it may read as an active session member.
    Peer { workspace: String, peer: String },
    /// One session of a workspace.
    Session { workspace: String, session: String },
    /// The sessions of one scope of a workspace, read only: their messages, and recall (search,
    /// representation, chat) confined to them (docs/scopes.md).
    Scope { workspace: String, scope: String },
}

impl Principal {
    /// The workspace a scoped key belongs to (None for admin).
    pub fn workspace(&self) -> Option<&str> {
        match self {
            Principal::Admin => None,
            Principal::Workspace(w)
            | Principal::Peer { workspace: w, .. }
            | Principal::Session { workspace: w, .. }
            | Principal::Scope { workspace: w, .. } => Some(w),
        }
    }

    /// The scope a key is limited to, if any.
    pub fn scope(&self) -> Option<&str> {
        match self {
            Principal::Scope { scope, .. } => Some(scope),
            _ => None,
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Principal::Admin => write!(f, "an admin key"),
            Principal::Workspace(w) => write!(f, "a workspace key for {w:?}"),
            Principal::Peer { workspace, peer } => {
                write!(f, "a peer key for {peer:?} in {workspace:?}")
            }
            Principal::Session { workspace, session } => {
                write!(f, "a session key for {session:?} in {workspace:?}")
            }
            Principal::Scope { workspace, scope } => {
                write!(f, "a scope key for {scope:?} in {workspace:?}")
            }
        }
    }
}

/// Why a request has no principal. Every variant is answered with UNAUTHENTICATED.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("no access token provided (send `Authorization: Bearer <key>`)")]
    Missing,
    #[error("the Authorization header must be `Bearer <key>`")]
    NotBearer,
    #[error("invalid JWT")]
    Invalid,
    #[error("JWT expired")]
    Expired,
    #[error("the key names a peer or session without a workspace")]
    ScopeWithoutWorkspace,
    #[error("the key has no scope (no admin flag, workspace, peer or session)")]
    NoScope,
    #[error("a key limited to a scope cannot also name a peer or a session")]
    ScopeWithPeerOrSession,
}

/// `HONCHO_AUTH_SECRET` set to nothing: it would sign keys anyone can forge.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("HONCHO_AUTH_SECRET is set but empty")]
pub struct EmptySecret;

/// Why a key cannot be minted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MintError {
    #[error("auth is disabled (set HONCHO_AUTH_SECRET to mint keys)")]
    Disabled,
    #[error("a key needs a workspace, a peer or a session")]
    NoScope,
    #[error("a key for a peer or a session needs its workspace too")]
    ScopeWithoutWorkspace,
    #[error("an admin key cannot also be scoped to a workspace, peer or session")]
    AdminWithScope,
    #[error("a key limited to a scope cannot also name a peer or a session")]
    ScopeWithPeerOrSession,
    #[error("signing the key failed")]
    Signing,
}

/// The claims of a key, as Honcho v3.0.12 names them. Absent claims are omitted when minting; other
/// claims (`iat`, ...) are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Creation time (ISO 8601, Z); informational.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t: Option<String>,
    /// Expiry, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ad: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<String>,
    /// A scope of `w` the key is limited to (this server's; Honcho has no such claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sc: Option<String>,
}

impl Claims {
    /// The principal these claims name. `s` wins over `p` (Honcho v3.0.12: a session key reaches only
    /// its session, even when the token also names a peer).
    pub fn principal(&self) -> Result<Principal, AuthError> {
        if self.ad == Some(true) {
            return Ok(Principal::Admin);
        }
        // Honcho v3.0.12 treats empty strings as absent.
        let some = |v: &Option<String>| v.clone().filter(|x| !x.is_empty());
        if let Some(scope) = some(&self.sc) {
            return match (some(&self.w), some(&self.p), some(&self.s)) {
                (None, _, _) => Err(AuthError::ScopeWithoutWorkspace),
                (Some(workspace), None, None) => Ok(Principal::Scope { workspace, scope }),
                _ => Err(AuthError::ScopeWithPeerOrSession),
            };
        }
        match (some(&self.w), some(&self.p), some(&self.s)) {
            (None, None, None) => Err(AuthError::NoScope),
            (None, _, _) => Err(AuthError::ScopeWithoutWorkspace),
            (Some(workspace), _, Some(session)) => Ok(Principal::Session { workspace, session }),
            (Some(workspace), Some(peer), None) => Ok(Principal::Peer { workspace, peer }),
            (Some(w), None, None) => Ok(Principal::Workspace(w)),
        }
    }
}

/// What a key to mint covers.
#[derive(Clone, Debug, Default)]
pub struct KeySpec {
    pub admin: bool,
    pub workspace: Option<String>,
    pub peer: Option<String>,
    pub session: Option<String>,
    /// Limits a workspace key to one scope's sessions.
    pub scope: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

impl KeySpec {
    /// The claims of this key, refused as Honcho v3.0.12's `/keys` does: a scope is needed, and a peer
    /// or session needs its workspace.
    pub fn claims(&self, now: DateTime<Utc>) -> Result<Claims, MintError> {
        let some = |v: &Option<String>| v.clone().filter(|x| !x.is_empty());
        let (w, p, s) = (some(&self.workspace), some(&self.peer), some(&self.session));
        let sc = some(&self.scope);
        if self.admin && (w.is_some() || p.is_some() || s.is_some() || sc.is_some()) {
            return Err(MintError::AdminWithScope);
        }
        if sc.is_some() && (p.is_some() || s.is_some()) {
            return Err(MintError::ScopeWithPeerOrSession);
        }
        if !self.admin {
            if w.is_none() && p.is_none() && s.is_none() && sc.is_none() {
                return Err(MintError::NoScope);
            }
            if w.is_none() {
                return Err(MintError::ScopeWithoutWorkspace);
            }
        }
        Ok(Claims {
            t: Some(now.to_rfc3339_opts(SecondsFormat::Secs, true)),
            exp: self.expires_at.map(|e| e.timestamp().max(0) as u64),
            ad: self.admin.then_some(true),
            w,
            p,
            s,
            sc,
        })
    }
}

struct Keys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

/// The server's auth mode: off, or on with a secret. Cheap to clone. Deliberately not `Default`:
/// "off" is always spelled out ([`Auth::disabled`]).
#[derive(Clone)]
pub struct Auth(Option<Arc<Keys>>);

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the secret.
        f.write_str(if self.enabled() {
            "Auth(on)"
        } else {
            "Auth(off)"
        })
    }
}

/// The outcome of authenticating one request (or one WebSocket connection), kept in the
/// request's data for the guards. A failure is not answered at once: every guarded field answers
/// UNAUTHENTICATED, and `/health`, `/ready` and introspection stay open.
///
/// It keeps the key's expiry: a WebSocket connection is authenticated once, at `connection_init`,
/// and lives on, so [`Caller::principal`] checks the expiry again on every use (every operation
/// and every event), not only when the key was read.
#[derive(Clone, Debug)]
pub struct Caller {
    principal: Result<Principal, AuthError>,
    expires_at: Option<u64>,
}

impl Caller {
    /// A caller whose key never expires (or no key at all).
    pub fn new(principal: Result<Principal, AuthError>) -> Self {
        Caller {
            principal,
            expires_at: None,
        }
    }

    /// Who calls, as of now: `Expired` once the key's `exp` has passed.
    pub fn principal(&self) -> Result<Principal, AuthError> {
        if self.expires_at.is_some_and(|exp| now_secs() > exp) {
            return Err(AuthError::Expired);
        }
        self.principal.clone()
    }

    /// When a valid key stops working (None: never, or there is no valid key).
    pub fn expires_at(&self) -> Option<DateTime<Utc>> {
        let exp = self.expires_at.filter(|_| self.principal.is_ok())?;
        DateTime::from_timestamp(i64::try_from(exp).ok()?, 0)
    }
}

/// Seconds since the epoch, as `exp` counts them.
fn now_secs() -> u64 {
    Utc::now().timestamp().max(0) as u64
}

impl Auth {
    /// Auth off: every request is an admin.
    pub fn disabled() -> Self {
        Auth(None)
    }

    /// Auth on, with keys signed by `secret` (HS256 over its bytes). An empty secret is refused:
    /// it would sign keys anyone can forge.
    pub fn with_secret(secret: &str) -> Result<Self, EmptySecret> {
        let (Ok(encoding), Ok(decoding)) = (
            EncodingKey::from_secret(secret.as_bytes()),
            DecodingKey::from_secret(secret.as_bytes()),
        ) else {
            return Err(EmptySecret);
        };
        let mut validation = Validation::new(Algorithm::HS256);
        // Honcho v3.0.12's keys usually carry no `exp`; when present it is checked, to the second.
        validation.required_spec_claims.clear();
        validation.validate_exp = true;
        validation.leeway = 0;
        validation.validate_aud = false;
        Ok(Auth(Some(Arc::new(Keys {
            encoding,
            decoding,
            validation,
        }))))
    }

    /// From the configured secret: unset means off; an empty secret is refused.
    pub fn from_secret(secret: Option<&str>) -> Result<Self, EmptySecret> {
        match secret {
            None => Ok(Auth::disabled()),
            Some(s) => Auth::with_secret(s),
        }
    }

    pub fn enabled(&self) -> bool {
        self.0.is_some()
    }

    /// Decodes and checks a key.
    pub fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        self.caller(token).principal()
    }

    /// Decodes and checks a key, keeping its expiry.
    fn caller(&self, token: &str) -> Caller {
        let Some(keys) = &self.0 else {
            return Caller::new(Ok(Principal::Admin));
        };
        let decoded = jsonwebtoken::decode::<Claims>(token, &keys.decoding, &keys.validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => AuthError::Expired,
                _ => AuthError::Invalid,
            });
        match decoded {
            Ok(data) => Caller {
                principal: data.claims.principal(),
                expires_at: data.claims.exp,
            },
            Err(e) => Caller::new(Err(e)),
        }
    }

    /// Authenticates the value of an `Authorization` header (None when absent). With auth off,
    /// every request is an admin, header or not.
    pub fn authenticate(&self, authorization: Option<&str>) -> Caller {
        if !self.enabled() {
            return Caller::new(Ok(Principal::Admin));
        }
        let Some(value) = authorization else {
            return Caller::new(Err(AuthError::Missing));
        };
        let value = value.trim();
        let token = match value.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
            _ => return Caller::new(Err(AuthError::NotBearer)),
        };
        self.caller(token)
    }

    /// Authenticates a GraphQL WebSocket `connection_init` payload: `{"Authorization": "Bearer
    /// <key>"}` (the key name is matched case-insensitively; a payload without it is a request
    /// without a header).
    pub fn authenticate_connection_init(&self, payload: &serde_json::Value) -> Caller {
        let header = payload.as_object().and_then(|o| {
            o.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                .map(|(_, v)| v.as_str().unwrap_or_default())
        });
        self.authenticate(header)
    }

    /// Signs a key.
    pub fn mint(&self, spec: &KeySpec) -> Result<String, MintError> {
        let keys = self.0.as_ref().ok_or(MintError::Disabled)?;
        let claims = spec.claims(Utc::now())?;
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &keys.encoding)
            .map_err(|_| MintError::Signing)
    }
}

/// Parses a duration such as `90s`, `15m`, `1h 30m`, `7d` or `2w` (humantime's units; a bare
/// number is seconds).
pub fn parse_duration(text: &str) -> Result<chrono::Duration, String> {
    let text = text.trim();
    let seconds;
    let spelled = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        seconds = format!("{text}s");
        &seconds
    } else {
        text
    };
    let duration = humantime::parse_duration(spelled)
        .map_err(|e| format!("{text:?} is not a duration like 90s, 15m, 1h, 7d: {e}"))?;
    chrono::Duration::from_std(duration)
        .ok()
        .filter(|d| *d > chrono::Duration::zero())
        .ok_or_else(|| format!("{text:?} must be a positive duration"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sign(secret: &str, claims: serde_json::Value) -> String {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(secret.as_bytes()).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn an_empty_secret_is_refused_and_no_secret_means_auth_off() {
        assert_eq!(Auth::from_secret(Some("")).err(), Some(EmptySecret));
        assert!(matches!(Auth::from_secret(None), Ok(Auth(None))));
        assert!(matches!(
            Auth::from_secret(Some("s3cret")),
            Ok(Auth(Some(_)))
        ));
    }

    #[test]
    fn claims_decide_the_principal() {
        let auth = Auth::with_secret("s3cret").unwrap();
        let p = |c| auth.verify(&sign("s3cret", c));
        assert_eq!(p(json!({"t": "", "ad": true})), Ok(Principal::Admin));
        assert_eq!(p(json!({"w": "a"})), Ok(Principal::Workspace("a".into())));
        assert_eq!(
            p(json!({"w": "a", "p": "x"})),
            Ok(Principal::Peer {
                workspace: "a".into(),
                peer: "x".into()
            })
        );
        assert_eq!(
            p(json!({"w": "a", "p": "x", "s": "y"})),
            Ok(Principal::Session {
                workspace: "a".into(),
                session: "y".into()
            })
        );
        assert_eq!(p(json!({"p": "x"})), Err(AuthError::ScopeWithoutWorkspace));
        assert_eq!(
            p(json!({"w": "", "s": "y"})),
            Err(AuthError::ScopeWithoutWorkspace)
        );
        assert_eq!(
            p(json!({"t": "2024-01-01T00:00:00Z"})),
            Err(AuthError::NoScope)
        );
        assert_eq!(p(json!({"ad": false, "w": ""})), Err(AuthError::NoScope));
        // Honcho v3.0.12's ISO `exp` never worked there; here it is an invalid token, not a crash.
        assert_eq!(
            p(json!({"w": "a", "exp": "2099-01-01T00:00:00Z"})),
            Err(AuthError::Invalid)
        );
        assert_eq!(
            p(json!({"w": "a", "iat": 1})),
            Ok(Principal::Workspace("a".into()))
        );
    }

    #[test]
    fn expiry_is_checked_and_signatures_matter() {
        let auth = Auth::with_secret("s3cret").unwrap();
        let now = Utc::now().timestamp();
        let future = sign("s3cret", json!({"w": "a", "exp": now + 60}));
        let past = sign("s3cret", json!({"w": "a", "exp": now - 1}));
        assert!(auth.verify(&future).is_ok());
        assert_eq!(auth.verify(&past), Err(AuthError::Expired));
        let other = sign("other", json!({"w": "a"}));
        assert_eq!(auth.verify(&other), Err(AuthError::Invalid));
        let none = jsonwebtoken::encode(
            &Header::new(Algorithm::HS384),
            &json!({"w": "a"}),
            &EncodingKey::from_secret(b"s3cret").unwrap(),
        )
        .unwrap();
        assert_eq!(auth.verify(&none), Err(AuthError::Invalid));
        assert_eq!(auth.verify("not.a.jwt"), Err(AuthError::Invalid));
    }

    #[test]
    fn a_caller_whose_key_expires_later_is_unauthenticated_from_then_on() {
        let ws = Principal::Workspace("a".into());
        let now = now_secs();
        let live = Caller {
            principal: Ok(ws.clone()),
            expires_at: Some(now + 60),
        };
        assert_eq!(live.principal(), Ok(ws.clone()));
        assert_eq!(
            live.expires_at().map(|t| t.timestamp() as u64),
            Some(now + 60)
        );
        let lapsed = Caller {
            principal: Ok(ws),
            expires_at: Some(now - 1),
        };
        assert_eq!(lapsed.principal(), Err(AuthError::Expired));
        assert_eq!(Caller::new(Err(AuthError::Invalid)).expires_at(), None);
    }

    #[test]
    fn minted_keys_round_trip() {
        let auth = Auth::with_secret("s3cret").unwrap();
        let spec = KeySpec {
            workspace: Some("a".into()),
            peer: Some("x".into()),
            expires_at: Some(Utc::now() + chrono::Duration::hours(1)),
            ..Default::default()
        };
        let key = auth.mint(&spec).unwrap();
        assert_eq!(
            auth.verify(&key),
            Ok(Principal::Peer {
                workspace: "a".into(),
                peer: "x".into()
            })
        );
        let admin = auth
            .mint(&KeySpec {
                admin: true,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(auth.verify(&admin), Ok(Principal::Admin));
        let refuse = |spec: KeySpec| auth.mint(&spec).unwrap_err();
        assert_eq!(refuse(KeySpec::default()), MintError::NoScope);
        assert_eq!(
            refuse(KeySpec {
                session: Some("s".into()),
                ..Default::default()
            }),
            MintError::ScopeWithoutWorkspace
        );
        assert_eq!(
            refuse(KeySpec {
                admin: true,
                workspace: Some("a".into()),
                ..Default::default()
            }),
            MintError::AdminWithScope
        );
        assert_eq!(Auth::disabled().mint(&spec), Err(MintError::Disabled));
    }

    #[test]
    fn a_scope_key_names_its_workspace_and_scope_and_nothing_narrower() {
        let auth = Auth::with_secret("s3cret").unwrap();
        let key = auth
            .mint(&KeySpec {
                workspace: Some("a".into()),
                scope: Some("work".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            auth.verify(&key),
            Ok(Principal::Scope {
                workspace: "a".into(),
                scope: "work".into()
            })
        );
        let p = |c| auth.verify(&sign("s3cret", c));
        assert_eq!(
            p(json!({"sc": "work"})),
            Err(AuthError::ScopeWithoutWorkspace)
        );
        assert_eq!(
            p(json!({"w": "a", "p": "x", "sc": "work"})),
            Err(AuthError::ScopeWithPeerOrSession)
        );
        let refuse = |spec: KeySpec| auth.mint(&spec).unwrap_err();
        assert_eq!(
            refuse(KeySpec {
                workspace: Some("a".into()),
                session: Some("s".into()),
                scope: Some("work".into()),
                ..Default::default()
            }),
            MintError::ScopeWithPeerOrSession
        );
        assert_eq!(
            refuse(KeySpec {
                scope: Some("work".into()),
                ..Default::default()
            }),
            MintError::ScopeWithoutWorkspace
        );
    }

    #[test]
    fn headers_and_connection_init() {
        let auth = Auth::with_secret("s3cret").unwrap();
        let key = sign("s3cret", json!({"w": "a"}));
        let ws = Ok(Principal::Workspace("a".into()));
        assert_eq!(
            auth.authenticate(Some(&format!("Bearer {key}")))
                .principal(),
            ws
        );
        assert_eq!(
            auth.authenticate(Some(&format!("bearer  {key} ")))
                .principal(),
            ws
        );
        assert_eq!(auth.authenticate(None).principal(), Err(AuthError::Missing));
        assert_eq!(
            auth.authenticate(Some(&key)).principal(),
            Err(AuthError::NotBearer)
        );
        assert_eq!(
            auth.authenticate(Some(&format!("Basic {key}"))).principal(),
            Err(AuthError::NotBearer)
        );
        let init = json!({"Authorization": format!("Bearer {key}")});
        assert_eq!(auth.authenticate_connection_init(&init).principal(), ws);
        let init = json!({"authorization": format!("Bearer {key}")});
        assert_eq!(auth.authenticate_connection_init(&init).principal(), ws);
        assert_eq!(
            auth.authenticate_connection_init(&serde_json::Value::Null)
                .principal(),
            Err(AuthError::Missing)
        );
        // Auth off: everyone is an admin, whatever they send.
        let off = Auth::disabled();
        assert_eq!(off.authenticate(None).principal(), Ok(Principal::Admin));
        assert_eq!(
            off.authenticate(Some("Bearer junk")).principal(),
            Ok(Principal::Admin)
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap().num_seconds(), 90);
        assert_eq!(parse_duration("15m").unwrap().num_seconds(), 900);
        assert_eq!(parse_duration("1h").unwrap().num_seconds(), 3600);
        assert_eq!(parse_duration("7d").unwrap().num_seconds(), 604_800);
        assert!(parse_duration("0s").is_err());
        assert_eq!(parse_duration("1h 30m").unwrap().num_seconds(), 5400);
        assert!(parse_duration("1x").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
    }
}
