//! The process's outbound HTTP clients (the embedder, the LLM, the trace exporter): reqwest over
//! rustls, with ring as rustls's crypto provider.
//!
//! reqwest 0.13's own `rustls` feature would bring the aws-lc-rs provider, a C library built from
//! source; sqlx already builds rustls with ring. With `rustls-no-provider` reqwest panics when a
//! client is built before a provider is installed, so every client of this crate, its tests and
//! its benches comes from [`client_builder`], which installs ring first.

use std::sync::Once;

/// Installs ring as the process's rustls provider, once. Another provider installed earlier (by
/// an embedding application) is kept.
pub fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Err only when a provider is already installed, which is what is wanted.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A reqwest client builder that can be built.
pub fn client_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
}

/// A client with reqwest's defaults.
pub fn client() -> reqwest::Client {
    client_builder()
        .build()
        .expect("a default reqwest client builds once a crypto provider is installed")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_builds_without_a_provider_installed_elsewhere() {
        // Twice: the second install finds the first and keeps it.
        super::client();
        super::client();
    }
}
