package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

const (
	evStart    = `{"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestStarted"}}`
	evRoute    = `{"eventStart":null,"eventEnd":2,"severity":"info","message":{"type":"routeSelection","selectedRoute":"a/b","evaluatedRoutes":["a/b"]}}`
	evFinished = `{"eventStart":null,"eventEnd":3,"severity":"info","message":{"type":"requestFinished"}}`
)

// readStreamTest is a stream and what ReadStream must make of it.
type readStreamTest struct {
	name       string
	stream     string
	wantEvents []string
	wantReady  bool
	wantDrop   int
	wantErr    error // nil, or an error the result must wrap
	errText    string
}

func TestReadStream(t *testing.T) {
	tests := []readStreamTest{
		{
			name:       "complete with ready and keepalives",
			stream:     ": ready\n\ndata: " + evStart + "\n\n: keepalive\n\ndata: " + evRoute + "\n\ndata: " + evFinished + "\n\n",
			wantEvents: []string{evStart, evRoute, evFinished},
			wantReady:  true,
		},
		{
			name:       "older proxy without ready comment, CRLF lines",
			stream:     "data: " + evStart + "\r\n\r\ndata: " + evFinished + "\r\n\r\n",
			wantEvents: []string{evStart, evFinished},
			wantReady:  true,
		},
		{
			name:       "data split over two lines is joined",
			stream:     ": ready\n\ndata: {\"eventStart\":null,\"eventEnd\":3,\ndata: \"severity\":\"info\",\"message\":{\"type\":\"requestFinished\"}}\n\n",
			wantEvents: []string{evFinished},
			wantReady:  true,
		},
		{
			name:       "dropped events announced",
			stream:     ": ready\n\n: dropped 4 events\n\ndata: " + evFinished + "\n\n",
			wantEvents: []string{evFinished},
			wantReady:  true,
			wantDrop:   4,
		},
		{
			name:       "event and id lines ignored",
			stream:     "event: trace\nid: 1\ndata: " + evFinished + "\n\n",
			wantEvents: []string{evFinished},
			wantReady:  true,
		},
		{
			name:       "stream ends before requestFinished",
			stream:     ": ready\n\ndata: " + evStart + "\n\n",
			wantEvents: []string{evStart},
			wantReady:  true,
			wantErr:    ErrIncomplete,
			errText:    "after 1 events",
		},
		{
			name:      "empty stream",
			stream:    "",
			wantErr:   ErrIncomplete,
			errText:   "after 0 events",
			wantReady: false,
		},
		{
			name:       "last frame without blank line still counts",
			stream:     "data: " + evFinished,
			wantEvents: []string{evFinished},
			wantReady:  true,
		},
		{
			name:      "not JSON",
			stream:    "data: {nope\n\n",
			errText:   "trace event 1 is not JSON",
			wantReady: true,
		},
		{
			name:      "JSON that is no trace event",
			stream:    "data: {\"eventEnd\":\"3\",\"message\":{\"type\":\"requestFinished\"}}\n\n",
			errText:   "trace event 1: json: cannot unmarshal string into Go struct field Event.eventEnd of type int64",
			wantErr:   nil,
			wantReady: true,
		},
		{
			name:       "stops at requestFinished even if the stream stays open",
			stream:     "data: " + evFinished + "\n\ndata: not json at all\n\n",
			wantEvents: []string{evFinished},
			wantReady:  true,
		},
	}
	for _, tt := range tests {
		for _, headerOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/headerOnly=%v", tt.name, headerOnly), func(t *testing.T) {
				readStreamCase(t, tt, headerOnly)
			})
		}
	}
}

// readStreamCase reads stream as a full or a HeaderOnly handler does: the
// same events, errors and calls either way, each event's Header what its
// decoded form gives.
func readStreamCase(t *testing.T, tt readStreamTest, headerOnly bool) {
	t.Helper()
	var got []string
	ready, dropped := 0, 0
	err := ReadStream(strings.NewReader(tt.stream), Handler{
		Ready: func() { ready++ },
		Event: func(e Event) {
			got = append(got, string(e.Raw))
			ev, err := trace.Parse(e.Raw)
			if err != nil {
				t.Fatalf("event %s: %v", e.Raw, err)
			}
			if h := trace.HeaderOf(ev); e.Header != h {
				t.Errorf("event %s: header %+v, want %+v", e.Raw, e.Header, h)
			}
			if headerOnly != (e.Event.Message == nil) {
				t.Errorf("event %s: decoded %v with HeaderOnly %v", e.Raw, e.Event.Message != nil, headerOnly)
			}
		},
		Dropped:    func(n int) { dropped += n },
		HeaderOnly: headerOnly,
	})
	if tt.errText == "" && err != nil {
		t.Fatalf("ReadStream error: %v", err)
	}
	if tt.errText != "" && (err == nil || !strings.Contains(err.Error(), tt.errText)) {
		t.Fatalf("ReadStream error = %v, want one containing %q", err, tt.errText)
	}
	if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
		t.Fatalf("ReadStream error = %v, want it to wrap %v", err, tt.wantErr)
	}
	if fmt.Sprint(got) != fmt.Sprint(tt.wantEvents) {
		t.Errorf("events:\ngot  %q\nwant %q", got, tt.wantEvents)
	}
	if (ready == 1) != tt.wantReady || ready > 1 {
		t.Errorf("Ready called %d times, want ready=%v (once)", ready, tt.wantReady)
	}
	if dropped != tt.wantDrop {
		t.Errorf("dropped = %d, want %d", dropped, tt.wantDrop)
	}
}

func TestOpenTrace(t *testing.T) {
	var gotMethod, gotExpr string
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/trace", func(w http.ResponseWriter, r *http.Request) {
		gotMethod, gotExpr = r.Method, r.URL.Query().Get("expression")
		if gotExpr == "bad(" {
			http.Error(w, "invalid expression: syntax error", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": ready\n\ndata: "+evFinished+"\n\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}

	t.Run("POST with expression", func(t *testing.T) {
		body, err := c.OpenTrace(context.Background(), `request.path == "/x"`)
		if err != nil {
			t.Fatal(err)
		}
		defer body.Close()
		if gotMethod != http.MethodPost || gotExpr != `request.path == "/x"` {
			t.Errorf("got %s expression=%q, want POST expression=%q", gotMethod, gotExpr, `request.path == "/x"`)
		}
		if err := ReadStream(body, Handler{}); err != nil {
			t.Errorf("ReadStream: %v", err)
		}
	})
	t.Run("error answer is reported with its body", func(t *testing.T) {
		_, err := c.OpenTrace(context.Background(), "bad(")
		want := "admin server answered 400 Bad Request for " + srv.URL + "/debug/trace?expression=bad%28: invalid expression: syntax error"
		if err == nil || err.Error() != want {
			t.Errorf("error:\ngot  %v\nwant %s", err, want)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		_, err := (&Client{BaseURL: dead.URL}).OpenTrace(context.Background(), "")
		if err == nil || !strings.Contains(err.Error(), "cannot reach the admin server at "+dead.URL) {
			t.Errorf("error = %v, want 'cannot reach the admin server at %s'", err, dead.URL)
		}
	})
}

func TestOpenTraceFallsBackToGET(t *testing.T) {
	var methods []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods = append(methods, r.Method)
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		fmt.Fprint(w, "data: "+evFinished+"\n\n")
	}))
	defer srv.Close()
	body, err := (&Client{BaseURL: srv.URL}).OpenTrace(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	body.Close()
	if fmt.Sprint(methods) != "[POST GET]" {
		t.Errorf("methods = %v, want [POST GET]", methods)
	}
}

// TestReadFollowStreamHeaderOnly: a recorded follow stream of the
// reference proxy read HeaderOnly gives every event, as received, with the
// Header its full decoding gives.
func TestReadFollowStreamHeaderOnly(t *testing.T) {
	stream, _, _, err := ssetest.FollowStream(2)
	if err != nil {
		t.Fatal(err)
	}
	read := func(headerOnly bool) []Event {
		var evs []Event
		if err := ReadStream(bytes.NewReader(stream), Handler{Follow: true, HeaderOnly: headerOnly, Event: func(e Event) { evs = append(evs, e) }}); err != nil {
			t.Fatal(err)
		}
		return evs
	}
	full, headers := read(false), read(true)
	if len(full) != len(headers) || len(full) == 0 {
		t.Fatalf("%d events read whole, %d HeaderOnly", len(full), len(headers))
	}
	for i := range full {
		if !bytes.Equal(full[i].Raw, headers[i].Raw) || full[i].Header != headers[i].Header {
			t.Fatalf("event %d: HeaderOnly %s %+v, whole %s %+v", i+1, headers[i].Raw, headers[i].Header, full[i].Raw, full[i].Header)
		}
	}
}
