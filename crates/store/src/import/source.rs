//! Edge inputs: SNAP-style text, CSV with a header, NumPy `.npy`, and
//! arrays already in memory (Python, generators). Each yields one edge at a
//! time and can say where it is (file and line, or element index) for errors.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::npy::{IntStream, NpyHeader, read_header};
use crate::error::{Result, StoreError, file_err};

/// Where edges come from.
#[derive(Debug, Clone)]
pub enum EdgeInput {
    /// By extension: `.npy` (a (2, E) or (E, 2) integer array), `.csv` (a
    /// header naming src/dst[/weight][/label] columns), anything else SNAP
    /// text: `src dst [weight [label]]`, `#`/`%` comments, whitespace or
    /// commas between fields.
    File(PathBuf),
    /// Two 1-D integer `.npy` arrays of equal length: sources, destinations.
    NpyPair(PathBuf, PathBuf),
    Memory {
        src: Vec<u64>,
        dst: Vec<u64>,
        weights: Option<Vec<f32>>,
        labels: Option<Vec<u32>>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawEdge {
    pub src: u64,
    pub dst: u64,
    pub weight: f32,
    pub label: u32,
}

/// A batch of edges as columns; `weights` and `labels` are filled only
/// when the import keeps them.
#[derive(Debug, Default)]
pub struct EdgeBatch {
    pub src: Vec<u64>,
    pub dst: Vec<u64>,
    pub weights: Vec<f32>,
    pub labels: Vec<u32>,
    pub want_weights: bool,
    pub want_labels: bool,
}

impl EdgeBatch {
    pub fn new(want_weights: bool, want_labels: bool) -> EdgeBatch {
        EdgeBatch { want_weights, want_labels, ..Default::default() }
    }

    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    fn clear(&mut self) {
        self.src.clear();
        self.dst.clear();
        self.weights.clear();
        self.labels.clear();
    }

    /// Appends `other`'s edges (parsed with the same columns).
    fn append(&mut self, other: &EdgeBatch) {
        self.src.extend_from_slice(&other.src);
        self.dst.extend_from_slice(&other.dst);
        self.weights.extend_from_slice(&other.weights);
        self.labels.extend_from_slice(&other.labels);
    }

    fn push(&mut self, e: &RawEdge) {
        self.src.push(e.src);
        self.dst.push(e.dst);
        if self.want_weights {
            self.weights.push(e.weight);
        }
        if self.want_labels {
            self.labels.push(e.label);
        }
    }
}

/// What every edge read is checked against, so that an error names the
/// input's file and line or element.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Ids must be below this.
    pub below: u64,
    /// The node count the user declared (worded in the error).
    pub declared: Option<u64>,
    /// Weights must be finite.
    pub finite_weights: bool,
}

impl Limits {
    /// Why `e` breaks a limit, if it does.
    fn check(&self, src: u64, dst: u64, weight: f32) -> Option<String> {
        let bad = if src >= self.below { src } else { dst };
        if bad >= self.below {
            return Some(match self.declared {
                Some(nn) if bad >= nn => format!("vertex id {bad} is not below the declared node count {nn}"),
                _ => format!("vertex id {bad}: a degree order needs ids below 2^32 - 1"),
            });
        }
        if self.finite_weights && !weight.is_finite() {
            return Some(format!("weight {weight} is not finite"));
        }
        None
    }
}

pub trait EdgeReader {
    fn next_edge(&mut self) -> Result<Option<RawEdge>>;
    /// Replaces `b`'s edges with up to `max` next ones, each checked against
    /// `lim`; returns how many (0 at the end).
    fn next_batch(&mut self, b: &mut EdgeBatch, max: usize, lim: &Limits) -> Result<usize> {
        b.clear();
        while b.len() < max {
            let Some(e) = self.next_edge()? else { break };
            if let Some(why) = lim.check(e.src, e.dst, e.weight) {
                return Err(self.error(why));
            }
            b.push(&e);
        }
        Ok(b.len())
    }
    /// Location of the edge last returned, for error messages.
    fn error(&self, reason: String) -> StoreError;
    /// Input bytes (or elements) consumed so far and in all, for progress.
    fn progress(&self) -> (u64, u64);
}

pub fn open(input: &EdgeInput, want_weights: bool, want_labels: bool) -> Result<Box<dyn EdgeReader + Send + '_>> {
    Ok(match input {
        EdgeInput::File(p) if p.extension().is_some_and(|e| e == "npy") => Box::new(NpyEdges::single(p)?),
        EdgeInput::File(p) => Box::new(TextEdges::open(p, want_weights, want_labels)?),
        EdgeInput::NpyPair(a, b) => Box::new(NpyEdges::pair(a, b)?),
        EdgeInput::Memory { src, dst, weights, labels } => {
            let bad = |what: &str, n: usize| StoreError::Invalid(format!("{what} has {n} entries but src has {}", src.len()));
            if dst.len() != src.len() {
                return Err(bad("dst", dst.len()));
            }
            if let Some(w) = weights
                && w.len() != src.len()
            {
                return Err(bad("weights", w.len()));
            }
            if let Some(l) = labels
                && l.len() != src.len()
            {
                return Err(bad("labels", l.len()));
            }
            if want_weights && weights.is_none() {
                return Err(StoreError::Invalid("weights requested but none given".into()));
            }
            Box::new(MemEdges { src, dst, weights: weights.as_deref(), labels: labels.as_deref(), i: 0 })
        }
    })
}

/// Arrays already in memory, borrowed: an import from Python does not copy
/// its inputs again.
struct MemEdges<'a> {
    src: &'a [u64],
    dst: &'a [u64],
    weights: Option<&'a [f32]>,
    labels: Option<&'a [u32]>,
    i: usize,
}

impl EdgeReader for MemEdges<'_> {
    fn next_edge(&mut self) -> Result<Option<RawEdge>> {
        let i = self.i;
        if i >= self.src.len() {
            return Ok(None);
        }
        self.i += 1;
        Ok(Some(RawEdge { src: self.src[i], dst: self.dst[i], weight: self.weights.map_or(1.0, |w| w[i]), label: self.labels.map_or(0, |l| l[i]) }))
    }
    fn next_batch(&mut self, b: &mut EdgeBatch, max: usize, lim: &Limits) -> Result<usize> {
        b.clear();
        let (from, to) = (self.i, (self.i + max).min(self.src.len()));
        b.src.extend_from_slice(&self.src[from..to]);
        b.dst.extend_from_slice(&self.dst[from..to]);
        if b.want_weights {
            match self.weights {
                Some(w) => b.weights.extend_from_slice(&w[from..to]),
                None => b.weights.resize(to - from, 1.0),
            }
        }
        if b.want_labels {
            match self.labels {
                Some(l) => b.labels.extend_from_slice(&l[from..to]),
                None => b.labels.resize(to - from, 0),
            }
        }
        self.i = to;
        check_batch(b, lim).map_err(|(k, why)| StoreError::Invalid(format!("edge {}: {why}", from + k)))?;
        Ok(to - from)
    }
    fn error(&self, reason: String) -> StoreError {
        StoreError::Invalid(format!("edge {}: {reason}", self.i.saturating_sub(1)))
    }
    fn progress(&self) -> (u64, u64) {
        (self.i as u64, self.src.len() as u64)
    }
}

struct NpyEdges {
    path: PathBuf,
    a: IntStream,
    b: IntStream,
    /// (E, 2) layout: both ids come from stream `a`.
    interleaved: bool,
    /// (E, 2) layout: a batch's ids before they are split.
    pairs: Vec<u64>,
    total: u64,
    done: u64,
}

impl NpyEdges {
    fn single(p: &Path) -> Result<NpyEdges> {
        let h = read_header(p)?;
        let bad = |r: String| StoreError::BadInput { path: p.to_path_buf(), reason: r };
        match h.shape.as_slice() {
            [2, e] => Ok(NpyEdges {
                path: p.into(),
                a: IntStream::new(&h, 0, *e)?,
                b: IntStream::new(&h, *e, *e)?,
                interleaved: false,
                pairs: Vec::new(),
                total: *e,
                done: 0,
            }),
            [e, 2] => Ok(NpyEdges {
                path: p.into(),
                a: IntStream::new(&h, 0, 2 * e)?,
                b: IntStream::new(&h, 0, 0)?,
                interleaved: true,
                pairs: Vec::new(),
                total: *e,
                done: 0,
            }),
            s => Err(bad(format!("edge array must have shape (2, E) or (E, 2), not {s:?}"))),
        }
    }

    fn pair(a: &Path, b: &Path) -> Result<NpyEdges> {
        let (ha, hb): (NpyHeader, NpyHeader) = (read_header(a)?, read_header(b)?);
        if ha.shape.len() != 1 || hb.shape != ha.shape {
            return Err(StoreError::BadInput {
                path: b.to_path_buf(),
                reason: format!("source and destination arrays must be 1-D of equal length ({:?} vs {:?})", ha.shape, hb.shape),
            });
        }
        let e = ha.shape[0];
        Ok(NpyEdges { path: a.into(), a: IntStream::new(&ha, 0, e)?, b: IntStream::new(&hb, 0, e)?, interleaved: false, pairs: Vec::new(), total: e, done: 0 })
    }
}

impl EdgeReader for NpyEdges {
    fn next_edge(&mut self) -> Result<Option<RawEdge>> {
        let Some(src) = self.a.next_id()? else { return Ok(None) };
        let dst = if self.interleaved { self.a.next_id()? } else { self.b.next_id()? };
        let dst = dst.ok_or_else(|| StoreError::BadInput { path: self.path.clone(), reason: "odd number of ids".into() })?;
        self.done += 1;
        Ok(Some(RawEdge { src, dst, weight: 1.0, label: 0 }))
    }
    fn error(&self, reason: String) -> StoreError {
        StoreError::BadInput { path: self.path.clone(), reason: format!("edge {}: {reason}", self.done.saturating_sub(1)) }
    }
    fn next_batch(&mut self, b: &mut EdgeBatch, max: usize, lim: &Limits) -> Result<usize> {
        b.clear();
        let n = (self.total - self.done).min(max as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        if self.interleaved {
            self.a.read_ids(&mut self.pairs, 2 * n)?;
            b.src.extend(self.pairs.iter().step_by(2));
            b.dst.extend(self.pairs.iter().skip(1).step_by(2));
        } else {
            self.a.read_ids(&mut b.src, n)?;
            self.b.read_ids(&mut b.dst, n)?;
        }
        if b.want_weights {
            b.weights.resize(n, 1.0);
        }
        if b.want_labels {
            b.labels.resize(n, 0);
        }
        let first = self.done;
        self.done += n as u64;
        check_batch(b, lim).map_err(|(k, why)| StoreError::BadInput { path: self.path.clone(), reason: format!("edge {}: {why}", first + k as u64) })?;
        Ok(n)
    }
    fn progress(&self) -> (u64, u64) {
        (self.done, self.total)
    }
}

/// The first edge of `b` (its index and why) that breaks `lim`.
fn check_batch(b: &EdgeBatch, lim: &Limits) -> std::result::Result<(), (usize, String)> {
    let max = b.src.iter().zip(&b.dst).fold(0u64, |m, (&s, &d)| m.max(s).max(d));
    let finite = !lim.finite_weights || b.weights.iter().all(|w| w.is_finite());
    if max < lim.below && finite {
        return Ok(());
    }
    for i in 0..b.len() {
        if let Some(why) = lim.check(b.src[i], b.dst[i], b.weights.get(i).copied().unwrap_or(1.0)) {
            return Err((i, why));
        }
    }
    Ok(())
}

/// Column positions of a CSV header, or the SNAP text layout.
#[derive(Debug, Clone, Copy)]
struct Columns {
    src: usize,
    dst: usize,
    weight: Option<usize>,
    label: Option<usize>,
}

struct TextEdges {
    path: PathBuf,
    r: std::io::BufReader<std::fs::File>,
    line: String,
    lineno: u64,
    cols: Columns,
    csv: bool,
    /// Columns the CSV header names: a row with more is an error, not
    /// silently truncated (its extra fields would be dropped unread).
    header_cols: usize,
    want_weights: bool,
    want_labels: bool,
    total: u64,
    done: u64,
    /// Block reads (`next_batch`): the bytes read, of which the first
    /// `block_used` are whole lines being parsed.
    block: Vec<u8>,
    block_used: usize,
}

impl TextEdges {
    fn open(p: &Path, want_weights: bool, want_labels: bool) -> Result<TextEdges> {
        let f = std::fs::File::open(p).map_err(file_err(p))?;
        let total = f.metadata().map_err(file_err(p))?.len();
        let csv = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"));
        let mut t = TextEdges {
            path: p.into(),
            r: std::io::BufReader::with_capacity(1 << 20, f),
            line: String::new(),
            lineno: 0,
            cols: Columns { src: 0, dst: 1, weight: Some(2), label: Some(3) },
            csv,
            header_cols: 0,
            want_weights,
            want_labels,
            total,
            done: 0,
            block: Vec::new(),
            block_used: 0,
        };
        if csv {
            t.read_csv_header()?;
        }
        Ok(t)
    }

    fn read_csv_header(&mut self) -> Result<()> {
        if !self.read_line()? {
            return Err(StoreError::BadInput { path: self.path.clone(), reason: "empty CSV file (expected a header)".into() });
        }
        let names: Vec<String> = self.line.trim().split(',').map(|s| s.trim().trim_matches('"').to_ascii_lowercase()).collect();
        let find = |cands: &[&str]| names.iter().position(|n| cands.contains(&n.as_str()));
        let src = find(&["src", "source", "from", "u", ":start_id"]);
        let dst = find(&["dst", "target", "to", "v", "destination", ":end_id"]);
        let (src, dst) = match (src, dst) {
            (Some(s), Some(d)) => (s, d),
            _ if names.len() >= 2 && names.iter().all(|n| n.parse::<f64>().is_err()) => (0, 1),
            _ => return Err(self.err("CSV header must name the source and destination columns (e.g. src,dst[,weight])".into())),
        };
        self.cols = Columns { src, dst, weight: find(&["weight", "w", "cost"]), label: find(&["label", "type", "predicate"]) };
        self.header_cols = names.len();
        if self.want_weights && self.cols.weight.is_none() {
            return Err(self.err("weights requested but the header has no weight column".into()));
        }
        if self.want_labels && self.cols.label.is_none() {
            return Err(self.err("labels requested but the header has no label column".into()));
        }
        Ok(())
    }

    fn read_line(&mut self) -> Result<bool> {
        self.line.clear();
        let n = self.r.read_line(&mut self.line).map_err(file_err(&self.path))?;
        self.lineno += 1;
        self.done += n as u64;
        Ok(n > 0)
    }

    fn err(&self, reason: String) -> StoreError {
        StoreError::Parse { path: self.path.clone(), line: self.lineno, reason }
    }
}

fn parse_id(tok: &str) -> std::result::Result<u64, String> {
    if tok.starts_with('-') {
        return Err(format!("negative vertex id {tok}"));
    }
    tok.parse::<u64>().map_err(|_| format!("{tok:?} is not an integer vertex id"))
}

/// How a text line becomes an edge (shared by the line and block readers).
#[derive(Debug, Clone, Copy)]
struct LineFormat {
    cols: Columns,
    csv: bool,
    header_cols: usize,
    want_weights: bool,
    want_labels: bool,
}

impl LineFormat {
    /// The edge on line `line`, None for a blank or comment line.
    fn parse(&self, line: &str) -> std::result::Result<Option<RawEdge>, String> {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with('%') {
            return Ok(None);
        }
        let mut fields = [""; 8];
        let mut n = 0;
        let sep = |c: char| if self.csv { c == ',' } else { c == ',' || c.is_ascii_whitespace() };
        for f in l.split(sep).map(str::trim).filter(|s| !s.is_empty() || self.csv) {
            if n < fields.len() {
                fields[n] = f;
            }
            n += 1;
        }
        let c = self.cols;
        let need = 1 + c.src.max(c.dst);
        if n < need {
            return Err(format!("expected at least {need} fields, found {n}"));
        }
        if self.csv && n > self.header_cols {
            return Err(format!("{n} columns, but the header names {}", self.header_cols));
        }
        let get = |i: Option<usize>| i.filter(|&i| i < n.min(fields.len())).map(|i| fields[i]);
        let (Some(src), Some(dst)) = (get(Some(c.src)), get(Some(c.dst))) else {
            return Err(format!("the source and destination columns must be among the first {}", fields.len()));
        };
        let (src, dst) = (parse_id(src)?, parse_id(dst)?);
        let weight = match get(c.weight) {
            Some(w) if self.want_weights => w.parse::<f32>().map_err(|_| format!("{w:?} is not a number (weight)"))?,
            None if self.want_weights => return Err("weights requested but this line has no weight".into()),
            _ => 1.0,
        };
        let label = match get(c.label) {
            Some(x) if self.want_labels => x.parse::<u32>().map_err(|_| format!("{x:?} is not a u32 label"))?,
            None if self.want_labels => return Err("labels requested but this line has no label".into()),
            _ => 0,
        };
        Ok(Some(RawEdge { src, dst, weight, label }))
    }
}

/// Text read a block at a time and parsed on all cores.
const TEXT_BLOCK: usize = 16 << 20;
/// A longer line is an error (a binary file, a missing newline).
const MAX_LINE: usize = 1 << 20;

/// The edges of one piece of whole lines.
struct Parsed {
    edges: EdgeBatch,
    lines: u64,
}

/// Parses whole lines; Err names the line (counted from 1 in `text`).
fn parse_lines(text: &[u8], f: &LineFormat, lim: &Limits) -> std::result::Result<Parsed, (u64, String)> {
    let mut p = Parsed { edges: EdgeBatch::new(f.want_weights, f.want_labels), lines: 0 };
    for raw in text.split_inclusive(|&b| b == b'\n') {
        p.lines += 1;
        let line = std::str::from_utf8(raw).map_err(|_| (p.lines, "line is not valid UTF-8".to_string()))?;
        let Some(e) = f.parse(line).map_err(|r| (p.lines, r))? else { continue };
        if let Some(why) = lim.check(e.src, e.dst, e.weight) {
            return Err((p.lines, why));
        }
        p.edges.push(&e);
    }
    Ok(p)
}

impl TextEdges {
    fn format(&self) -> LineFormat {
        LineFormat { cols: self.cols, csv: self.csv, header_cols: self.header_cols, want_weights: self.want_weights, want_labels: self.want_labels }
    }

    /// The next block of whole lines (the rest of the file at its end) in
    /// `self.block`; false at the end.
    fn next_block(&mut self) -> Result<bool> {
        use std::io::Read;
        // The partial line left over from the last block comes first.
        self.block.drain(..self.block_used);
        self.block_used = 0;
        let have = self.block.len();
        self.block.resize(TEXT_BLOCK, 0);
        let mut len = have;
        while len < self.block.len() {
            let n = self.r.read(&mut self.block[len..]).map_err(file_err(&self.path))?;
            if n == 0 {
                break;
            }
            len += n;
        }
        self.block.truncate(len);
        if len == 0 {
            return Ok(false);
        }
        // A full block ends at its last newline; the file's end, anywhere.
        self.block_used = match self.block.iter().rposition(|&b| b == b'\n') {
            _ if len < TEXT_BLOCK => len,
            Some(i) if len - i - 1 <= MAX_LINE => i + 1,
            _ => return Err(self.err(format!("a line longer than {MAX_LINE} bytes"))),
        };
        Ok(true)
    }
}

impl EdgeReader for TextEdges {
    fn next_batch(&mut self, b: &mut EdgeBatch, _max: usize, lim: &Limits) -> Result<usize> {
        use rayon::prelude::*;
        b.clear();
        loop {
            if !self.next_block()? {
                return Ok(0);
            }
            // Pieces of whole lines, one or a few per thread.
            let text = &self.block[..self.block_used];
            let want = rayon::current_num_threads().max(1) * 2;
            let mut cuts = vec![0];
            for k in 1..want {
                let at = (text.len() * k / want).max(*cuts.last().expect("0"));
                let end = text[at..].iter().position(|&c| c == b'\n').map_or(text.len(), |i| at + i + 1);
                cuts.push(end);
            }
            cuts.push(text.len());
            let f = self.format();
            let parsed: Vec<_> = cuts.par_windows(2).map(|w| parse_lines(&text[w[0]..w[1]], &f, lim)).collect();
            let first_line = self.lineno;
            for p in parsed {
                let p = p.map_err(|(line, reason)| StoreError::Parse { path: self.path.clone(), line: self.lineno + line, reason })?;
                self.lineno += p.lines;
                b.append(&p.edges);
            }
            debug_assert!(self.lineno >= first_line);
            self.done += self.block_used as u64;
            if !b.is_empty() {
                return Ok(b.len());
            }
        }
    }

    fn next_edge(&mut self) -> Result<Option<RawEdge>> {
        loop {
            if !self.read_line()? {
                return Ok(None);
            }
            let f = self.format();
            match f.parse(&self.line) {
                Ok(Some(e)) => return Ok(Some(e)),
                Ok(None) => continue,
                Err(r) => return Err(self.err(r)),
            }
        }
    }
    fn error(&self, reason: String) -> StoreError {
        self.err(reason)
    }
    fn progress(&self) -> (u64, u64) {
        (self.done, self.total)
    }
}
