#!/usr/bin/env bash
# Instructions per iteration of a Go benchmark, counted by callgrind: a figure
# that machine noise does not move, for changes of a few percent that wrk and
# ns/op cannot resolve on a shared machine.
#
#   ./refproxy/bench/instr.sh PKG BENCH FUNC
#   make bench-instr INSTR_PKG=./refproxy/internal/proxy INSTR_BENCH='BenchmarkServe/outcome-dropped$' INSTR_FUNC='(*bindHandler).serve'
#
# PKG is a package (./refproxy/internal/proxy), BENCH a -test.bench pattern that
# selects one benchmark, FUNC the function whose inclusive count is reported
# (its name as Go prints it, without the package: '(*bindHandler).serve';
# a final part of it, after a dot, will do: 'serve').
# The benchmark runs twice under callgrind, N1 and N2 iterations (-benchtime
# Nx, GOGC=off so that no collection lands in one run and not the other,
# no asynchronous preemption: callgrind cannot follow its signals; one P:
# under callgrind, idle Ps spinning make a run a hundred times slower);
# what FUNC executed in the difference, divided by N2-N1, is its cost per
# iteration, setup cancelled out. Counts include the callees, so FUNC should
# be the benchmark's request entry point. The runtime is kept from RDTSCP
# (GODEBUG cpu.rdtscp=off), an instruction valgrind 3.19 cannot decode:
# on a CPU that has it, runtime.cputicks (a spinning lock, sysmon) killed
# most runs with SIGILL. Counts are printed whole (awk writes a number
# past 2^31 as 2.26672e+09 otherwise, which the shell cannot subtract).
# Installs valgrind with apt-get if missing.
set -euo pipefail

usage() {
	echo "usage: $0 PKG BENCH FUNC   (e.g. ./refproxy/internal/proxy 'BenchmarkServe/no-watcher\$' '(*bindHandler).serve')" >&2
	exit 2
}
[ $# = 3 ] || usage
PKG=$1 BENCH=$2 FUNC=$3
[ -n "$PKG" ] && [ -n "$BENCH" ] && [ -n "$FUNC" ] || usage
N1=${N1:-2000}
N2=${N2:-12000}
[ "$N2" -gt "$N1" ] || { echo "$0: N2 ($N2) must exceed N1 ($N1)" >&2; exit 2; }

. "$(dirname "$0")/need.sh"
need valgrind valgrind
need callgrind_annotate valgrind

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# INSTR_TEST_BIN: a test binary of PKG built already (an A/B of two
# revisions: build each with go test -c, count each; the counts do not
# depend on what else the machine runs).
if [ -n "${INSTR_TEST_BIN:-}" ]; then
	cp "$INSTR_TEST_BIN" "$WORK/bench.test"
else
	(cd "$ROOT" && go test -c -o "$WORK/bench.test" "$PKG")
fi

# count N: FUNC's inclusive instructions over a run of N iterations. The
# largest count among the lines naming FUNC exactly (a recursive function
# appears more than once; its outermost call is the largest). The run's
# total is kept in $WORK/total.N.
count() {
	local out="$WORK/callgrind.$1"
	(cd "$ROOT/${PKG#./}" && GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$out" \
		"$WORK/bench.test" -test.run '^$' -test.bench "$BENCH" -test.benchtime "${1}x" >"$WORK/log.$1" 2>&1) || {
		echo "$0: the benchmark failed under callgrind:" >&2
		tail -20 "$WORK/log.$1" >&2
		exit 1
	}
	if ! grep -q '^Benchmark' "$WORK/log.$1"; then
		echo "$0: no benchmark matches $BENCH in $PKG" >&2
		exit 1
	fi
	callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null | awk -v f="$FUNC" -v total="$WORK/total.$1" '
		/PROGRAM TOTALS/ { t = $1; gsub(",", "", t); printf "%s\n", t > total }
		{
			n = $1; gsub(",", "", n)
			if (n !~ /^[0-9]+$/) next
			name = $0; sub(/ \[[^]]*\]$/, "", name); sub(/^.*:/, "", name)
			# name is pkg/path.FUNC: FUNC must end it, after the package.
			if (length(name) >= length(f) && substr(name, length(name) - length(f) + 1) == f) {
				pre = substr(name, 1, length(name) - length(f))
				if ((pre == "" || pre ~ /\.$/) && n + 0 > best) best = n + 0
			}
		}
		END { if (best > 0) printf "%.0f\n", best }'
}

c1=$(count "$N1")
c2=$(count "$N2")
if [ -z "$c1" ] || [ -z "$c2" ]; then
	echo "$0: callgrind shows no function $FUNC in $BENCH (give its name as Go prints it, without the package)" >&2
	exit 1
fi
# The whole program's instructions per iteration (the function's, the
# benchmark loop's and the runtime's): a check of the function's count,
# which callgrind can misattribute when goroutines switch inside it (the
# Go scheduler changes stacks under it); the two move together when it
# does not.
t1=$(cat "$WORK/total.$N1") t2=$(cat "$WORK/total.$N2")
echo "$BENCH $FUNC: $(( (c2 - c1) / (N2 - N1) )) instructions/iteration; the whole program: $(( (t2 - t1) / (N2 - N1) ))/iteration (callgrind, $N1 and $N2 iterations)"
