#!/bin/sh
# The fuzz build's rustc wrapper (fuzz/.cargo/config.toml). Compare
# tracing (libFuzzer's table of recent compares) is off in two
# dependencies whose loops compare on every step and guide nothing: the
# checksum (the targets reseal what they damage) and xsd:dateTime
# arithmetic (every SPARQL evaluation computes NOW() from 1970 in a
# loop over months). Their edge coverage stays on. cargo-fuzz's flags
# come in RUSTFLAGS, ahead of profile flags, so a later flag on the
# command line is the one place that overrides them.
rustc=$1
shift
case " $* " in
*" --crate-name crc32c "* | *" --crate-name oxsdatatypes "*)
  exec "$rustc" "$@" -Cllvm-args=-sanitizer-coverage-trace-compares=0
  ;;
esac
exec "$rustc" "$@"
