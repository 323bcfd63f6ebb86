//! The delivery client's resolver: a name resolves to its addresses only when none of them is
//! one a webhook may not reach ([`target::refused_address`]), so the check holds for the very
//! addresses the client connects to, not for an earlier lookup.

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::store::webhook::target;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub(super) struct CheckedResolver {
    pub allow_private: bool,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(lookup(name.as_str().to_owned(), self.allow_private))
    }
}

async fn lookup(host: String, allow_private: bool) -> Result<Addrs, BoxError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
    if !allow_private && let Some(bad) = addrs.iter().find(|a| target::refused_address(a.ip())) {
        return Err(format!(
            "{host} resolves to {}, a loopback, private or reserved address \
             (HONCHO_WEBHOOK_ALLOW_PRIVATE=true allows it)",
            bad.ip()
        )
        .into());
    }
    Ok(Box::new(addrs.into_iter()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused_unless_private_targets_are_allowed() {
        let refused = lookup("localhost".into(), false).await.err().unwrap();
        assert!(
            refused.to_string().contains("HONCHO_WEBHOOK_ALLOW_PRIVATE"),
            "{refused}"
        );
        let allowed: Vec<SocketAddr> = lookup("localhost".into(), true).await.unwrap().collect();
        assert!(allowed.iter().all(|a| a.ip().is_loopback()), "{allowed:?}");
    }
}
