//! Token counts as Honcho v3.0.12 reports them: tiktoken's o200k_base, compiled in (no download).

use std::sync::OnceLock;
use tiktoken_rs::CoreBPE;

use super::{StoreError, StoreResult};

fn bpe() -> &'static CoreBPE {
    static BPE: OnceLock<CoreBPE> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().expect("o200k_base is compiled into tiktoken-rs"))
}

pub fn count(text: &str) -> i32 {
    i32::try_from(bpe().encode_ordinary(text).len()).unwrap_or(i32::MAX)
}

/// The counts of `texts`, computed on tokio's blocking pool: a batch of 100 long messages takes
/// tens of milliseconds of BPE, which on a runtime worker would stall every request scheduled
/// behind it. The texts come back with their counts.
pub async fn count_all(texts: Vec<String>) -> StoreResult<(Vec<String>, Vec<i32>)> {
    tokio::task::spawn_blocking(move || {
        let counts = texts.iter().map(|t| count(t)).collect();
        (texts, counts)
    })
    .await
    .map_err(|e| StoreError::Internal(format!("token counting failed: {e}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_like_honcho() {
        assert_eq!(super::count("Hello, how are you?"), 6);
        assert_eq!(super::count(""), 0);
    }
}
