//! The byte form of a term, as the dictionary and the update log keep it:
//! a kind byte, then the kind's strings. Equal terms (sameTerm) have equal
//! bytes, so the dictionary maps bytes to ids.

use oxrdf::{BlankNode, Literal, NamedNode, Term};

const IRI: u8 = 1;
const BLANK: u8 = 2;
const SIMPLE: u8 = 3;
const LANG: u8 = 4;
pub(crate) const TYPED: u8 = 5;

/// Appends `t`'s bytes to `out`.
pub fn encode(t: &Term, out: &mut Vec<u8>) {
    match t {
        Term::NamedNode(n) => {
            out.push(IRI);
            out.extend_from_slice(n.as_str().as_bytes());
        }
        Term::BlankNode(b) => {
            out.push(BLANK);
            out.extend_from_slice(b.as_str().as_bytes());
        }
        Term::Literal(l) => {
            let value = l.value();
            if let Some(lang) = l.language() {
                out.push(LANG);
                out.extend_from_slice(&(lang.len() as u32).to_le_bytes());
                out.extend_from_slice(lang.as_bytes());
            } else if let dt = l.datatype()
                && dt.as_str() != "http://www.w3.org/2001/XMLSchema#string"
            {
                out.push(TYPED);
                out.extend_from_slice(&(dt.as_str().len() as u32).to_le_bytes());
                out.extend_from_slice(dt.as_str().as_bytes());
            } else {
                out.push(SIMPLE);
            }
            out.extend_from_slice(value.as_bytes());
        }
        #[allow(unreachable_patterns)]
        _ => unreachable!("RDF 1.2 triple terms are not enabled"),
    }
}

/// The bytes of `t`.
pub fn to_bytes(t: &Term) -> Vec<u8> {
    let mut v = Vec::with_capacity(32);
    encode(t, &mut v);
    v
}

/// The term of `b`, or why `b` is not one.
pub fn decode(b: &[u8]) -> Result<Term, String> {
    let (&kind, rest) = b.split_first().ok_or("empty term")?;
    let text = |x: &[u8]| std::str::from_utf8(x).map(str::to_owned).map_err(|_| "term is not UTF-8".to_string());
    let split = |x: &[u8]| -> Result<(String, String), String> {
        if x.len() < 4 {
            return Err("truncated term".into());
        }
        let n = u32::from_le_bytes(x[..4].try_into().expect("4")) as usize;
        if x.len() < 4 + n {
            return Err("truncated term".into());
        }
        Ok((text(&x[4..4 + n])?, text(&x[4 + n..])?))
    };
    Ok(match kind {
        IRI => NamedNode::new_unchecked(text(rest)?).into(),
        BLANK => BlankNode::new_unchecked(text(rest)?).into(),
        SIMPLE => Literal::new_simple_literal(text(rest)?).into(),
        LANG => {
            let (lang, value) = split(rest)?;
            Literal::new_language_tagged_literal_unchecked(value, lang).into()
        }
        TYPED => {
            let (dt, value) = split(rest)?;
            Literal::new_typed_literal(value, NamedNode::new_unchecked(dt)).into()
        }
        k => return Err(format!("unknown term kind {k}")),
    })
}
