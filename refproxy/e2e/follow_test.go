package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

const echoRoute = `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: echo
      backends:
      - host: "{{.Echo}}"
`

// openFollow opens a follow stream with the query q and returns it once
// it is registered (": ready").
func openFollow(t *testing.T, e *env, q string) (*sse.Reader, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.proxy.AdminAddr()+"/debug/trace?"+q, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("follow stream: %d %s", resp.StatusCode, b)
	}
	r := sse.NewReader(resp.Body)
	if f, err := r.Next(); err != nil || f.Comment != "ready" {
		t.Fatalf("first frame %+v, %v; want the ready comment", f, err)
	}
	return r, func() { resp.Body.Close(); cancel() }
}

// TestFollowTracesManyRequests: a follow stream with max=3 traces the next
// three requests, each complete and in order, under distinct request ids
// that the client and the backend see as x-request-id, then ends; the
// requests after it are not traced.
func TestFollowTracesManyRequests(t *testing.T) {
	e := start(t, echoRoute)
	r, done := openFollow(t, e, "follow=true&max=3")
	defer done()
	var ids []string
	for i := range 5 {
		rep := e.do(t, http.MethodGet, fmt.Sprintf("/get?n=%d", i), "")
		ids = append(ids, rep.header.Get("x-request-id"))
	}
	tr, err := sse.ReadTrace(r)
	if err != nil {
		t.Fatal(err)
	}
	got, traces := trace.ByRequest(tr.Events)
	if len(got) != 3 || strings.Join(got, ",") != strings.Join(ids[:3], ",") {
		t.Fatalf("traced request ids %q; want the first three responses' x-request-id %q", got, ids[:3])
	}
	if ids[3] != "" || ids[4] != "" {
		t.Errorf("requests after the stream's max got x-request-id %q, %q; want none", ids[3], ids[4])
	}
	for i, id := range got {
		evs := traces[id]
		if len(evs) != 12 || evs[0].Type() != trace.RequestStarted || evs[len(evs)-1].Type() != trace.RequestFinished {
			t.Errorf("trace %d (%s): %d events %v; want the 12 of a forwarded request", i, id, len(evs), types(evs))
			continue
		}
		tm, _ := evs[len(evs)-1].Message["timings"].(map[string]any)
		for _, k := range []string{"routeSelectionMicros", "policiesMicros", "backendCallMicros", "responseMicros", "totalMicros"} {
			if _, ok := tm[k].(float64); !ok {
				t.Errorf("trace %d: timings %v lack %s", i, tm, k)
			}
		}
	}
	if got := e.echo.Count(); got != 5 {
		t.Errorf("backend got %d requests, want 5", got)
	}
}

// TestFollowKeepsConcurrentRequestsApart: requests sent at once interleave
// on the stream; split by request id, each is one whole trace.
func TestFollowKeepsConcurrentRequestsApart(t *testing.T) {
	e := start(t, echoRoute)
	r, done := openFollow(t, e, "follow=true&max=16")
	defer done()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if _, err := e.try(http.MethodGet, fmt.Sprintf("/get?n=%d", i), ""); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	tr, err := sse.ReadTrace(r)
	if err != nil {
		t.Fatal(err)
	}
	ids, traces := trace.ByRequest(tr.Events)
	if len(ids) != 16 {
		t.Fatalf("%d request ids on the stream, want 16", len(ids))
	}
	for _, id := range ids {
		evs := traces[id]
		if id == "" || len(evs) != 12 || evs[0].Type() != trace.RequestStarted || evs[11].Type() != trace.RequestFinished {
			t.Errorf("request %q: events %v", id, types(evs))
		}
	}
}

// TestFollowBounds: the proxy refuses bounds beyond its ceilings and a
// follow watcher beyond its cap, and ends a stream at its duration.
func TestFollowBounds(t *testing.T) {
	e := start(t, echoRoute)
	admin := "http://" + e.proxy.AdminAddr() + "/debug/trace?"
	for q, want := range map[string]int{
		"follow=true&max=0":          http.StatusBadRequest,
		"follow=true&max=1001":       http.StatusBadRequest,
		"follow=true&duration=11m":   http.StatusBadRequest,
		"follow=true&duration=never": http.StatusBadRequest,
		"follow=maybe":               http.StatusBadRequest,
		"max=3":                      http.StatusBadRequest,
	} {
		resp, err := http.Get(admin + q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d %q, want %d", q, resp.StatusCode, b, want)
		}
	}
	var closers []func()
	for range tracing.MaxFollowers {
		_, c := openFollow(t, e, "follow=true&duration=1m")
		closers = append(closers, c)
	}
	resp, err := http.Get(admin + "follow=true")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("follow watcher %d: %d, want 429", tracing.MaxFollowers+1, resp.StatusCode)
	}
	for _, c := range closers {
		c()
	}
	// A slot frees when a client goes away (once the proxy notices); a
	// short duration ends the stream with no traffic.
	err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		resp, err := http.Get(admin + "follow=true&duration=1ms")
		if err != nil {
			return false, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("no follow slot freed after the clients went away: %v", err)
	}
	began := time.Now()
	r, done := openFollow(t, e, "follow=true&duration=300ms")
	defer done()
	tr, err := sse.ReadTrace(r)
	if err != nil || len(tr.Events) != 0 {
		t.Errorf("idle follow stream: %d events, %v", len(tr.Events), err)
	}
	if d := time.Since(began); d < 300*time.Millisecond || d > 10*time.Second {
		t.Errorf("idle follow stream of 300ms ended after %v", d)
	}
}

// BenchmarkFollowWatcherCost measures what a follow watcher costs the data
// plane: rounds of 500 requests (8 at a time) through the echo route,
// interleaved: with no watcher; with a follow stream whose expression
// matches none of them (what a forgotten filtered terminal costs until its
// duration ends it); with a follow stream whose outcome filter
// (`response.code >= 500`) keeps none of them (a watcher waiting for a rare
// 5xx); and with a follow stream (max 500) tracing every one of them, read
// as fast as it comes by gwdiag's own reader (following: what `gwdiag
// trace --follow --raw` runs, its output discarded) and by a reader that
// decodes every event whole (following-decoded: sse.ReadTrace, as the
// viewer and the suite read). It reports the requests per second of each,
// each watched case's ratio to the unwatched rounds (x-), and the process's
// CPU per request (cpu-us/req-), the steadier figure on a busy machine:
// client, proxy, backend and reader share it.
func BenchmarkFollowWatcherCost(b *testing.B) {
	e := start(b, echoRoute)
	const round, parallel = 500, 8
	send := func() time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		next := make(chan int)
		for range parallel {
			wg.Go(func() {
				for range next {
					if r, err := e.try(http.MethodGet, "/get", ""); err != nil || r.status != http.StatusOK {
						b.Errorf("%d %v", r.status, err)
					}
				}
			})
		}
		for i := range round {
			next <- i
		}
		close(next)
		wg.Wait()
		return time.Since(t0)
	}
	// watched sends a round with a follow stream of query open, read by
	// read as it comes; it returns the round's time and the requests the
	// reader saw traced. A stream that traces the whole round (all) ends
	// on its own at max; the others are ended once the round is sent.
	watched := func(query string, all bool, read followReader) (time.Duration, int) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.proxy.AdminAddr()+"/debug/trace?follow=true&max=500&duration=10m&"+query, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		ready := make(chan struct{})
		var once sync.Once
		markReady := func() { once.Do(func() { close(ready) }) }
		traced := make(chan int, 1)
		go func() {
			n := read(resp.Body, markReady)
			markReady()
			traced <- n
		}()
		<-ready
		d := send()
		if !all {
			cancel() // a filtered stream takes nothing and would run to its duration
		}
		return d, <-traced
	}
	send() // warm the connections
	// Per case: wall time of the rounds, and the process's CPU time (client,
	// proxy, backend and stream reader) until the round's stream was read.
	const none, celFiltered, outcomeDropped, following, followingDecoded = 0, 1, 2, 3, 4
	var wall, cpu [5]time.Duration
	run := func(c int, f func() (time.Duration, int)) int {
		c0 := cpuTime()
		d, n := f()
		wall[c] += d
		cpu[c] += cpuTime() - c0
		return n
	}
	for range b.N {
		run(none, func() (time.Duration, int) { return send(), 0 })
		if n := run(celFiltered, func() (time.Duration, int) {
			return watched("expression="+url.QueryEscape(`request.path == "/never"`), false, gwdiagReader)
		}); n != 0 {
			b.Errorf("filtered stream traced %d requests, want 0", n)
		}
		if n := run(outcomeDropped, func() (time.Duration, int) {
			return watched("outcome="+url.QueryEscape(`response.code >= 500`), false, gwdiagReader)
		}); n != 0 {
			b.Errorf("outcome-filtered stream traced %d requests, want 0", n)
		}
		if n := run(following, func() (time.Duration, int) { return watched("", true, gwdiagReader) }); n != round {
			b.Errorf("follow stream read by gwdiag's reader traced %d requests, want %d", n, round)
		}
		if n := run(followingDecoded, func() (time.Duration, int) { return watched("", true, decodingReader) }); n != round {
			b.Errorf("follow stream read decoded traced %d requests, want %d", n, round)
		}
	}
	requests := float64(round * b.N)
	for c, name := range []string{"without", "filtered-out", "outcome-dropped", "following", "following-decoded"} {
		b.ReportMetric(requests/wall[c].Seconds(), "req/s-"+name)
		b.ReportMetric(float64(cpu[c].Microseconds())/requests, "cpu-us/req-"+name)
		if c != none {
			b.ReportMetric(wall[none].Seconds()/wall[c].Seconds(), "x-"+name)
		}
	}
}

// followReader reads a follow stream to its end, calling ready once the
// proxy has registered the watcher, and returns the requests it saw
// finish.
type followReader func(body io.Reader, ready func()) int

// gwdiagReader reads a follow stream as `gwdiag trace --follow --raw`
// does (admin.ReadStream, HeaderOnly, BorrowRaw, each event written as a JSON line
// through a 64 KiB buffer, flushed when the stream idles), into io.Discard.
// It counts the requestFinished events it passed on.
func gwdiagReader(body io.Reader, ready func()) int {
	out := bufio.NewWriterSize(io.Discard, 64<<10)
	finished := 0
	admin.ReadStream(body, admin.Handler{
		Ready:      ready,
		Follow:     true,
		HeaderOnly: true,
		BorrowRaw:  true,
		Idle:       func() { out.Flush() },
		Event: func(ev admin.Event) {
			out.Write(ev.Raw)
			out.Write([]byte("\n"))
			if ev.Header.Type == trace.RequestFinished {
				finished++
			}
		},
	})
	out.Flush()
	return finished
}

// decodingReader reads a follow stream decoding every event whole
// (sse.ReadTrace) and counts the requests it holds (trace.ByRequest).
func decodingReader(body io.Reader, ready func()) int {
	r := sse.NewReader(body)
	if _, err := r.Next(); err != nil { // ": ready"
		return 0
	}
	ready()
	tr, _ := sse.ReadTrace(r)
	ids, _ := trace.ByRequest(tr.Events)
	return len(ids)
}

// TestFollowOutcomeFilter: an outcome filter keeps only the traces whose
// response it accepts (here 4xx and 5xx); the others are dropped by the
// proxy and do not count towards max.
func TestFollowOutcomeFilter(t *testing.T) {
	e := start(t, echoRoute)
	r, done := openFollow(t, e, "follow=true&max=2&outcome="+url.QueryEscape("response.code >= 400"))
	defer done()
	for _, code := range []int{200, 503, 200, 201, 404, 200} {
		e.do(t, http.MethodGet, fmt.Sprintf("/status/%d", code), "")
	}
	tr, err := sse.ReadTrace(r)
	if err != nil {
		t.Fatal(err)
	}
	ids, traces := trace.ByRequest(tr.Events)
	var codes []int
	for _, id := range ids {
		evs := traces[id]
		if len(evs) != 12 {
			t.Errorf("request %s: %d events %v", id, len(evs), types(evs))
			continue
		}
		st, _ := evs[10].Message["requestState"].(map[string]any)
		resp, _ := st["response"].(map[string]any)
		c, _ := resp["code"].(float64)
		codes = append(codes, int(c))
	}
	if fmt.Sprint(codes) != "[503 404]" {
		t.Errorf("traced responses %v, want [503 404]", codes)
	}
	resp, err := http.Get("http://" + e.proxy.AdminAddr() + "/debug/trace?follow=true&outcome=" + url.QueryEscape("response.code +"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad outcome expression: %d, want 400", resp.StatusCode)
	}
}

// TestFollowStalledReaderNeverSlowsTraffic: a follow stream whose client
// reads nothing while 400 requests pass never holds them up (each would
// time out otherwise), and loses nothing silently: every trace's
// requestFinished arrives, and the events received plus the drops the
// stream announced are all the events the requests made.
func TestFollowStalledReaderNeverSlowsTraffic(t *testing.T) {
	e := start(t, echoRoute)
	const n = 400
	r, done := openFollow(t, e, fmt.Sprintf("follow=true&max=%d", n))
	defer done()
	for range n {
		if rep := e.do(t, http.MethodGet, "/get", ""); rep.status != http.StatusOK {
			t.Fatalf("status %d with a stalled follow stream", rep.status)
		}
	}
	tr, err := sse.ReadTrace(r) // now read it all, to its end after n traces
	if err != nil {
		t.Fatal(err)
	}
	finished, dropped := 0, 0
	for _, ev := range tr.Events {
		if ev.Type() == trace.RequestFinished {
			finished++
		}
	}
	for _, c := range tr.Comments {
		if v, ok := strings.CutPrefix(c, "dropped "); ok {
			k, err := strconv.Atoi(strings.TrimSuffix(v, " events"))
			if err != nil {
				t.Fatalf("comment %q", c)
			}
			dropped += k
		}
	}
	if finished != n || len(tr.Events)+dropped != 12*n {
		t.Errorf("%d requestFinished (want %d); %d events received + %d announced dropped, want %d in all", finished, n, len(tr.Events), dropped, 12*n)
	}
	t.Logf("%d events received, %d dropped and announced", len(tr.Events), dropped)
}
