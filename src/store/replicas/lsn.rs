//! PostgreSQL's WAL positions (`pg_lsn`): what a consistency token is.

use std::fmt;
use std::str::FromStr;

/// A position in the primary's write-ahead log, as PostgreSQL writes it: two hexadecimal halves
/// of a 64-bit number, `16/B374D848`. Later writes have larger positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a WAL position (two hexadecimal numbers of at most 8 digits: `0/16B3748`)")]
pub struct BadLsn(String);

impl FromStr for Lsn {
    type Err = BadLsn;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadLsn(s.chars().take(40).collect());
        let (hi, lo) = s.trim().split_once('/').ok_or_else(bad)?;
        let half = |h: &str| {
            if h.is_empty() || h.len() > 8 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(h, 16).map_err(|_| bad())
        };
        Ok(Lsn((u64::from(half(hi)?) << 32) | u64::from(half(lo)?)))
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_read_and_print_as_postgresql_writes_them() {
        let lsn: Lsn = "16/B374D848".parse().unwrap();
        assert_eq!(lsn.0, 0x16_B374_D848);
        assert_eq!(lsn.to_string(), "16/B374D848");
        assert_eq!("0/0".parse::<Lsn>().unwrap(), Lsn(0));
        assert_eq!(
            "FFFFFFFF/FFFFFFFF".parse::<Lsn>().unwrap(),
            Lsn(u64::MAX),
            "the largest"
        );
        assert!("0/16B3748".parse::<Lsn>().unwrap() < "1/0".parse::<Lsn>().unwrap());
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "/",
            "0/",
            "/0",
            "12",
            "0/1/2",
            "G/0",
            "0/-1",
            "100000000/0",
            "0x1/0",
            " ",
        ] {
            assert!(bad.parse::<Lsn>().is_err(), "{bad:?}");
        }
    }
}
