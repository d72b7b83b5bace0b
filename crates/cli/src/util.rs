//! Small helpers shared by the subcommands of `solidgraph` and
//! `solidgraph-bench`.

use std::error::Error;

use solidgraph_engine::EngineError;
use solidgraph_store::order::VertexOrder;
use solidgraph_store::{BackendChoice, BackendKind, Front, StoreError};

pub type CliResult<T = ()> = Result<T, Box<dyn Error + Send + Sync>>;

/// An error as a shell user reads it: a remedy for what the store lacks
/// names the flag that gives it (`--weights`), not a Python argument.
pub fn for_cli(e: Box<dyn Error + Send + Sync>) -> Box<dyn Error + Send + Sync> {
    if let Some(s) = e.downcast_ref::<StoreError>() {
        return s.message(Front::Cli).into();
    }
    if let Some(s) = e.downcast_ref::<EngineError>() {
        return s.message(Front::Cli).into();
    }
    e
}

/// Parses a vertex id. Negative ids get our own message: clap would only
/// say "invalid digit".
pub fn parse_vertex(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("negative vertex id {t}"));
    }
    t.parse().map_err(|_| format!("{t:?} is not a vertex id (a non-negative integer)"))
}

/// Parses `--backend`: uring or posix.
pub fn parse_backend(s: &str) -> Result<BackendKind, String> {
    s.parse().map_err(|_| format!("{s:?} is not an I/O backend: uring or posix"))
}

/// `--backend` given forces that backend; absent, `SOLIDGRAPH_IO_BACKEND`
/// or io_uring when the kernel allows it, else posix.
pub fn backend_choice(b: Option<BackendKind>) -> BackendChoice {
    b.map_or(BackendChoice::Auto, BackendChoice::Force)
}

/// Parses sizes such as `4096`, `64k`, `4GiB`, `1.5G` (binary units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a size (e.g. 4096, 64KiB, 4GiB)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        u => return Err(format!("unknown size unit {u:?} in {s:?}")),
    };
    Ok((n * mult as f64) as u64)
}

/// Parses a vertex order as `import --order` spells it.
pub fn parse_order(s: &str) -> Result<VertexOrder, String> {
    VertexOrder::parse(s).ok_or_else(|| format!("{s:?} is not an order: input or degree"))
}

pub fn progress_bar(total: u64, what: &str) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new(total);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{msg:>12} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert_eq!(parse_size("1.5M").unwrap(), 3 << 19);
        assert!(parse_size("four").is_err());
        assert!(parse_size("4 parsecs").is_err());
    }
}
