//! Which `Host` names the server answers, against DNS rebinding: a page on `rebind.evil.example`
//! whose name the attacker points at 127.0.0.1 is, to the browser, same-origin with this server,
//! so neither CORS nor the WebSocket's `Origin` check keeps it out; its requests still carry
//! `Host: rebind.evil.example`, and that is refused here.
//!
//! Answered by default: any IP literal (`127.0.0.1`, `[::1]`, `192.168.1.5`, the listen address,
//! `0.0.0.0`), since a rebinding needs a name the attacker controls and a page whose URL is an
//! IP literal is served by that address itself; and `localhost`. Any port. `HONCHO_ALLOWED_HOSTS`
//! adds exact names; `*` answers every name, and is refused while auth is off, as
//! `HONCHO_CORS_ORIGINS=*` is.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::origins::list_or_any;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hosts {
    /// IP literals, `localhost`, and these names (lower case, no port).
    Names(Vec<String>),
    /// Any name (`*`); only with auth on.
    Any,
}

impl Default for Hosts {
    fn default() -> Self {
        Hosts::Names(Vec::new())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HostsError {
    #[error(
        "HONCHO_ALLOWED_HOSTS: `{0}` is not a host name (letters, digits, `-` and `.`, no port), e.g. api.example.com"
    )]
    NotAName(String),
    #[error(
        "HONCHO_ALLOWED_HOSTS=* needs auth on (HONCHO_AUTH_SECRET): with auth off every caller is an admin, and any name (a DNS rebinding page's too) would reach it; list the names instead"
    )]
    AnyWithoutAuth,
}

impl Hosts {
    /// Parses a comma- or space-separated list of names; empty means the default.
    pub fn parse(spec: &str, auth_enabled: bool) -> Result<Hosts, HostsError> {
        let Some(items) = list_or_any(spec, auth_enabled, HostsError::AnyWithoutAuth)? else {
            return Ok(Hosts::Any);
        };
        items
            .into_iter()
            .map(|item| {
                let name = item.trim_end_matches('.').to_ascii_lowercase();
                let ok = !name.is_empty()
                    && !name.starts_with(['.', '-'])
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
                ok.then_some(name)
                    .ok_or_else(|| HostsError::NotAName(item.to_owned()))
            })
            .collect::<Result<_, _>>()
            .map(Hosts::Names)
    }

    /// Whether a request whose `Host` (or HTTP/2 `:authority`) is `host` is answered; a request
    /// with neither is (no browser sends one without it).
    pub fn allows(&self, host: Option<&str>) -> bool {
        let Some(host) = host else {
            return true;
        };
        let names = match self {
            Hosts::Any => return true,
            Hosts::Names(names) => names,
        };
        name_of(host).is_some_and(|name| {
            name == "localhost"
                || name.parse::<Ipv4Addr>().is_ok()
                || name.starts_with('[')
                || names.contains(&name)
        })
    }
}

/// The host of a `Host` value without its port, lower case, without a trailing dot; an IPv6
/// literal keeps its brackets (and only a valid one is returned). None when it is no host.
fn name_of(host: &str) -> Option<String> {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        let (literal, after) = rest.split_once(']')?;
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(is_port);
        return (port_ok && literal.parse::<Ipv6Addr>().is_ok()).then(|| format!("[{literal}]"));
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if is_port(port) => name,
        Some(_) => return None,
        None => host,
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

fn is_port(s: &str) -> bool {
    !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_literals_and_localhost_are_answered_and_other_names_only_when_listed() {
        let default = Hosts::default();
        for ok in [
            "127.0.0.1",
            "127.0.0.1:8000",
            "localhost",
            "LOCALHOST:5173",
            "localhost.",
            "[::1]",
            "[::1]:8000",
            "0.0.0.0:8000",
            "192.168.1.5:8000",
        ] {
            assert!(default.allows(Some(ok)), "{ok}");
        }
        assert!(default.allows(None), "no Host: not a browser");
        for refused in [
            "rebind.evil.example",
            "rebind.evil.example:8000",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "api.example.com",
            "[nope]:80",
            "[::1]x",
            "127.0.0.1:80:80",
            "",
        ] {
            assert!(!default.allows(Some(refused)), "{refused}");
        }
        let listed = Hosts::parse("API.example.com, honcho", false).unwrap();
        assert_eq!(
            listed,
            Hosts::Names(vec!["api.example.com".into(), "honcho".into()])
        );
        assert!(listed.allows(Some("api.example.com:443")));
        assert!(listed.allows(Some("honcho:8000")));
        assert!(listed.allows(Some("127.0.0.1:8000")));
        assert!(!listed.allows(Some("evil.api.example.com")));
        assert!(Hosts::Any.allows(Some("anything.example")));
    }

    #[test]
    fn any_host_needs_auth_and_names_must_be_names() {
        assert_eq!(Hosts::parse("", false), Ok(Hosts::default()));
        assert_eq!(Hosts::parse("*", true), Ok(Hosts::Any));
        assert_eq!(Hosts::parse("*", false), Err(HostsError::AnyWithoutAuth));
        for bad in ["api.example.com:8000", "http://api", "*.example.com", ".a"] {
            assert!(
                matches!(Hosts::parse(bad, true), Err(HostsError::NotAName(_))),
                "{bad}"
            );
        }
    }
}
