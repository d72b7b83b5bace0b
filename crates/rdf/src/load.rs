//! Reading RDF files (oxrdfio: N-Triples, N-Quads, Turtle, TriG, RDF/XML)
//! and the bulk load: terms into a new dictionary, quads as labelled edges
//! into the page store's external-memory import (sorted runs within the
//! memory budget), all built in `<store>.partial-<pid>` and renamed into
//! place, so a failed load (or a killed one) leaves no store at the path.
//! Quads are de-duplicated by external sort (`sort.rs`) within the memory
//! budget. With `progress`, a bar on stderr follows the input bytes, then
//! the page store's import phases.

use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use oxrdf::{GraphName, Quad, Term};
use oxrdfio::{RdfFormat, RdfParseError, RdfParser};
use rustc_hash::FxHashMap;
use solidgraph_store::{EdgeInput, ImportOptions};

use crate::dict::MAX_TERM;
use crate::error::{RdfError, Result, io_err};
use crate::intern::Interner;
use crate::meta::{MAX_PAIRS, Meta, sync_dir};
use crate::results::rdf_format;
use crate::sort::QuadSorter;
use crate::{LoadOptions, LoadReport, parse, term};

/// The format of `file`: the option, else its extension.
pub(crate) fn format_of(file: &Path, o: &LoadOptions) -> Result<RdfFormat> {
    if let Some(f) = o.format {
        return Ok(f);
    }
    let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "owl" | "xml" => Ok(RdfFormat::RdfXml),
        e => rdf_format(e)
            .map_err(|_| RdfError::Invalid(format!("{}: cannot tell the RDF format from the extension; give one (nt, nq, ttl, trig, rdf)", file.display()))),
    }
}

/// A bar over the input files' bytes on stderr when `o.progress`, else
/// a hidden one.
pub fn progress_bar(files: &[PathBuf], o: &LoadOptions) -> ProgressBar {
    if !o.progress {
        return ProgressBar::hidden();
    }
    let total = files.iter().map(|f| std::fs::metadata(f).map_or(0, |m| m.len())).sum();
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}").expect("static template").progress_chars("=> "),
    );
    pb.set_message("parse");
    pb
}

/// Reads every quad of `files`, in order, into `f`; returns (quads,
/// skipped). `bar` advances by the bytes read.
pub fn read_files(files: &[PathBuf], o: &LoadOptions, bar: &ProgressBar, mut f: impl FnMut(Quad) -> Result<()>) -> Result<(u64, u64)> {
    let (mut quads, mut skipped) = (0u64, 0u64);
    for file in files {
        let format = format_of(file, o)?;
        let base = match &o.base_iri {
            Some(b) => b.clone(),
            None => {
                let abs = std::path::absolute(file).map_err(io_err(file))?;
                format!("file://{}", abs.display())
            }
        };
        let mut p = RdfParser::from_format(format).rename_blank_nodes();
        p = p.with_base_iri(base.as_str()).map_err(|e| RdfError::Invalid(format!("bad base IRI {base:?}: {e}")))?;
        if let Some(g) = &o.to_graph {
            p = p.with_default_graph(GraphName::from(g.clone()));
        }
        let reader = BufReader::with_capacity(1 << 20, bar.wrap_read(std::fs::File::open(file).map_err(io_err(file))?));
        // One bad statement may raise several errors; count lines, not errors.
        let mut last_bad_line = 0;
        for q in p.for_reader(reader) {
            match q {
                Ok(q) => {
                    quads += 1;
                    f(q)?;
                }
                Err(RdfParseError::Syntax(e)) => {
                    let (line, column) = e.location().map_or((0, 0), |l| (l.start.line + 1, l.start.column + 1));
                    if o.lenient {
                        if line != last_bad_line {
                            skipped += 1;
                            last_bad_line = line;
                        }
                        continue;
                    }
                    return Err(RdfError::Syntax { file: file.display().to_string(), line, column, message: e.to_string() });
                }
                Err(RdfParseError::Io(e)) => return Err(io_err(file)(e)),
            }
        }
    }
    Ok((quads, skipped))
}

/// The four term bytes of `q` (graph: empty for the default graph).
pub fn quad_bytes(q: &Quad) -> Result<[Vec<u8>; 4]> {
    let g = match &q.graph_name {
        GraphName::DefaultGraph => Vec::new(),
        GraphName::NamedNode(n) => term::to_bytes(&Term::from(n.clone())),
        GraphName::BlankNode(b) => term::to_bytes(&Term::from(b.clone())),
    };
    let out = [term::to_bytes(&Term::from(q.subject.clone())), term::to_bytes(&Term::from(q.predicate.clone())), term::to_bytes(&q.object), g];
    if let Some(t) = out.iter().find(|t| t.len() > MAX_TERM) {
        return Err(RdfError::Invalid(format!("a term of {} bytes exceeds the limit of {MAX_TERM}", t.len())));
    }
    Ok(out)
}

/// Calls its argument once per distinct quad of ids.
pub type QuadSource<'a> = dyn FnMut(&mut dyn FnMut([u64; 4]) -> Result<()>) -> Result<()> + 'a;

/// Writes a store generation into `dir` whose dictionary, `terms` terms,
/// the caller has written to `dict.<gen>`: when there are quads,
/// `quads.<gen>/` from the edges file, then `rdf.meta` (the commit).
/// `quads`: distinct (s, p, o, g) id quads, in any order, via `each`.
/// `progress` follows the page store's import.
pub fn write_generation(
    dir: &Path,
    generation: u64,
    terms: u64,
    memory_budget: u64,
    each: &mut QuadSource,
    progress: &(dyn Fn(&str, u64, u64) + Sync),
) -> Result<Meta> {
    let edges_path = dir.join(format!("edges.{generation}.tmp"));
    let mut pairs: FxHashMap<(u64, u64), u32> = FxHashMap::default();
    let mut pair_list: Vec<(u64, u64)> = Vec::new();
    let mut n = 0u64;
    let mut trace = Trace::new();
    {
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&edges_path).map_err(io_err(&edges_path))?);
        let mut write_err: Option<std::io::Error> = None;
        each(&mut |[s, p, o, g]| {
            let l = match pairs.get(&(g, p)) {
                Some(&l) => l,
                None => {
                    if pair_list.len() >= MAX_PAIRS {
                        return Err(RdfError::Invalid(format!("more than {MAX_PAIRS} distinct (graph, predicate) pairs")));
                    }
                    let l = pair_list.len() as u32;
                    pairs.insert((g, p), l);
                    pair_list.push((g, p));
                    l
                }
            };
            n += 1;
            if let Err(e) = writeln!(w, "{s} {o} 0 {l}") {
                write_err.get_or_insert(e);
            }
            Ok(())
        })?;
        if let Some(e) = write_err {
            return Err(io_err(&edges_path)(e));
        }
        w.flush().map_err(io_err(&edges_path))?;
    }
    trace.mark("dedup+edges");
    let meta = Meta { generation, terms, quads: n, pairs: pair_list };
    if n > 0 {
        // Left by a compaction that failed before its commit.
        let _ = std::fs::remove_dir_all(meta.quads_path(dir));
        let o = ImportOptions { labels: true, in_edges: true, num_nodes: Some(terms + 1), memory_budget, ..ImportOptions::default() };
        let input = [EdgeInput::File(edges_path.clone())];
        solidgraph_store::import(&meta.quads_path(dir), &input, &[], &o, progress)?;
    }
    trace.mark("import");
    std::fs::remove_file(&edges_path).map_err(io_err(&edges_path))?;
    meta.write(dir)?;
    Ok(meta)
}

/// Builds a new store at `path` from `files`.
pub fn bulk_load(path: &Path, files: &[PathBuf], o: &LoadOptions) -> Result<LoadReport> {
    let start = Instant::now();
    if path.exists() {
        return Err(RdfError::Invalid(format!("{} already exists; bulk_load builds a new store (load adds to an open one)", path.display())));
    }
    remove_dead_partials(path);
    let mut partial = path.as_os_str().to_owned();
    partial.push(format!(".partial-{}", std::process::id()));
    let partial = PathBuf::from(partial);
    std::fs::create_dir_all(&partial).map_err(io_err(&partial))?;
    let res = build(&partial, files, o);
    match res {
        Ok(mut report) => {
            std::fs::rename(&partial, path).map_err(io_err(path))?;
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
            report.seconds = start.elapsed().as_secs_f64();
            Ok(report)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&partial);
            Err(e)
        }
    }
}

/// Removes `<path>.partial-<pid>` directories of loads whose process is
/// gone (killed mid-load). Where `/proc` is missing nothing is removed.
fn remove_dead_partials(path: &Path) {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else { return };
    let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    let prefix = format!("{name}.partial-");
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(pid) = file.to_str().and_then(|f| f.strip_prefix(&prefix)).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// With `SOLIDGRAPH_LOAD_TRACE` set, each phase of the load prints its
/// wall seconds, the process's CPU seconds (how many cores it kept busy)
/// and the calling thread's (the part no other thread can take: with
/// free cores a phase lasts at least that).
struct Trace(Option<(Instant, f64, f64)>);

/// User + system CPU seconds of `stat` (`/proc/self/stat` or
/// `/proc/thread-self/stat`, in clock ticks of 1/100 s); 0 where it
/// cannot be read.
fn cpu_secs(stat: &str) -> f64 {
    let s = std::fs::read_to_string(stat).unwrap_or_default();
    let f: Vec<&str> = s.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

impl Trace {
    fn new() -> Trace {
        Trace(std::env::var_os("SOLIDGRAPH_LOAD_TRACE").map(|_| (Instant::now(), cpu_secs("/proc/self/stat"), cpu_secs("/proc/thread-self/stat"))))
    }

    fn mark(&mut self, what: &str) {
        if let Some((t, c, m)) = self.0.as_mut() {
            let (w, cc, mm) = (t.elapsed().as_secs_f64(), cpu_secs("/proc/self/stat") - *c, cpu_secs("/proc/thread-self/stat") - *m);
            eprintln!("phase {what:>12}: {w:.2} s wall, {cc:.2} s cpu ({:.2} cores), {mm:.2} s on the calling thread", cc / w.max(1e-9));
            *t = Instant::now();
            *c = cpu_secs("/proc/self/stat");
            *m = cpu_secs("/proc/thread-self/stat");
        }
    }
}

fn build(dir: &Path, files: &[PathBuf], o: &LoadOptions) -> Result<LoadReport> {
    let mut trace = Trace::new();
    let bar = progress_bar(files, o);
    let input_bytes = files.iter().map(|f| std::fs::metadata(f).map_or(0, |m| m.len())).sum();
    // Half the budget for the quads' sort buffer; the term interner's map
    // takes the rest.
    let mut interner = Interner::new(dir, o.memory_budget / 2, input_bytes);
    let mut sorter = QuadSorter::new(dir, o.memory_budget / 2);
    let (quads, skipped) = parse::read_batches(files, o, &bar, |b| {
        for q in b.quads() {
            interner.push(&q, &mut |ids| sorter.push(ids))?;
        }
        Ok(())
    })?;
    // The dictionary is written (and the interner's memory freed) before
    // the quads are merged.
    trace.mark("parse+intern");
    bar.set_message("dictionary");
    let terms = interner.finish(&Meta { generation: 1, ..Meta::default() }.dict_path(dir), &mut |ids| sorter.push(ids))?;
    trace.mark("dict+pending");
    bar.set_message("dedup");
    let mut sorter = Some(sorter);
    let progress = |phase: &str, done: u64, total: u64| {
        bar.set_message(phase.to_string());
        bar.set_length(total);
        bar.set_position(done);
    };
    if o.progress {
        bar.set_style(ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}").expect("static template").progress_chars("=> "));
    }
    write_generation(
        dir,
        1,
        terms,
        o.memory_budget,
        &mut |f| match sorter.take() {
            Some(s) => s.finish(f).map(|_| ()),
            None => Ok(()),
        },
        &progress,
    )?;
    bar.finish_and_clear();
    Ok(LoadReport { quads, skipped, terms, seconds: 0.0 })
}
