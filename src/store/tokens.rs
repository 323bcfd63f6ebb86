//! Token counts as Honcho reports them: tiktoken's o200k_base, compiled in (no download).

use std::sync::OnceLock;
use tiktoken_rs::CoreBPE;

fn bpe() -> &'static CoreBPE {
    static BPE: OnceLock<CoreBPE> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().expect("o200k_base is compiled into tiktoken-rs"))
}

pub fn count(text: &str) -> i32 {
    i32::try_from(bpe().encode_ordinary(text).len()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_like_honcho() {
        assert_eq!(super::count("Hello, how are you?"), 6);
        assert_eq!(super::count(""), 0);
    }
}
