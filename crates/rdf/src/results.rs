//! Serialising query results: solutions and booleans through sparesults
//! (JSON, XML, CSV, TSV), triples through oxrdfio (N-Triples by default).

use std::io::Write;

use oxrdf::{Term, Triple, Variable};
use oxrdfio::{RdfFormat, RdfSerializer};
use sparesults::{QueryResultsFormat, QueryResultsSerializer};

use crate::error::{RdfError, Result};

fn io(e: std::io::Error) -> RdfError {
    RdfError::Io { path: "<output>".into(), source: e }
}

/// The results format named `name`: `json`, `xml`, `csv` or `tsv` (or a media type).
pub fn results_format(name: &str) -> Result<QueryResultsFormat> {
    let f = match name.to_ascii_lowercase().as_str() {
        "json" | "srj" => Some(QueryResultsFormat::Json),
        "xml" | "srx" => Some(QueryResultsFormat::Xml),
        "csv" => Some(QueryResultsFormat::Csv),
        "tsv" => Some(QueryResultsFormat::Tsv),
        other => QueryResultsFormat::from_media_type(other),
    };
    f.ok_or_else(|| RdfError::Invalid(format!("unknown results format {name:?}: use json, xml, csv or tsv")))
}

/// The RDF syntax named `name`: an extension (`nt`, `nq`, `ttl`, `trig`,
/// `rdf`), a name (`ntriples`, `nquads`, `turtle`, `rdfxml`) or a media type.
pub fn rdf_format(name: &str) -> Result<RdfFormat> {
    let n = name.to_ascii_lowercase();
    let f = match n.as_str() {
        "ntriples" | "n-triples" => Some(RdfFormat::NTriples),
        "nquads" | "n-quads" => Some(RdfFormat::NQuads),
        "turtle" => Some(RdfFormat::Turtle),
        "rdfxml" | "rdf/xml" | "xml" => Some(RdfFormat::RdfXml),
        other => RdfFormat::from_extension(other).or_else(|| RdfFormat::from_media_type(other)),
    };
    f.ok_or_else(|| RdfError::Invalid(format!("unknown RDF format {name:?}: use nt, nq, ttl, trig or rdf")))
}

/// Writes SELECT rows in `format`; returns the number of rows.
pub fn write_solutions(
    out: impl Write,
    format: QueryResultsFormat,
    variables: &[Variable],
    rows: impl Iterator<Item = Result<Vec<Option<Term>>>>,
) -> Result<u64> {
    let mut w = QueryResultsSerializer::from_format(format).serialize_solutions_to_writer(out, variables.to_vec()).map_err(io)?;
    let mut n = 0;
    for row in rows {
        let row = row?;
        w.serialize(variables.iter().zip(row.iter()).filter_map(|(v, t)| Some((v, t.as_ref()?)))).map_err(io)?;
        n += 1;
    }
    w.finish().map_err(io)?;
    Ok(n)
}

/// Writes an ASK result in `format`.
pub fn write_boolean(out: impl Write, format: QueryResultsFormat, value: bool) -> Result<()> {
    QueryResultsSerializer::from_format(format).serialize_boolean_to_writer(out, value).map_err(io)?;
    Ok(())
}

/// Writes CONSTRUCT/DESCRIBE triples in `format` (N-Triples, Turtle, ...); returns their number.
pub fn write_triples(out: impl Write, format: RdfFormat, triples: impl Iterator<Item = Result<Triple>>) -> Result<u64> {
    let mut w = RdfSerializer::from_format(format).for_writer(out);
    let mut n = 0;
    for t in triples {
        w.serialize_triple(&t?).map_err(io)?;
        n += 1;
    }
    w.finish().map_err(io)?;
    Ok(n)
}
