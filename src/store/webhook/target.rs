//! Which webhook targets the server may call: an absolute `http` or `https` URL, and no address
//! of the server's own networks (loopback, private, link-local, …) unless the operator allows them
//! (`HONCHO_WEBHOOK_ALLOW_PRIVATE`). A URL is checked when it is registered (its IP literal, or a
//! `localhost` name); the delivery worker checks again every address a name resolves to, at each
//! attempt, since DNS can answer differently later (rebinding).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::super::{StoreError, StoreResult};

/// Longest URL accepted (Honcho v3.0.12's `url_length` constraint).
pub const MAX_URL_LEN: usize = 2048;

/// `url` as a webhook target, or the reason it is refused.
pub fn check_url(url: &str, allow_private: bool) -> StoreResult<url::Url> {
    if url.len() > MAX_URL_LEN {
        return Err(StoreError::invalid(format!(
            "url must be at most {MAX_URL_LEN} characters"
        )));
    }
    let parsed = url::Url::parse(url)
        .map_err(|e| StoreError::invalid(format!("url is not an absolute URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(StoreError::invalid("url must use http or https"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(StoreError::invalid("url must not carry credentials"));
    }
    let host = match parsed.host() {
        Some(h) => h,
        None => return Err(StoreError::invalid("url must name a host")),
    };
    if allow_private {
        return Ok(parsed);
    }
    let refused = match host {
        url::Host::Ipv4(ip) => refused_address(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => refused_address(IpAddr::V6(ip)),
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    };
    if refused {
        return Err(StoreError::invalid(
            "url points to a loopback, private or reserved address \
             (HONCHO_WEBHOOK_ALLOW_PRIVATE=true allows it)",
        ));
    }
    Ok(parsed)
}

/// An address a webhook may not reach unless private targets are allowed: anything but a
/// globally routable unicast address.
pub fn refused_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => refused_v6(v6),
    }
}

fn refused_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        // Shared address space (carrier-grade NAT).
        || (a == 100 && (64..128).contains(&b))
        // IETF protocol assignments.
        || (a == 192 && b == 0 && c == 0)
        // Benchmarking.
        || (a == 198 && (b == 18 || b == 19))
        // Reserved for future use.
        || a >= 240
}

fn refused_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return refused_v4(v4);
    }
    let s = ip.segments();
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        // Unique local (fc00::/7) and link-local (fe80::/10).
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        // Site-local (deprecated, fec0::/10).
        || (s[0] & 0xffc0) == 0xfec0
        // Documentation (2001:db8::/32).
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        // IPv4-compatible (::a.b.c.d, deprecated) and NAT64 (64:ff9b::/96): the IPv4 inside.
        || (s[..6] == [0, 0, 0, 0, 0, 0])
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0]
            && refused_v4(Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_and_reserved_addresses_are_refused_public_ones_are_not() {
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
        ] {
            assert!(
                refused_address(refused.parse().unwrap()),
                "{refused} allowed"
            );
        }
        for allowed in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700:4700::1111",
            "64:ff9b::101:101",
        ] {
            assert!(
                !refused_address(allowed.parse().unwrap()),
                "{allowed} refused"
            );
        }
    }

    #[test]
    fn urls_must_be_http_or_https_and_public_unless_allowed() {
        assert!(check_url("https://example.com/hook", false).is_ok());
        for bad in [
            "ftp://example.com/x",
            "example.com/hook",
            "http://127.0.0.1:8080/",
            "http://[::1]/",
            "http://localhost/",
            "http://api.localhost./x",
            "http://10.0.0.5/x",
            "http://user:pw@example.com/",
        ] {
            assert!(check_url(bad, false).is_err(), "{bad} accepted");
        }
        assert!(check_url("http://127.0.0.1:8080/", true).is_ok());
        assert!(check_url("file:///etc/passwd", true).is_err());
    }
}
