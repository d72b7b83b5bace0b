#!/bin/sh
# One bulk load of benchmarks/rdf data by a `solidgraph` CLI binary, in a
# 2 GiB memory cgroup (v1), OS caches dropped first; prints wall, CPU and
# peak RSS (GNU time), the cgroup's peak (RSS + page cache) and, with
# SOLIDGRAPH_LOAD_TRACE=1 in the environment, each phase's wall and CPU.
# Needs root. Alternate builds between runs to compare them:
#   SOLIDGRAPH_LOAD_TRACE=1 benchmarks/rdf/load40.sh BINARY LABEL DATA.nt STORE_DIR
set -eu
bin=$1 label=$2 data=$3 store=$4
cg=/sys/fs/cgroup/memory/sg-rdf-load-$$
mkdir -p "$cg"
echo $((2048 << 20)) > "$cg/memory.limit_in_bytes"
rm -rf "$store"
sync
echo 3 > /proc/sys/vm/drop_caches
sh -c "echo \$\$ > $cg/cgroup.procs; exec /usr/bin/time -f '$label %e s wall %U s user %S s sys %M KiB peak RSS' $bin rdf load $store $data"
echo "$label cgroup peak $(($(cat "$cg/memory.max_usage_in_bytes") >> 20)) MiB; load average $(cut -d' ' -f1-3 /proc/loadavg)"
rmdir "$cg"
rm -rf "$store"
