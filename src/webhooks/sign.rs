//! Signing a delivery the Standard Webhooks way: `webhook-signature: v1,<base64 of
//! HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`, one `v1,...` per live secret, space-separated,
//! where the key is the bytes a `whsec_<base64>` secret decodes to.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The key of a `whsec_...` secret (`None`: not one).
fn key(secret: &str) -> Option<Vec<u8>> {
    STANDARD.decode(secret.strip_prefix("whsec_")?).ok()
}

/// `v1,<base64 HMAC>` of one secret (`None`: not a `whsec_` secret).
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&key(secret)?).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The `webhook-signature` header: one signature per secret, in the secrets' order.
pub fn header(secrets: &[&str], id: &str, timestamp: i64, body: &[u8]) -> String {
    let all: Vec<String> = secrets
        .iter()
        .filter_map(|s| signature(s, id, timestamp, body))
        .collect();
    all.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks specification's published example (also what the `standardwebhooks`
    /// libraries test against).
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1_614_265_330;
    const BODY: &str = r#"{"test": 2432232314}"#;
    const EXPECTED: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn the_signature_matches_the_standard_webhooks_test_vector() {
        assert_eq!(
            signature(SECRET, ID, TIMESTAMP, BODY.as_bytes()).as_deref(),
            Some(EXPECTED)
        );
        assert_ne!(
            signature(SECRET, ID, TIMESTAMP + 1, BODY.as_bytes()).as_deref(),
            Some(EXPECTED)
        );
    }

    #[test]
    fn every_secret_signs_in_order_and_a_bad_one_is_skipped() {
        let other = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        let h = header(&[other, "nope", SECRET], ID, TIMESTAMP, BODY.as_bytes());
        let parts: Vec<&str> = h.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert!(parts[0].starts_with("v1,") && parts[0] != EXPECTED);
        assert_eq!(parts[1], EXPECTED);
    }
}
