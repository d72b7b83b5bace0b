//! `solidgraph rdf load | query | update | compact`: the RDF store
//! (`solidgraph-rdf`) from the shell.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use solidgraph_rdf::{
    LoadOptions, OpenOptions, QueryOptions, QueryOutput, RdfFormat, RdfStore, rdf_format, results_format, write_boolean, write_solutions, write_triples,
};

use crate::util::CliResult;

#[derive(Args)]
pub struct RdfArgs {
    #[command(subcommand)]
    pub cmd: RdfCmd,
}

#[derive(Subcommand)]
pub enum RdfCmd {
    /// Loads RDF files (N-Triples, N-Quads, Turtle, TriG, RDF/XML): builds the store if it does not exist, else adds the quads durably.
    Load(LoadArgs),
    /// Runs a SPARQL query; SELECT/ASK results as JSON/XML/CSV/TSV, CONSTRUCT/DESCRIBE as N-Triples.
    Query(QueryArgs),
    /// Runs a SPARQL update, durable when the command returns.
    Update(UpdateArgs),
    /// Folds pending updates into pages and empties the update log; converts
    /// an older store's dictionary to the paged format first.
    Compact(CompactArgs),
}

#[derive(Args)]
pub struct LoadArgs {
    pub store: PathBuf,
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Syntax of every file (nt, nq, ttl, trig, rdf); default: from each file's extension.
    #[arg(long)]
    pub format: Option<String>,
    /// Base IRI for relative IRIs (default: each file's file:// IRI).
    #[arg(long)]
    pub base: Option<String>,
    /// Skip bad statements and report how many, instead of failing on the first.
    #[arg(long)]
    pub lenient: bool,
    /// Memory for the load's sort buffers, MiB.
    #[arg(long, default_value_t = 1024)]
    pub memory_mb: u64,
}

#[derive(Args)]
pub struct QueryArgs {
    pub store: PathBuf,
    /// The query text (or use --file).
    #[arg(required_unless_present = "file")]
    pub query: Option<String>,
    /// Read the query from this file.
    #[arg(long, conflicts_with = "query")]
    pub file: Option<PathBuf>,
    /// SELECT/ASK results format: json, xml, csv or tsv.
    #[arg(long, default_value = "json")]
    pub results: String,
    /// CONSTRUCT/DESCRIBE output syntax: nt or ttl.
    #[arg(long, default_value = "nt")]
    pub graph_format: String,
    /// Cancel the query after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Fail once the query yields more than this many results.
    #[arg(long)]
    pub limit: Option<u64>,
    /// The default graph is the union of all graphs, the default one included.
    #[arg(long)]
    pub union_default_graph: bool,
}

#[derive(Args)]
pub struct UpdateArgs {
    pub store: PathBuf,
    /// The update text (or use --file).
    #[arg(required_unless_present = "file")]
    pub update: Option<String>,
    /// Read the update from this file.
    #[arg(long, conflicts_with = "update")]
    pub file: Option<PathBuf>,
}

#[derive(Args)]
pub struct CompactArgs {
    pub store: PathBuf,
}

fn text(inline: Option<String>, file: Option<PathBuf>) -> CliResult<String> {
    match (inline, file) {
        (Some(t), _) => Ok(t),
        (None, Some(f)) => std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()).into()),
        (None, None) => Err("give the text or --file".into()),
    }
}

pub fn rdf_cmd(a: RdfArgs) -> CliResult {
    match a.cmd {
        RdfCmd::Load(a) => load(a),
        RdfCmd::Query(a) => query(a),
        RdfCmd::Update(a) => {
            let s = RdfStore::open(&a.store, &OpenOptions { writable: true, ..Default::default() })?;
            let r = s.update(&text(a.update, a.file)?, &QueryOptions::default())?;
            println!("inserted {} deleted {}", r.inserted, r.deleted);
            Ok(())
        }
        RdfCmd::Compact(a) => {
            if RdfStore::upgrade(&a.store)? {
                println!("converted the dictionary to the current format (version 4: inline pages listed in its directory)");
            }
            let s = RdfStore::open(&a.store, &OpenOptions { writable: true, ..Default::default() })?;
            s.compact()?;
            let i = s.info()?;
            println!("{} quads, {} terms, {} bytes", i.quads, i.terms, i.bytes);
            Ok(())
        }
    }
}

fn load(a: LoadArgs) -> CliResult {
    let format: Option<RdfFormat> = a.format.as_deref().map(rdf_format).transpose()?;
    let o = LoadOptions { format, base_iri: a.base, lenient: a.lenient, memory_budget: a.memory_mb << 20, progress: true, ..Default::default() };
    let r = if a.store.exists() {
        RdfStore::open(&a.store, &OpenOptions { writable: true, ..Default::default() })?.load(&a.files, &o)?
    } else {
        RdfStore::bulk_load(&a.store, &a.files, &o)?
    };
    println!("{} quads read, {} skipped, {} terms, {:.2} s", r.quads, r.skipped, r.terms, r.seconds);
    Ok(())
}

fn query(a: QueryArgs) -> CliResult {
    let q = text(a.query, a.file)?;
    let s = RdfStore::open(&a.store, &OpenOptions::default())?;
    let o = QueryOptions {
        timeout: a.timeout.map(Duration::from_secs_f64),
        result_limit: a.limit,
        default_graph_as_union: a.union_default_graph,
        ..Default::default()
    };
    let out = BufWriter::new(std::io::stdout().lock());
    match s.query(&q, &o)? {
        QueryOutput::Solutions { variables, rows } => {
            write_solutions(out, results_format(&a.results)?, &variables, rows)?;
        }
        QueryOutput::Boolean(b) => write_boolean(out, results_format(&a.results)?, b)?,
        QueryOutput::Triples(t) => {
            write_triples(out, rdf_format(&a.graph_format)?, t)?;
        }
    }
    std::io::stdout().flush()?;
    Ok(())
}
