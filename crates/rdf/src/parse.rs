//! Reading RDF files for the bulk load on every core. N-Triples and
//! N-Quads put no statement across a line end, so a reader thread cuts
//! each file into blocks of whole lines and worker threads parse the
//! blocks at once; other syntaxes are parsed by the reader thread itself.
//! Either way the caller gets batches of term bytes in input order (so ids,
//! given in first-occurrence order, are those of a sequential parse) while
//! the next blocks are parsed. Blocks in flight are bounded by credits the
//! caller returns as it consumes batches, so memory stays bounded whatever
//! a worker's pace.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crossbeam_channel::{Receiver, Sender, bounded};
use indicatif::ProgressBar;
use oxrdf::{BlankNode, GraphName, NamedOrBlankNode, Quad, Term};
use oxrdfio::{RdfFormat, RdfParseError, RdfParser, RdfSyntaxError};

use crate::dict::MAX_TERM;
use crate::error::{RdfError, Result, io_err};
use crate::{LoadOptions, term};

/// Bytes of text a block holds (it ends at the last line end within).
const BLOCK: usize = 1 << 20;
/// A line longer than this is refused (a block must hold one line).
const MAX_LINE: usize = 1 << 30;
/// Quads a batch of a sequentially parsed file holds at most.
const BATCH_QUADS: usize = 8192;
/// Worker threads at most.
const MAX_WORKERS: usize = 8;

/// The term bytes of consecutive quads of the input.
#[derive(Default)]
pub struct Batch {
    bytes: Vec<u8>,
    /// Per quad, where each of its four terms ends in `bytes` (an empty
    /// graph: the default graph).
    ends: Vec<[usize; 4]>,
    /// Bad lines skipped (lenient).
    skipped: u64,
    /// What stopped the input here (after the batch's quads).
    error: Option<RdfError>,
}

impl Batch {
    /// The quads' terms (s, p, o, g), in input order.
    pub fn quads(&self) -> impl Iterator<Item = [&[u8]; 4]> {
        self.ends.iter().enumerate().map(|(i, e)| {
            let start = if i == 0 { 0 } else { self.ends[i - 1][3] };
            [&self.bytes[start..e[0]], &self.bytes[e[0]..e[1]], &self.bytes[e[1]..e[2]], &self.bytes[e[2]..e[3]]]
        })
    }

    fn push(&mut self, q: &Quad) -> Result<()> {
        let start = self.bytes.len();
        let mut ends = [0; 4];
        term::encode(&Term::from(q.subject.clone()), &mut self.bytes);
        ends[0] = self.bytes.len();
        term::encode(&Term::from(q.predicate.clone()), &mut self.bytes);
        ends[1] = self.bytes.len();
        term::encode(&q.object, &mut self.bytes);
        ends[2] = self.bytes.len();
        match &q.graph_name {
            GraphName::DefaultGraph => {}
            GraphName::NamedNode(n) => term::encode(&Term::from(n.clone()), &mut self.bytes),
            GraphName::BlankNode(b) => term::encode(&Term::from(b.clone()), &mut self.bytes),
        }
        ends[3] = self.bytes.len();
        let mut at = start;
        for e in ends {
            if e - at > MAX_TERM {
                self.bytes.truncate(start);
                return Err(RdfError::Invalid(format!("a term of {} bytes exceeds the limit of {MAX_TERM}", e - at)));
            }
            at = e;
        }
        self.ends.push(ends);
        Ok(())
    }

    fn failed(e: RdfError) -> Batch {
        Batch { error: Some(e), ..Batch::default() }
    }
}

/// How to read one input file.
struct Source {
    path: PathBuf,
    format: RdfFormat,
    base: String,
}

impl Source {
    fn lines(&self) -> bool {
        matches!(self.format, RdfFormat::NTriples | RdfFormat::NQuads)
    }

    /// The parser, with `o.to_graph` as the default graph if `to_graph`.
    fn parser(&self, o: &LoadOptions, to_graph: bool) -> Result<RdfParser> {
        let mut p = RdfParser::from_format(self.format);
        p = p.with_base_iri(self.base.as_str()).map_err(|e| RdfError::Invalid(format!("bad base IRI {:?}: {e}", self.base)))?;
        if let Some(g) = o.to_graph.as_ref().filter(|_| to_graph) {
            p = p.with_default_graph(GraphName::from(g.clone()));
        }
        Ok(p)
    }

    /// The line (from 1) and the error of a syntax error found
    /// `line_offset` lines into the file.
    fn syntax(&self, e: &RdfSyntaxError, line_offset: u64) -> (u64, RdfError) {
        let (line, column) = e.location().map_or((0, 0), |l| (l.start.line + 1, l.start.column + 1));
        let line = line + line_offset;
        (line, RdfError::Syntax { file: self.path.display().to_string(), line, column, message: e.to_string() })
    }
}

/// Whole lines of one file.
struct Block {
    file: usize,
    text: Vec<u8>,
    /// Lines of the file before the block.
    first_line: u64,
}

enum Job {
    Parse(Block),
    Ready(Batch),
}

/// Renames blank nodes as `rename_blank_nodes` does (each file's labels
/// apart from every other file's and from the store's), but by a keyed
/// hash of (file, label) instead of a map, so blocks parsed apart agree
/// and no map grows with the blank nodes.
struct Renamer(RandomState, RandomState);

impl Renamer {
    fn node(&self, file: usize, b: &BlankNode) -> BlankNode {
        let key = (file, b.as_str());
        BlankNode::new_from_unique_id((u128::from(self.0.hash_one(key)) << 64) | u128::from(self.1.hash_one(key)))
    }

    /// `q` renamed, then in `to_graph` if in the default graph (the
    /// graph given is not renamed, as oxrdfio's mapper leaves it).
    fn quad(&self, file: usize, mut q: Quad, to_graph: Option<&NamedOrBlankNode>) -> Quad {
        if let NamedOrBlankNode::BlankNode(b) = &q.subject {
            q.subject = self.node(file, b).into();
        }
        if let Term::BlankNode(b) = &q.object {
            q.object = self.node(file, b).into();
        }
        if let GraphName::BlankNode(b) = &q.graph_name {
            q.graph_name = self.node(file, b).into();
        }
        if let (GraphName::DefaultGraph, Some(g)) = (&q.graph_name, to_graph) {
            q.graph_name = g.clone().into();
        }
        q
    }
}

/// Reads every quad of `files`, in order, handing batches to `f` while
/// later ones are parsed; returns (quads, skipped). `bar` advances by the
/// bytes read.
pub fn read_batches(files: &[PathBuf], o: &LoadOptions, bar: &ProgressBar, mut f: impl FnMut(&Batch) -> Result<()>) -> Result<(u64, u64)> {
    let sources = files.iter().map(|p| source(p, o)).collect::<Result<Vec<_>>>()?;
    for s in &sources {
        s.parser(o, true).map(drop)?;
    }
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, MAX_WORKERS);
    let credits_n = 4 * workers;
    let renamer = Renamer(RandomState::new(), RandomState::new());
    let (quads, skipped) = std::thread::scope(|sc| {
        let (credit_tx, credit_rx) = bounded::<()>(credits_n);
        for _ in 0..credits_n {
            credit_tx.send(()).expect("a fresh channel has room");
        }
        let (job_tx, job_rx) = bounded::<(u64, Job)>(workers);
        let (done_tx, done_rx) = bounded::<(u64, Batch)>(credits_n);
        let (sources, renamer) = (&sources, &renamer);
        let bar = bar.clone();
        std::thread::Builder::new()
            .name("rdf-read".into())
            .spawn_scoped(sc, move || read_all(sources, o, &bar, &credit_rx, &job_tx))
            .map_err(|e| RdfError::Invalid(format!("cannot start the reader thread: {e}")))?;
        for _ in 0..workers {
            let (jobs, done) = (job_rx.clone(), done_tx.clone());
            let work = move || {
                for (seq, job) in jobs {
                    let batch = match job {
                        Job::Ready(b) => b,
                        Job::Parse(b) => parse_block(&sources[b.file], &b, o, renamer),
                    };
                    if done.send((seq, batch)).is_err() {
                        return;
                    }
                }
            };
            std::thread::Builder::new()
                .name("rdf-parse".into())
                .spawn_scoped(sc, work)
                .map_err(|e| RdfError::Invalid(format!("cannot start a parser thread: {e}")))?;
        }
        drop((job_rx, done_tx));
        let (mut quads, mut skipped) = (0u64, 0u64);
        let mut early: BTreeMap<u64, Batch> = BTreeMap::new();
        let mut next = 0u64;
        for (seq, batch) in done_rx {
            early.insert(seq, batch);
            while let Some(b) = early.remove(&next) {
                next += 1;
                quads += b.ends.len() as u64;
                skipped += b.skipped;
                f(&b)?;
                if let Some(e) = b.error {
                    return Err(e);
                }
                // The reader may have finished: a credit then has no taker.
                let _ = credit_tx.try_send(());
            }
        }
        debug_assert!(early.is_empty(), "every batch before the last is handed on");
        Ok((quads, skipped))
    })?;
    Ok((quads, skipped))
}

fn source(path: &Path, o: &LoadOptions) -> Result<Source> {
    let format = crate::load::format_of(path, o)?;
    let base = match &o.base_iri {
        Some(b) => b.clone(),
        None => format!("file://{}", std::path::absolute(path).map_err(io_err(path))?.display()),
    };
    Ok(Source { path: path.to_path_buf(), format, base })
}

/// The reader thread: blocks of line formats for the workers, whole
/// batches of other formats, each after taking a credit. Stops when the
/// caller stops taking batches (a channel closes).
fn read_all(sources: &[Source], o: &LoadOptions, bar: &ProgressBar, credits: &Receiver<()>, jobs: &Sender<(u64, Job)>) {
    let mut seq = 0u64;
    let mut send = |job: Job| -> bool {
        if credits.recv().is_err() || jobs.send((seq, job)).is_err() {
            return false;
        }
        seq += 1;
        true
    };
    for (i, s) in sources.iter().enumerate() {
        let res = if s.lines() { read_blocks(i, s, bar, &mut send) } else { read_sequential(s, o, bar, &mut send) };
        match res {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                send(Job::Ready(Batch::failed(e)));
                return;
            }
        }
    }
}

/// Cuts file `i` into blocks of whole lines; `Ok(false)` once `send` fails.
fn read_blocks(i: usize, s: &Source, bar: &ProgressBar, send: &mut dyn FnMut(Job) -> bool) -> Result<bool> {
    let mut file = std::fs::File::open(&s.path).map_err(io_err(&s.path))?;
    let (mut carry, mut line) = (Vec::new(), 0u64);
    loop {
        let mut text = std::mem::take(&mut carry);
        let mut eof = false;
        // Fill to a block, then on until the text holds a line end.
        while !eof && (text.len() < BLOCK || !text.contains(&b'\n')) {
            if text.len() >= MAX_LINE {
                return Err(RdfError::Syntax {
                    file: s.path.display().to_string(),
                    line: line + 1,
                    column: 0,
                    message: format!("a line longer than {MAX_LINE} bytes"),
                });
            }
            let at = text.len();
            text.resize(at + BLOCK, 0);
            let n = file.read(&mut text[at..]).map_err(io_err(&s.path))?;
            text.truncate(at + n);
            bar.inc(n as u64);
            eof = n == 0;
        }
        if text.is_empty() {
            return Ok(true);
        }
        if !eof {
            let cut = text.iter().rposition(|&b| b == b'\n').expect("the loop reads until a line end") + 1;
            carry = text[cut..].to_vec();
            text.truncate(cut);
        }
        let lines = text.iter().filter(|&&b| b == b'\n').count() as u64;
        if !send(Job::Parse(Block { file: i, text, first_line: line })) {
            return Ok(false);
        }
        line += lines;
        if eof {
            return Ok(true);
        }
    }
}

/// Parses one block of whole lines.
fn parse_block(s: &Source, b: &Block, o: &LoadOptions, renamer: &Renamer) -> Batch {
    let mut batch = Batch { bytes: Vec::with_capacity(b.text.len()), ..Batch::default() };
    let p = match s.parser(o, false) {
        Ok(p) => p,
        Err(e) => return Batch::failed(e),
    };
    // One bad statement may raise several errors; count lines, not errors.
    let mut last_bad_line = 0;
    for q in p.for_slice(&b.text) {
        match q {
            Ok(q) => {
                if let Err(e) = batch.push(&renamer.quad(b.file, q, o.to_graph.as_ref())) {
                    batch.error = Some(e);
                    return batch;
                }
            }
            Err(e) => {
                let (line, err) = s.syntax(&e, b.first_line);
                if !o.lenient {
                    batch.error = Some(err);
                    return batch;
                }
                if line != last_bad_line {
                    batch.skipped += 1;
                    last_bad_line = line;
                }
            }
        }
    }
    batch
}

/// Parses a file of a syntax whose statements may span lines on this
/// thread, in batches; `Ok(false)` once `send` fails.
fn read_sequential(s: &Source, o: &LoadOptions, bar: &ProgressBar, send: &mut dyn FnMut(Job) -> bool) -> Result<bool> {
    let p = s.parser(o, true)?.rename_blank_nodes();
    let reader = BufReader::with_capacity(1 << 20, bar.wrap_read(std::fs::File::open(&s.path).map_err(io_err(&s.path))?));
    let mut batch = Batch::default();
    let mut last_bad_line = 0;
    for q in p.for_reader(reader) {
        match q {
            Ok(q) => batch.push(&q)?,
            Err(RdfParseError::Syntax(e)) => {
                let (line, err) = s.syntax(&e, 0);
                if !o.lenient {
                    batch.error = Some(err);
                    send(Job::Ready(batch));
                    return Ok(false);
                }
                if line != last_bad_line {
                    batch.skipped += 1;
                    last_bad_line = line;
                }
            }
            Err(RdfParseError::Io(e)) => return Err(io_err(&s.path)(e)),
        }
        if (batch.ends.len() >= BATCH_QUADS || batch.bytes.len() >= BLOCK) && !send(Job::Ready(std::mem::take(&mut batch))) {
            return Ok(false);
        }
    }
    Ok(send(Job::Ready(batch)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{quad_bytes, read_files};

    /// Quads' term bytes with blank node labels numbered by first
    /// appearance (renaming is random, the structure is not).
    fn canonical(quads: Vec<[Vec<u8>; 4]>) -> Vec<[Vec<u8>; 4]> {
        let mut names: std::collections::HashMap<Vec<u8>, usize> = std::collections::HashMap::new();
        quads
            .into_iter()
            .map(|q| {
                q.map(|t| {
                    if t.first() == Some(&2) {
                        let n = names.len();
                        let k = *names.entry(t).or_insert(n);
                        format!("blank{k}").into_bytes()
                    } else {
                        t
                    }
                })
            })
            .collect()
    }

    fn parallel(files: &[PathBuf], o: &LoadOptions) -> Result<(Vec<[Vec<u8>; 4]>, u64)> {
        let mut out = Vec::new();
        let (n, skipped) = read_batches(files, o, &ProgressBar::hidden(), |b| {
            out.extend(b.quads().map(|q| q.map(<[u8]>::to_vec)));
            Ok(())
        })?;
        assert_eq!(n as usize, out.len());
        Ok((out, skipped))
    }

    fn sequential(files: &[PathBuf], o: &LoadOptions) -> Result<(Vec<[Vec<u8>; 4]>, u64)> {
        let mut out = Vec::new();
        let (_, skipped) = read_files(files, o, &ProgressBar::hidden(), |q| {
            out.push(quad_bytes(&q)?);
            Ok(())
        })?;
        Ok((out, skipped))
    }

    /// About 3 MiB of N-Triples (several blocks), blank nodes repeated
    /// far apart, a bad line at `bad` (1-based) if any.
    fn ntriples(path: &Path, bad: &[usize]) {
        let mut s = String::new();
        for i in 1..=30_000usize {
            if bad.contains(&i) {
                s.push_str("<http://e/s> <http://e/p> oops .\n");
                continue;
            }
            let subject = if i % 7 == 0 { format!("_:b{}", i % 100) } else { format!("<http://example.org/s{}>", i / 3) };
            let object = match i % 3 {
                0 => format!("_:b{}", i % 50),
                1 => format!("\"value {i} with some padding text\"@en"),
                _ => format!("\"{i}\"^^<http://www.w3.org/2001/XMLSchema#integer>"),
            };
            s.push_str(&format!("{subject} <http://example.org/p{}> {object} .\n", i % 11));
        }
        std::fs::write(path, s).unwrap();
    }

    #[test]
    fn blocks_in_parallel_give_the_sequential_quads() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b, t) = (tmp.path().join("a.nt"), tmp.path().join("b.nt"), tmp.path().join("c.ttl"));
        ntriples(&a, &[]);
        ntriples(&b, &[]);
        std::fs::write(&t, "@prefix e: <http://e/> .\ne:s e:p _:x, \"two\" ;\n  e:q [ e:r 3 ] .\n").unwrap();
        let files = [a.clone(), t, b];
        let o = LoadOptions::default();
        let (par, skipped) = parallel(&files, &o).unwrap();
        let (seq, _) = sequential(&files, &o).unwrap();
        assert_eq!(skipped, 0);
        assert_eq!(par.len(), 60_004);
        assert!(std::fs::metadata(&a).unwrap().len() > 2 * BLOCK as u64);
        // The same labels in two files are different blank nodes.
        assert_ne!(par[6][0], par[30_010][0]);
        assert_eq!(canonical(par), canonical(seq));
    }

    #[test]
    fn syntax_errors_name_the_line_of_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a.nt");
        ntriples(&a, &[3, 25_000, 29_999]);
        let files = [a.clone()];
        match parallel(&files, &LoadOptions::default()) {
            Err(RdfError::Syntax { file, line, .. }) => {
                assert_eq!(line, 3);
                assert_eq!(file, a.display().to_string());
            }
            other => panic!("{:?}", other.map(|(q, s)| (q.len(), s))),
        }
        let lenient = LoadOptions { lenient: true, ..LoadOptions::default() };
        let (par, skipped) = parallel(&files, &lenient).unwrap();
        assert_eq!(skipped, 3);
        assert_eq!(par.len(), 30_000 - 3);
        let (seq, seq_skipped) = sequential(&files, &lenient).unwrap();
        assert_eq!(seq_skipped, 3);
        assert_eq!(canonical(par), canonical(seq));
        ntriples(&a, &[25_000]);
        let at = |r: Result<(Vec<[Vec<u8>; 4]>, u64)>| match r {
            Err(RdfError::Syntax { line, column, .. }) => (line, column),
            other => panic!("{:?}", other.map(|(q, s)| (q.len(), s))),
        };
        let (line, column) = at(parallel(&files, &LoadOptions::default()));
        assert_eq!(line, 25_000);
        assert_eq!((line, column), at(sequential(&files, &LoadOptions::default())));
    }
}
