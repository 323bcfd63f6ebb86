//! Operand coercion (docs/filters.md, Operand types): datetimes, exact integers, numeric strings, levels.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use serde_json::{Number, Value};

use sea_orm::{ActiveEnum, Iterable};

use crate::entity::conclusion::Level;

/// An integer-column operand, classified so that comparisons stay exact without floats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum IntOperand {
    /// An integer that fits `i64`.
    Exact(i64),
    /// A finite non-integer (then |x| < 2^52, so `floor`/`ceil` fit `i64` exactly).
    Frac(f64),
    /// Greater than every `i64`.
    Above,
    /// Less than every `i64`.
    Below,
}

const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

fn classify_f64(x: f64) -> Option<IntOperand> {
    if x.is_nan() {
        None
    } else if x >= TWO_POW_63 {
        Some(IntOperand::Above)
    } else if x < -TWO_POW_63 {
        Some(IntOperand::Below)
    } else if x.fract() == 0.0 {
        // Integral and within [-2^63, 2^63): the conversion is exact.
        Some(IntOperand::Exact(x as i64))
    } else {
        Some(IntOperand::Frac(x))
    }
}

fn int_from_number(n: &Number) -> Option<IntOperand> {
    if let Some(i) = n.as_i64() {
        Some(IntOperand::Exact(i))
    } else if n.as_u64().is_some() {
        Some(IntOperand::Above)
    } else {
        n.as_f64().and_then(classify_f64)
    }
}

/// An integer-column operand from a JSON number or a numeric string ("10", "-3", "2.5", "1e3").
/// Booleans and anything else are refused (`None`).
pub(crate) fn int_operand(v: &Value) -> Option<IntOperand> {
    match v {
        Value::Number(n) => int_from_number(n),
        Value::String(s) => {
            let s = s.trim();
            if is_integer_literal(s) {
                match s.parse::<i64>() {
                    Ok(i) => Some(IntOperand::Exact(i)),
                    Err(_) if s.starts_with('-') => Some(IntOperand::Below),
                    Err(_) => Some(IntOperand::Above),
                }
            } else if is_decimal_literal(s) {
                s.parse::<f64>().ok().and_then(|x| {
                    if x.is_infinite() {
                        Some(if x > 0.0 {
                            IntOperand::Above
                        } else {
                            IntOperand::Below
                        })
                    } else {
                        classify_f64(x)
                    }
                })
            } else {
                None
            }
        }
        _ => None,
    }
}

/// `[+-]?digits`.
fn is_integer_literal(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `[+-]?(digits[.digits?] | .digits)([eE][+-]?digits)?` — no `inf`, `nan`, `_` or spaces.
/// Returns the exponent's digit count through `exp_digits` for callers that bound it.
fn decimal_shape(s: &str) -> Option<usize> {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    let all_digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !all_digits(int_part)
        || !all_digits(frac_part)
    {
        return None;
    }
    match exponent {
        None => Some(0),
        Some(e) => {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            (!e.is_empty() && all_digits(e)).then_some(e.len())
        }
    }
}

fn is_decimal_literal(s: &str) -> bool {
    decimal_shape(s).is_some()
}

/// Longest numeric literal sent to PostgreSQL as a `numeric` (well within its limits).
pub(crate) const MAX_NUMERIC_LEN: usize = 1000;

/// A metadata comparison operand as a numeric literal PostgreSQL's `numeric` accepts, if the
/// operand is numeric: a JSON number, or a string shaped like a decimal number (exponent of at
/// most 3 digits). `None` means "compare as text".
pub(crate) fn numeric_literal(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i.to_string())
            } else if let Some(u) = n.as_u64() {
                Some(u.to_string())
            } else {
                // Display of a finite f64 is plain decimal notation, exact for that f64.
                n.as_f64().filter(|x| x.is_finite()).map(|x| x.to_string())
            }
        }
        Value::String(s) => {
            let s = s.trim();
            match decimal_shape(s) {
                Some(exp_digits) if exp_digits <= 3 && s.len() <= MAX_NUMERIC_LEN => {
                    Some(s.to_owned())
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Parse a datetime string: control characters (NUL, CR, LF, ...) anywhere refused;
/// surrounding spaces ignored; RFC 3339 with `T`, `t` or a space between date and time, optional seconds and
/// fraction, offset `Z`, `±HH:MM` or `±HHMM`, or none (UTC); or a date alone (midnight UTC).
/// Years 1..=9999 as written (the UTC instant may fall just outside).
pub(crate) fn parse_datetime(raw: &str) -> Option<DateTime<Utc>> {
    if raw.chars().any(char::is_control) {
        return None;
    }
    let s = raw.trim();
    if s.is_empty() {
        return None;
    }
    parse_datetime_inner(s)
}

fn year_ok(d: NaiveDate) -> Option<NaiveDate> {
    (1..=9999).contains(&d.year()).then_some(d)
}

fn parse_datetime_inner(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Some(year_ok(d)?.and_time(NaiveTime::MIN).and_utc());
    }
    // Split date and time at the first T/t/space after the date.
    let sep = s.find(['T', 't', ' '])?;
    let (date, time) = (&s[..sep], &s[sep + 1..]);
    let date = year_ok(NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?)?;
    // Offset: trailing Z/z, or the last + / - in the time part.
    let (clock, offset_secs) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else if let Some(i) = time.rfind(['+', '-']) {
        (&time[..i], parse_offset(&time[i..])?)
    } else {
        (time, 0)
    };
    let clock = ["%H:%M:%S%.f", "%H:%M"]
        .iter()
        .find_map(|fmt| NaiveTime::parse_from_str(clock, fmt).ok())?;
    let naive = NaiveDateTime::new(date, clock);
    let utc = naive.checked_sub_signed(chrono::TimeDelta::seconds(offset_secs))?;
    Some(utc.and_utc())
}

/// `+HH:MM`, `+HHMM` or `+HH` (also `-`), at most 23:59.
fn parse_offset(s: &str) -> Option<i64> {
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    let digits: String = match rest.len() {
        2 | 4 => rest.to_owned(),
        5 if rest.as_bytes()[2] == b':' => format!("{}{}", &rest[..2], &rest[3..]),
        _ => return None,
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let hours: i64 = digits[..2].parse().ok()?;
    let minutes: i64 = if digits.len() == 4 {
        digits[2..].parse().ok()?
    } else {
        0
    };
    (hours <= 23 && minutes <= 59).then_some(sign * (hours * 3600 + minutes * 60))
}

/// A conclusion level in Honcho v3.0.12's lowercase or the GraphQL enum spelling (any ASCII case).
pub(crate) fn level(s: &str) -> Option<Level> {
    Level::iter().find(|l| l.to_value().eq_ignore_ascii_case(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    #[test]
    fn datetimes_accepted() {
        let cases = [
            ("2024-01-01", utc(2024, 1, 1, 0, 0, 0)),
            ("  2024-01-01  ", utc(2024, 1, 1, 0, 0, 0)),
            ("2024-01-01T10:20:30Z", utc(2024, 1, 1, 10, 20, 30)),
            ("2024-01-01t10:20:30z", utc(2024, 1, 1, 10, 20, 30)),
            ("2024-01-01 10:20:30", utc(2024, 1, 1, 10, 20, 30)),
            ("2024-01-01T10:20", utc(2024, 1, 1, 10, 20, 0)),
            ("2024-01-01T10:20:30+02:00", utc(2024, 1, 1, 8, 20, 30)),
            ("2024-01-01T10:20:30+0200", utc(2024, 1, 1, 8, 20, 30)),
            ("2024-01-01T10:20:30-05", utc(2024, 1, 1, 15, 20, 30)),
            ("2024-01-01T00:30:00+01:00", utc(2023, 12, 31, 23, 30, 0)),
            ("2026-01-01T00:00:00", utc(2026, 1, 1, 0, 0, 0)),
            ("9999-12-31T23:00:00-05:00", utc(10000, 1, 1, 4, 0, 0)),
            ("0001-01-01T00:30:00+01:00", utc(0, 12, 31, 23, 30, 0)),
        ];
        for (s, want) in cases {
            assert_eq!(parse_datetime(s), Some(want), "{s}");
        }
        let frac = parse_datetime("2024-01-01T10:20:30.123456Z").unwrap();
        assert_eq!(frac.timestamp_subsec_micros(), 123_456);
    }

    #[test]
    fn datetimes_refused() {
        for s in [
            "",
            "   ",
            "yesterday",
            "2024-13-01",
            "2024-02-30",
            "2024-01-01\n",
            "2024-01-01T10:00:00\u{0}Z",
            "2024-01-01\rT10:00",
            "2024-01-01T25:00:00",
            "2024-01-01T10:00:00+24:00",
            "2024-01-01T10:00:00+1:00",
            "2024-01-01T",
            "0000-01-01",
            "10000-01-01",
            "2024/01/01",
            "1704067200",
        ] {
            assert_eq!(parse_datetime(s), None, "{s:?}");
        }
    }

    #[test]
    fn integer_operands_are_exact() {
        use IntOperand::*;
        assert_eq!(int_operand(&json!(15)), Some(Exact(15)));
        assert_eq!(int_operand(&json!(-15)), Some(Exact(-15)));
        assert_eq!(int_operand(&json!(i64::MAX)), Some(Exact(i64::MAX)));
        assert_eq!(int_operand(&json!(i64::MIN)), Some(Exact(i64::MIN)));
        assert_eq!(int_operand(&json!(u64::MAX)), Some(Above));
        assert_eq!(int_operand(&json!(10.0)), Some(Exact(10)));
        assert_eq!(int_operand(&json!(2.5)), Some(Frac(2.5)));
        assert_eq!(int_operand(&json!(1e19)), Some(Above));
        assert_eq!(int_operand(&json!(-1e19)), Some(Below));
        assert_eq!(int_operand(&json!(9.223_372_036_854_776e18)), Some(Above));
        assert_eq!(int_operand(&json!(" 10 ")), Some(Exact(10)));
        assert_eq!(int_operand(&json!("+7")), Some(Exact(7)));
        assert_eq!(
            int_operand(&json!("9007199254740993")),
            Some(Exact(9_007_199_254_740_993))
        );
        assert_eq!(int_operand(&json!("99999999999999999999")), Some(Above));
        assert_eq!(int_operand(&json!("-99999999999999999999")), Some(Below));
        assert_eq!(int_operand(&json!("2.5")), Some(Frac(2.5)));
        assert_eq!(int_operand(&json!("1e3")), Some(Exact(1000)));
        assert_eq!(int_operand(&json!("1e999")), Some(Above));
        assert_eq!(int_operand(&json!("-1e999")), Some(Below));
        for bad in [
            json!("abc"),
            json!(""),
            json!("inf"),
            json!("NaN"),
            json!("1_000"),
            json!("1 0"),
            json!("."),
            json!("1e"),
            json!(true),
            json!(null),
            json!([1]),
            json!({"a": 1}),
        ] {
            assert_eq!(int_operand(&bad), None, "{bad}");
        }
    }

    #[test]
    fn numeric_literals_for_metadata() {
        assert_eq!(numeric_literal(&json!(5)), Some("5".into()));
        assert_eq!(
            numeric_literal(&json!(u64::MAX)),
            Some(u64::MAX.to_string())
        );
        assert_eq!(numeric_literal(&json!(2.5)), Some("2.5".into()));
        assert_eq!(
            numeric_literal(&json!(1e20)),
            Some("100000000000000000000".into())
        );
        assert_eq!(numeric_literal(&json!(" 4.5 ")), Some("4.5".into()));
        assert_eq!(numeric_literal(&json!("-1e10")), Some("-1e10".into()));
        assert_eq!(numeric_literal(&json!(".5")), Some(".5".into()));
        assert_eq!(numeric_literal(&json!("1e1000")), None);
        assert_eq!(numeric_literal(&json!("abc")), None);
        assert_eq!(numeric_literal(&json!("nan")), None);
        assert_eq!(numeric_literal(&json!("1".repeat(1001))), None);
        assert_eq!(numeric_literal(&json!(true)), None);
    }

    #[test]
    fn levels_accept_both_spellings() {
        assert_eq!(level("deductive"), Some(Level::Deductive));
        assert_eq!(level("DEDUCTIVE"), Some(Level::Deductive));
        assert_eq!(level("Contradiction"), Some(Level::Contradiction));
        assert_eq!(level("deduction"), None);
        assert_eq!(level(""), None);
    }
}
