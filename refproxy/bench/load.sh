#!/usr/bin/env bash
# Load benchmark: wrk against refproxy and against nginx (1 worker, upstream
# keep-alive), both in front of the same backend (a second nginx answering a
# fixed 200), interleaved so that machine noise hits both alike. Prints the
# requests/s of each run and the ratio refproxy/nginx (target >= 0.75 at 64
# connections).
#
#   make bench-load                     # or: ./refproxy/bench/load.sh
#   ROUNDS=3 DURATION=10s CONNS=64 THREADS=2 ./refproxy/bench/load.sh
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

need() {
	command -v "$1" >/dev/null 2>&1 && return
	echo "installing $2 (Debian package)" >&2
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	# A fresh machine has no package lists yet.
	$sudo apt-get install -y "$2" >/dev/null 2>&1 || { $sudo apt-get update -qq && $sudo apt-get install -y "$2" >/dev/null; }
}
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

(cd "$ROOT" && go build -o "$WORK/refproxy" ./refproxy/cmd/refproxy)
/usr/sbin/nginx -c "$WORK/backend/nginx.conf" -e "$WORK/backend/error.log" & PIDS+=($!)
/usr/sbin/nginx -c "$WORK/proxy/nginx.conf" -e "$WORK/proxy/error.log" & PIDS+=($!)
"$WORK/refproxy" -f "$WORK/refproxy.yaml" --bind-host 127.0.0.1 --log-level warn & PIDS+=($!)
wait_port "$BACKEND"; wait_port "$NGINX"; wait_port "$REFPROXY"

rps() { # $1 port -> requests/s
	wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:$1/" | awk '/^Requests\/sec:/ {print $2}'
}
# Warm both (connection pools, page cache, CPU frequency) before measuring.
DURATION=2s rps "$NGINX" >/dev/null; DURATION=2s rps "$REFPROXY" >/dev/null

echo "wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS interleaved rounds; backend nginx :$BACKEND"
total_n=0; total_r=0
for i in $(seq "$ROUNDS"); do
	n=$(rps "$NGINX"); r=$(rps "$REFPROXY")
	printf 'round %d: nginx %10.0f req/s   refproxy %10.0f req/s   ratio %.2f\n' "$i" "$n" "$r" "$(echo "$r / $n" | bc -l)"
	total_n=$(echo "$total_n + $n" | bc -l); total_r=$(echo "$total_r + $r" | bc -l)
done
printf 'mean:    nginx %10.0f req/s   refproxy %10.0f req/s   ratio %.2f (target >= 0.75)\n' \
	"$(echo "$total_n / $ROUNDS" | bc -l)" "$(echo "$total_r / $ROUNDS" | bc -l)" "$(echo "$total_r / $total_n" | bc -l)"
