#!/usr/bin/env bash
# Load benchmark with wrk. Two modes, each interleaved over ROUNDS rounds so that
# machine noise hits every case alike; both put the proxy in front of the same
# backend (a second nginx answering a fixed 200).
#
# Default: refproxy against nginx (1 worker, upstream keep-alive). Prints, per
# run, requests/s, the proxy's CPU per request (utime+stime from
# /proc/<pid>/stat over the wrk run; nginx: its worker) and its memory after the
# run (VmRSS, VmHWM from /proc/<pid>/status), and the ratio refproxy/nginx
# (target >= 0.75 at 64 connections). wrk, backend and proxy share the machine,
# so CPU per request compares the two proxies at their own throughputs.
#
# WATCHERS=1: refproxy alone, with and without a `gwdiag trace --local --follow`
# process attached (the reader on the same machine, as a user runs it):
#   none     no watcher
#   cel      --expression matching no request
#   status   --status 5xx (an outcome filter; every response is a 200)
#   all      every request, --raw --max-requests 1000000: the proxy ends a
#            follow stream after 1000 traces (its ceiling), and gwdiag follows
#            on the next at once, in one process for the whole run; requests
#            between two streams go untraced (the events received say how
#            many were traced). The events go to a file in memory, counted
#            after the run.
# Odd rounds run the cases in that order, even rounds in reverse. Prints
# requests/s, the ratio to no watcher of the same round (and, at the end, the
# mean and the median of those ratios), the proxy's CPU per request and the
# reader's (all gwdiag processes of the run).
#
#   make bench-load                     # or: ./refproxy/bench/load.sh
#   ROUNDS=3 DURATION=10s CONNS=64 THREADS=2 ./refproxy/bench/load.sh
#   make bench-load WATCHERS=1          # CONNS=16 DURATION=8s unless set
#   CASES="none status" ROUNDS=8 make bench-load WATCHERS=1   # some cases only
#   REFPROXY_BIN=/tmp/refproxy GWDIAG_BIN=/tmp/gwdiag ./refproxy/bench/load.sh   # given builds
#   PROFILE=/tmp/prof ./refproxy/bench/load.sh   # then one profiled refproxy run
set -euo pipefail

WATCHERS=${WATCHERS:-0}
[ "$WATCHERS" = 0 ] || WATCHERS=1
ROUNDS=${ROUNDS:-3}
if [ "$WATCHERS" = 1 ]; then
	DURATION=${DURATION:-8s}
	CONNS=${CONNS:-16}
else
	DURATION=${DURATION:-10s}
	CONNS=${CONNS:-64}
fi
THREADS=${THREADS:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
# Followed events are written to memory (tmpfs where there is one).
MEMDIR=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
EVENTS="$MEMDIR/events.jsonl"
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK" "$MEMDIR"
}
trap cleanup EXIT

. "$(dirname "$0")/need.sh"
need wrk wrk
[ -x /usr/sbin/nginx ] || need nginx nginx

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "nothing listens on port $1" >&2
	exit 1
}

BACKEND=$(free_port); NGINX=$(free_port); REFPROXY=$(free_port); ADMIN=$(free_port)

nginx_conf() { # $1 dir, $2 server block
	mkdir -p "$1"
	cat >"$1/nginx.conf" <<NGX
worker_processes 1;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $1; proxy_temp_path $1; fastcgi_temp_path $1; uwsgi_temp_path $1; scgi_temp_path $1;
  $2
}
NGX
}

nginx_conf "$WORK/backend" "server { listen 127.0.0.1:$BACKEND; keepalive_requests 1000000; location / { return 200 'ok\n'; } }"
nginx_conf "$WORK/proxy" "upstream be { server 127.0.0.1:$BACKEND; keepalive 128; keepalive_requests 1000000; }
  server { listen 127.0.0.1:$NGINX; keepalive_requests 1000000;
    location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection \"\";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for; } }"

cat >"$WORK/refproxy.yaml" <<YAML
config: {adminAddr: "127.0.0.1:$ADMIN"}
binds:
- port: $REFPROXY
  listeners:
  - protocol: HTTP
    routes:
    - name: backend
      matches: [{path: {pathPrefix: /}}]
      backends: [{host: "127.0.0.1:$BACKEND"}]
YAML

# REFPROXY_BIN and GWDIAG_BIN run given binaries (e.g. two builds compared
# run after run) instead of building this tree's.
if [ -n "${REFPROXY_BIN:-}" ]; then cp "$REFPROXY_BIN" "$WORK/refproxy"; else (cd "$ROOT" && go build -o "$WORK/refproxy" ./refproxy/cmd/refproxy); fi
if [ "$WATCHERS" = 1 ]; then
	if [ -n "${GWDIAG_BIN:-}" ]; then cp "$GWDIAG_BIN" "$WORK/gwdiag"; else (cd "$ROOT" && go build -o "$WORK/gwdiag" ./cli/cmd/gwdiag); fi
fi
/usr/sbin/nginx -c "$WORK/backend/nginx.conf" -e "$WORK/backend/error.log" & PIDS+=($!)
if [ "$WATCHERS" = 0 ]; then
	/usr/sbin/nginx -c "$WORK/proxy/nginx.conf" -e "$WORK/proxy/error.log" & NGINX_PID=$!; PIDS+=($NGINX_PID)
fi
"$WORK/refproxy" -f "$WORK/refproxy.yaml" --bind-host 127.0.0.1 --log-level warn & REFPROXY_PID=$!; PIDS+=($REFPROXY_PID)
wait_port "$BACKEND"; wait_port "$REFPROXY"; wait_port "$ADMIN"
if [ "$WATCHERS" = 0 ]; then
	wait_port "$NGINX"
	# The worker does the proxying; the master only waits.
	NGINX_WORKER=""
	for _ in $(seq 100); do
		NGINX_WORKER=$(awk '{print $1}' "/proc/$NGINX_PID/task/$NGINX_PID/children")
		[ -z "$NGINX_WORKER" ] || break
		sleep 0.05
	done
	[ -n "$NGINX_WORKER" ] || { echo "nginx proxy $NGINX_PID has no worker" >&2; exit 1; }
fi

TICK=$(getconf CLK_TCK)
cpu_ticks() { # $1 pid -> utime+stime (+ waited-for children's) in clock ticks
	awk '{ sub(/^.*\) /, ""); print $12 + $13 + $14 + $15 }' "/proc/$1/stat"
}
mem() { # $1 pid -> "RSS/HWM MiB"
	awk '/^VmRSS:/ {r=$2} /^VmHWM:/ {h=$2} END {printf "%5.1f/%5.1f", r/1024, h/1024}' "/proc/$1/status"
}
us_per() { # $1 ticks, $2 requests -> microseconds per request
	echo "$1 * 1000000 / $TICK / $2" | bc -l
}

# wrk against port $1; sets RPS and REQS (requests completed).
run_wrk() {
	wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:$1/" >"$WORK/wrk.out"
	RPS=$(awk '/^Requests\/sec:/ {print $2}' "$WORK/wrk.out")
	REQS=$(awk '/ requests in / {print $1}' "$WORK/wrk.out")
	if grep -q 'Non-2xx' "$WORK/wrk.out"; then
		echo "wrk saw non-2xx responses:" >&2; cat "$WORK/wrk.out" >&2; exit 1
	fi
}
# run_wrk against port $1 while measuring pid $2; sets CPU_US (per request).
measured() {
	local t0 t1
	t0=$(cpu_ticks "$2"); run_wrk "$1"; t1=$(cpu_ticks "$2")
	CPU_US=$(us_per "$((t1 - t0))" "$REQS")
}

if [ "$WATCHERS" = 0 ]; then
	# Warm both (connection pools, page cache, CPU frequency) before measuring.
	DURATION=2s run_wrk "$NGINX"; DURATION=2s run_wrk "$REFPROXY"
	echo "wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS interleaved rounds; backend nginx :$BACKEND; load: $(uptime | sed 's/.*load/load/')"
	echo "CPU: proxy process's utime+stime per request over the run; memory: VmRSS/VmHWM MiB after it"
	total_n=0; total_r=0
	for i in $(seq "$ROUNDS"); do
		measured "$NGINX" "$NGINX_WORKER"; n=$RPS; nc=$CPU_US; nm=$(mem "$NGINX_WORKER")
		measured "$REFPROXY" "$REFPROXY_PID"; r=$RPS; rc=$CPU_US; rm=$(mem "$REFPROXY_PID")
		printf 'round %d: nginx %7.0f req/s %5.1f us/req %s MiB   refproxy %7.0f req/s %5.1f us/req %s MiB   ratio %.2f, CPU %.2fx\n' \
			"$i" "$n" "$nc" "$nm" "$r" "$rc" "$rm" "$(echo "$r / $n" | bc -l)" "$(echo "$rc / $nc" | bc -l)"
		total_n=$(echo "$total_n + $n" | bc -l); total_r=$(echo "$total_r + $r" | bc -l)
	done
	printf 'mean:    nginx %7.0f req/s   refproxy %7.0f req/s   ratio %.2f (target >= 0.75)\n' \
		"$(echo "$total_n / $ROUNDS" | bc -l)" "$(echo "$total_r / $ROUNDS" | bc -l)" "$(echo "$total_r / $total_n" | bc -l)"
	echo "nginx worker VmRSS/VmHWM $(mem "$NGINX_WORKER") MiB (master $(mem "$NGINX_PID")); refproxy $(mem "$REFPROXY_PID") MiB"
	echo "load after: $(uptime | sed 's/.*load/load/')"
	if [ -n "${PROFILE:-}" ]; then
		# One more refproxy run, profiled by its admin server: CPU over the
		# run, then the heap; the binary beside them for go tool pprof.
		mkdir -p "$PROFILE"; cp "$WORK/refproxy" "$PROFILE/refproxy"
		secs=$(( ${DURATION%s} > 3 ? ${DURATION%s} - 2 : 1 ))
		curl -sf -o "$PROFILE/cpu.out" "http://127.0.0.1:$ADMIN/debug/pprof/profile?seconds=$secs" & CURL=$!
		run_wrk "$REFPROXY"; wait "$CURL"
		curl -sf -o "$PROFILE/heap.out" "http://127.0.0.1:$ADMIN/debug/pprof/heap"
		curl -sf -o "$PROFILE/memory.json" "http://127.0.0.1:$ADMIN/memory"
		echo "profiled run: refproxy $RPS req/s; go tool pprof -top $PROFILE/refproxy $PROFILE/cpu.out (heap.out, memory.json)"
	fi
	exit 0
fi

# --- WATCHERS=1 ---
ADMIN_URL="http://127.0.0.1:$ADMIN"
# A filtered watcher outlives the wrk run by this much, then is stopped.
SECS=${DURATION%s}
WATCH_FOR=$((SECS + 30))s

# start_watcher CASE: starts the reader(s) for CASE in the background; sets WPID.
start_watcher() {
	: >"$WORK/events"; : >"$WORK/stderr"
	case $1 in
	cel)
		"$WORK/gwdiag" trace --local --admin-url "$ADMIN_URL" --follow --raw --max-requests 1000 --duration "$WATCH_FOR" \
			--expression 'request.path.startsWith("/nothing-goes-here")' >"$WORK/events" 2>"$WORK/stderr" & WPID=$! ;;
	status)
		"$WORK/gwdiag" trace --local --admin-url "$ADMIN_URL" --follow --raw --max-requests 1000 --duration "$WATCH_FOR" \
			--status 5xx >"$WORK/events" 2>"$WORK/stderr" & WPID=$! ;;
	all)
		# One gwdiag for the whole run: with --raw, --max-requests past the
		# proxy's 1000 a stream is followed on consecutive streams. The
		# events go to a file in memory, counted once the run is over.
		"$WORK/gwdiag" trace --local --admin-url "$ADMIN_URL" --follow --raw --max-requests 1000000 --duration "$WATCH_FOR" \
			>"$EVENTS" 2>"$WORK/stderr" & WPID=$! ;;
	esac
	# The watcher is attached once a goroutine of the proxy serves its stream
	# (registered before it is served).
	for _ in $(seq 200); do
		curl -sf "$ADMIN_URL/debug/tasks" 2>/dev/null | grep -q 'refproxy/internal/tracing.serve' && return 0
		sleep 0.05
	done
	echo "the $1 watcher never attached; its stderr:" >&2; cat "$WORK/stderr" >&2; exit 1
}
# stop_watcher CASE: stops the reader(s) started for CASE; sets READER_TICKS.
stop_watcher() {
	READER_TICKS=$(cpu_ticks "$WPID")
	kill "$WPID" 2>/dev/null || true
	wait "$WPID" 2>/dev/null || true
}

# CASES="none status" runs some of them (none is always run: the others are
# compared with it).
read -r -a CASES <<<"${CASES:-none cel status all}"
[[ " ${CASES[*]} " == *" none "* ]] || CASES=(none "${CASES[@]}")
for c in "${CASES[@]}"; do
	case $c in none | cel | status | all) ;; *) echo "CASES: unknown case $c (want none, cel, status, all)" >&2; exit 2 ;; esac
done
declare -A SUM_RPS SUM_RATIO SUM_CPU SUM_READER RATIOS
for c in "${CASES[@]}"; do SUM_RPS[$c]=0; SUM_RATIO[$c]=0; SUM_CPU[$c]=0; SUM_READER[$c]=0; RATIOS[$c]=""; done

DURATION=2s run_wrk "$REFPROXY" # warm
echo "wrk -t$THREADS -c$CONNS -d$DURATION against refproxy, $ROUNDS interleaved rounds of: ${CASES[*]} (even rounds in reverse); load: $(uptime | sed 's/.*load/load/')"
echo "CPU per request: refproxy's utime+stime over the wrk run / requests; reader: every gwdiag process of the case"
for i in $(seq "$ROUNDS"); do
	# Odd rounds run the cases in order, even ones in reverse, so that a
	# machine growing busier or quieter over a round weighs on no case more
	# than on another; each case is compared with the no-watcher run of its
	# own round, once the round is over.
	order=("${CASES[@]}")
	if [ $((i % 2)) = 0 ]; then
		order=(); for c in "${CASES[@]}"; do order=("$c" "${order[@]}"); done
	fi
	declare -A RPS_OF=() CPU_OF=() RT_OF=() REQS_OF=() NOTE_OF=() TRACED_OF=()
	for c in "${order[@]}"; do
		if [ "$c" = none ]; then
			measured "$REFPROXY" "$REFPROXY_PID"; rt=0
		else
			start_watcher "$c"
			t0=$(cpu_ticks "$REFPROXY_PID")
			run_wrk "$REFPROXY"
			t1=$(cpu_ticks "$REFPROXY_PID")
			stop_watcher "$c"; rt=$READER_TICKS
			CPU_US=$(us_per "$((t1 - t0))" "$REQS")
		fi
		RPS_OF[$c]=$RPS; CPU_OF[$c]=$CPU_US; RT_OF[$c]=$rt; REQS_OF[$c]=$REQS; NOTE_OF[$c]=""; TRACED_OF[$c]=0
		if [ "$c" != none ]; then
			if [ "$c" = all ]; then
				events=$(wc -l <"$EVENTS"); traced=$(grep -c requestFinished "$EVENTS" || true); rm -f "$EVENTS"
				TRACED_OF[$c]=$traced
				NOTE_OF[$c]=$(printf '  %d events, %d requests traced (%.0f%%)' "$events" "$traced" \
					"$(echo "100 * $traced / $REQS" | bc -l)")
			else
				NOTE_OF[$c]="  events $(wc -l <"$WORK/events")"
			fi
			drops=$(grep -c 'dropped' "$WORK/stderr" || true)
			[ "$drops" = 0 ] || NOTE_OF[$c]+=" drops announced: $(grep 'dropped' "$WORK/stderr" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | awk '{s += $1} END {print s}') events in $drops warnings"
		fi
	done
	base=${RPS_OF[none]}; base_cpu=${CPU_OF[none]}
	for c in "${CASES[@]}"; do
		RPS=${RPS_OF[$c]}; CPU_US=${CPU_OF[$c]}; REQS=${REQS_OF[$c]}; traced=${TRACED_OF[$c]}
		ratio=$(echo "$RPS / $base" | bc -l)
		reader=$(us_per "${RT_OF[$c]}" "$REQS")
		extra=${NOTE_OF[$c]}
		[ "$traced" -gt 0 ] && extra+=$(printf '; per traced request: refproxy +%.1f us, reader %.1f us' \
			"$(echo "($CPU_US - $base_cpu) * $REQS / $traced" | bc -l)" "$(us_per "${RT_OF[$c]}" "$traced")")
		printf 'round %d %-6s %7.0f req/s  %.2fx  refproxy %5.1f us/req  reader %5.1f us/req%s\n' \
			"$i" "$c" "$RPS" "$ratio" "$CPU_US" "$reader" "$extra"
		SUM_RPS[$c]=$(echo "${SUM_RPS[$c]} + $RPS" | bc -l); SUM_RATIO[$c]=$(echo "${SUM_RATIO[$c]} + $ratio" | bc -l)
		SUM_CPU[$c]=$(echo "${SUM_CPU[$c]} + $CPU_US" | bc -l); SUM_READER[$c]=$(echo "${SUM_READER[$c]} + $reader" | bc -l)
		RATIOS[$c]+=" $ratio"
	done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for c in "${CASES[@]}"; do
	printf 'mean   %-6s %7.0f req/s  %.2fx (median %.2fx)  refproxy %5.1f us/req  reader %5.1f us/req\n' "$c" \
		"$(echo "${SUM_RPS[$c]} / $ROUNDS" | bc -l)" "$(echo "${SUM_RATIO[$c]} / $ROUNDS" | bc -l)" "$(echo "${RATIOS[$c]}" | median)" \
		"$(echo "${SUM_CPU[$c]} / $ROUNDS" | bc -l)" "$(echo "${SUM_READER[$c]} / $ROUNDS" | bc -l)"
done
echo "refproxy VmRSS/VmHWM $(mem "$REFPROXY_PID") MiB; load after: $(uptime | sed 's/.*load/load/')"
