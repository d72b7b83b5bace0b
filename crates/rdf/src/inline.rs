//! Values inlined in query-time ids: a canonical xsd:integer, xsd:boolean,
//! xsd:date or xsd:dateTime literal is its own id, a tag and the value, so
//! a FILTER or ORDER BY on it needs no dictionary read.
//!
//! ```text
//! bit 63     0 (set: a per-query side id, see dataset.rs)
//! bit 62     1 (clear: a dictionary id)
//! bits 59-61 kind: integer, boolean, date, dateTime
//! bits 0-58  the value: integer two's complement in 59 bits; boolean 0/1;
//!            date tz 11 | year 14 | month 4 | day 5;
//!            dateTime tz 11 | year 12 | month 4 | day 5 | hour 5 | minute 6 | ms 16
//! ```
//!
//! Ids are equal exactly when terms are (sameTerm), never when values are:
//! only a literal whose lexical form is the canonical one of its value
//! (the value written back gives the same term) is inlined, so
//! "01"^^xsd:integer stays in the dictionary, apart from "1"^^xsd:integer.
//! A value that does not fit (a big integer, a year outside the range, a
//! second finer than a millisecond) stays in the dictionary too.

use oxrdf::{Literal, Term};
use oxsdatatypes::{Boolean, Date, DateTime, Integer};
use spareval::ExpressionTerm;
use std::str::FromStr;

/// Set on every inlined id.
pub const INLINE: u64 = 1 << 62;
const SIDE: u64 = 1 << 63;
const KIND_SHIFT: u32 = 59;
const VALUE_BITS: u32 = 59;
const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;
const K_INTEGER: u64 = 0;
const K_BOOLEAN: u64 = 1;
const K_DATE: u64 = 2;
const K_DATETIME: u64 = 3;
/// Timezone offsets are whole minutes within +-14:00; stored plus this (0: none).
const TZ_BIAS: i64 = 841;

const XSD: &str = "http://www.w3.org/2001/XMLSchema#";
const TYPES: [&str; 4] = ["integer", "boolean", "date", "dateTime"];

/// Whether `id` is an inlined value (neither a dictionary nor a side id).
pub fn is_inline(id: u64) -> bool {
    id & (SIDE | INLINE) == INLINE
}

fn tag(kind: u64, value: u64) -> u64 {
    debug_assert!(value <= VALUE_MASK && kind < 8);
    INLINE | kind << KIND_SHIFT | value
}

/// The id of `e` if its value fits and writing it back gives `e`'s term
/// (BIND and arithmetic results are canonical already).
pub fn encode_expr(e: &ExpressionTerm) -> Option<u64> {
    let id = match e {
        ExpressionTerm::IntegerLiteral(i) => {
            let v = i64::from(*i);
            let lim = 1i64 << (VALUE_BITS - 1);
            if !(-lim..lim).contains(&v) {
                return None;
            }
            return Some(tag(K_INTEGER, v as u64 & VALUE_MASK));
        }
        ExpressionTerm::BooleanLiteral(b) => return Some(tag(K_BOOLEAN, u64::from(bool::from(*b)))),
        ExpressionTerm::DateLiteral(d) => tag(K_DATE, pack_date(&d.to_string())?),
        ExpressionTerm::DateTimeLiteral(d) => tag(K_DATETIME, pack_date_time(&d.to_string())?),
        _ => return None,
    };
    // The packed fields must give back the very value (the check costs a
    // parse; it keeps a parser corner case from ever merging two terms).
    (Term::from(decode(id)?) == Term::from(e.clone())).then_some(id)
}

/// The id of `t` if it is a canonical literal of an inlined type whose value fits.
pub fn encode_term(t: &Term) -> Option<u64> {
    let Term::Literal(l) = t else { return None };
    let dt = l.datatype().as_str().strip_prefix(XSD)?;
    if l.language().is_some() || !TYPES.contains(&dt) {
        return None;
    }
    let id = encode_expr(&ExpressionTerm::from(t.clone()))?;
    (canonical(id)? == *l).then_some(id)
}

/// The id of the term with dictionary bytes `b` (see term.rs), if inlined;
/// other terms are told apart by their kind byte and datatype, unparsed.
pub fn encode_bytes(b: &[u8]) -> Option<u64> {
    if b.first() != Some(&crate::term::TYPED) || b.len() < 5 {
        return None;
    }
    let n = u32::from_le_bytes(b[1..5].try_into().ok()?) as usize;
    let dt = b.get(5..5 + n)?.strip_prefix(XSD.as_bytes())?;
    if !TYPES.iter().any(|x| x.as_bytes() == dt) {
        return None;
    }
    encode_term(&crate::term::decode(b).ok()?)
}

/// The literal an inlined id stands for.
pub fn canonical(id: u64) -> Option<Literal> {
    match Term::from(decode(id)?) {
        Term::Literal(l) => Some(l),
        _ => None,
    }
}

/// The value of an inlined id, with no dictionary read; `None` for an id
/// that is not inlined or does not decode (a damaged id).
pub fn decode(id: u64) -> Option<ExpressionTerm> {
    if !is_inline(id) {
        return None;
    }
    let v = id & VALUE_MASK;
    match (id >> KIND_SHIFT) & 7 {
        K_INTEGER => Some(ExpressionTerm::IntegerLiteral(Integer::from(((v << 5) as i64) >> 5))),
        K_BOOLEAN if v <= 1 => Some(ExpressionTerm::BooleanLiteral(Boolean::from(v == 1))),
        K_DATE => Date::from_str(&unpack_date(v)?).ok().map(ExpressionTerm::DateLiteral),
        K_DATETIME => DateTime::from_str(&unpack_date_time(v)?).ok().map(ExpressionTerm::DateTimeLiteral),
        _ => None,
    }
}

/// Fields of a canonical lexical form, from `Display` of oxsdatatypes.
fn num(s: &str, at: usize, len: usize) -> Option<u64> {
    let d = s.get(at..at + len)?;
    d.bytes().all(|c| c.is_ascii_digit()).then(|| d.parse().ok())?
}

fn pack_tz(s: &str) -> Option<u64> {
    match s {
        "" => Some(0),
        "Z" => Some(TZ_BIAS as u64),
        _ => {
            let sign = match s.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if s.len() != 6 || s.as_bytes()[3] != b':' {
                return None;
            }
            let m = (num(s, 1, 2)? * 60 + num(s, 4, 2)?) as i64;
            (m <= 840).then_some((TZ_BIAS + sign * m) as u64)
        }
    }
}

fn unpack_tz(v: u64) -> Option<String> {
    let m = v as i64 - TZ_BIAS;
    Some(match v {
        0 => String::new(),
        _ if m == 0 => "Z".into(),
        _ if m.abs() <= 840 => format!("{}{:02}:{:02}", if m < 0 { '-' } else { '+' }, m.abs() / 60, m.abs() % 60),
        _ => return None,
    })
}

/// `YYYY-MM-DD[tz]`, years 1..=9999.
fn pack_date(s: &str) -> Option<u64> {
    if s.get(4..5)? != "-" || s.get(7..8)? != "-" {
        return None;
    }
    let (y, m, d) = (num(s, 0, 4)?, num(s, 5, 2)?, num(s, 8, 2)?);
    let tz = pack_tz(s.get(10..)?)?;
    (y >= 1).then_some(tz << 23 | y << 9 | m << 5 | d)
}

fn unpack_date(v: u64) -> Option<String> {
    let tz = unpack_tz(v >> 23)?;
    Some(format!("{:04}-{:02}-{:02}{tz}", (v >> 9) & 0x3fff, (v >> 5) & 15, v & 31))
}

/// `YYYY-MM-DDTHH:MM:SS[.fff][tz]`, years 1..=4095, whole milliseconds.
fn pack_date_time(s: &str) -> Option<u64> {
    if s.get(10..11)? != "T" || s.get(13..14)? != ":" || s.get(16..17)? != ":" {
        return None;
    }
    let date = pack_date(s.get(..10)?)?;
    let (y, md) = ((date >> 9) & 0x3fff, date & 0x1ff);
    let (h, min, sec) = (num(s, 11, 2)?, num(s, 14, 2)?, num(s, 17, 2)?);
    let rest = s.get(19..)?;
    let (ms, tz) = match rest.strip_prefix('.') {
        Some(r) => {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 || n > 3 {
                return None;
            }
            (num(r, 0, n)? * 10u64.pow(3 - n as u32), &r[n..])
        }
        None => (0, rest),
    };
    let tz = pack_tz(tz)?;
    if y >= 4096 || sec >= 60 || h >= 24 || min >= 60 {
        return None;
    }
    Some(tz << 48 | y << 36 | md << 27 | h << 22 | min << 16 | (sec * 1000 + ms))
}

fn unpack_date_time(v: u64) -> Option<String> {
    let tz = unpack_tz(v >> 48)?;
    let (ms, sec) = ((v & 0xffff) % 1000, (v & 0xffff) / 1000);
    let frac = if ms == 0 { String::new() } else { format!(".{ms:03}").trim_end_matches('0').to_string() };
    let (y, m, d, h, min) = ((v >> 36) & 0xfff, (v >> 32) & 15, (v >> 27) & 31, (v >> 22) & 31, (v >> 16) & 63);
    Some(format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{sec:02}{frac}{tz}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxrdf::NamedNode;
    use proptest::prelude::*;

    fn lit(v: &str, dt: &str) -> Term {
        Literal::new_typed_literal(v, NamedNode::new_unchecked(format!("{XSD}{dt}"))).into()
    }

    #[test]
    fn canonical_forms_round_trip() {
        for (v, dt) in [
            ("0", "integer"),
            ("-17", "integer"),
            ("288230376151711743", "integer"),
            ("-288230376151711744", "integer"),
            ("true", "boolean"),
            ("false", "boolean"),
            ("2024-02-29", "date"),
            ("0001-01-01Z", "date"),
            ("9999-12-31-14:00", "date"),
            ("2024-02-29T23:59:59", "dateTime"),
            ("2024-02-29T23:59:59.5+05:30", "dateTime"),
            ("1999-01-01T00:00:00.123Z", "dateTime"),
        ] {
            let t = lit(v, dt);
            let id = encode_term(&t).unwrap_or_else(|| panic!("{v} {dt} not inlined"));
            assert!(is_inline(id));
            assert_eq!(Term::from(canonical(id).expect("decodes")), t);
            assert_eq!(encode_bytes(&crate::term::to_bytes(&t)), Some(id));
            assert_eq!(encode_expr(&ExpressionTerm::from(t.clone())), Some(id));
        }
    }

    #[test]
    fn other_forms_stay_in_the_dictionary() {
        for (v, dt) in [
            ("01", "integer"),
            ("+1", "integer"),
            ("-0", "integer"),
            ("288230376151711744", "integer"),
            ("99999999999999999999", "integer"),
            ("abc", "integer"),
            ("1", "boolean"),
            ("TRUE", "boolean"),
            ("1", "int"),
            ("1.0", "decimal"),
            ("2024-02-29+00:00", "date"),
            ("2023-02-29", "date"),
            ("10000-01-01", "date"),
            ("-0001-01-01", "date"),
            ("2024-01-01T24:00:00", "dateTime"),
            ("2024-01-01T00:00:00.1234", "dateTime"),
            ("2024-01-01T00:00:00.50", "dateTime"),
            ("4096-01-01T00:00:00", "dateTime"),
        ] {
            assert_eq!(encode_term(&lit(v, dt)), None, "{v} {dt}");
        }
        assert_eq!(encode_term(&Literal::new_simple_literal("1").into()), None);
        assert_eq!(encode_term(&NamedNode::new_unchecked("http://e/1").into()), None);
        assert!(!is_inline(5) && !is_inline(SIDE | 5) && !is_inline(SIDE | INLINE));
    }

    fn any_term() -> impl Strategy<Value = Term> {
        let int = (-(1i64 << 60)..(1i64 << 60)).prop_map(|i| i.to_string());
        let lex = prop_oneof![
            int,
            "[-+]?0{0,2}[0-9]{1,3}",
            "(true|false|0|1)",
            "[0-9]{4}-[01][0-9]-[0-3][0-9](Z|[+-]1[0-4]:[0-5]0)?",
            "[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9](\\.[0-9]{1,4})?(Z|[+-]0[0-9]:[03]0)?"
        ];
        (lex, prop::sample::select(vec!["integer", "boolean", "date", "dateTime", "int", "string"])).prop_map(|(v, dt)| lit(&v, dt))
    }

    proptest! {
        /// Two terms get equal ids exactly when they are the same term, and
        /// an inlined id decodes to its term.
        #[test]
        fn same_term_iff_same_id(a in any_term(), b in any_term()) {
            let (ia, ib) = (encode_term(&a), encode_term(&b));
            if let (Some(x), Some(y)) = (ia, ib) {
                prop_assert_eq!(x == y, a == b);
            }
            if a == b {
                prop_assert_eq!(ia, ib);
            }
            for (t, id) in [(&a, ia), (&b, ib)] {
                if let Some(id) = id {
                    prop_assert_eq!(&Term::from(canonical(id).unwrap()), t);
                    prop_assert_eq!(encode_expr(&ExpressionTerm::from(t.clone())), Some(id));
                }
            }
        }

        #[test]
        fn integers_fit_exactly(i in any::<i64>()) {
            let t = lit(&i.to_string(), "integer");
            let fits = (-(1i64 << 58)..(1i64 << 58)).contains(&i);
            prop_assert_eq!(encode_term(&t).is_some(), fits);
            if let Some(id) = encode_term(&t) {
                prop_assert_eq!(Term::from(decode(id).unwrap()), t);
            }
        }
    }
}
