use std::fmt;

/// The resource a call touches, as far as the rules care.
#[derive(Clone, Copy, Debug, Default)]
pub struct On<'a> {
    pub workspace: Option<&'a str>,
    pub peer: Option<&'a str>,
    pub session: Option<&'a str>,
    pub scope: Option<&'a str>,
}

impl<'a> On<'a> {
    /// No resource (admin-only fields).
    pub fn nothing() -> Self {
        On::default()
    }

    pub fn workspace(workspace: &'a str) -> Self {
        On {
            workspace: Some(workspace),
            ..On::default()
        }
    }

    pub fn peer(workspace: &'a str, peer: &'a str) -> Self {
        On {
            peer: Some(peer),
            ..On::workspace(workspace)
        }
    }

    pub fn session(workspace: &'a str, session: &'a str) -> Self {
        On {
            session: Some(session),
            ..On::workspace(workspace)
        }
    }

    pub fn scope(workspace: &'a str, scope: &'a str) -> Self {
        On {
            scope: Some(scope),
            ..On::workspace(workspace)
        }
    }

    /// A message of `session` (None when there is no such message).
    pub fn message(workspace: &'a str, session: Option<&'a str>) -> Self {
        On {
            session,
            ..On::workspace(workspace)
        }
    }
}

impl fmt::Display for On<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = [
            ("workspace", self.workspace),
            ("peer", self.peer),
            ("session", self.session),
            ("scope", self.scope),
        ]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} {v:?}")))
        .collect();
        f.write_str(&parts.join(", "))
    }
}
