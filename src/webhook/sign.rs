//! The signature headers of a delivery (docs/webhooks.md shows a receiver checking them).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The delivery's id: the same on every attempt, and inside the signed body.
pub const DELIVERY_ID: &str = "x-honcho-delivery-id";
/// The event's type, as in the body.
pub const EVENT: &str = "x-honcho-event";
/// When this attempt was signed, in Unix seconds.
pub const TIMESTAMP: &str = "x-honcho-timestamp";
/// Honcho v3.0.12's header: hex HMAC-SHA256 of the raw body, so Honcho's receivers keep working.
pub const SIGNATURE: &str = "x-honcho-signature";
/// `v1=` and the hex HMAC-SHA256 of `<timestamp>.<body>`: binds the timestamp, so a receiver can
/// refuse a captured request replayed later.
pub const TIMESTAMPED_SIGNATURE: &str = "x-honcho-signature-256";

/// Hex HMAC-SHA256 of `parts`, concatenated, with `secret`.
pub fn hmac_hex(secret: &[u8], parts: &[&[u8]]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The signature headers' values for `body` sent at `timestamp`: (Honcho's, timestamped).
pub fn signatures(secret: &[u8], timestamp: i64, body: &str) -> (String, String) {
    let ts = timestamp.to_string();
    (
        hmac_hex(secret, &[body.as_bytes()]),
        format!(
            "v1={}",
            hmac_hex(secret, &[ts.as_bytes(), b".", body.as_bytes()])
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_rfc_4231_hmac_sha256() {
        // RFC 4231, test case 2.
        assert_eq!(
            hmac_hex(b"Jefe", &[b"what do ya want ", b"for nothing?"]),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
