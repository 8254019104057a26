package sse

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReaderFrames(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Frame
	}{
		{"comment then data", ": ready\n\ndata: {\"a\":1}\n\n", []Frame{{Comment: "ready", IsComment: true, Line: 1}, {Data: `{"a":1}`, Line: 3}}},
		{"crlf and event lines", "event: x\r\nid: 1\r\ndata: 1\r\n\r\n", []Frame{{Data: "1", Line: 3}}},
		{"multi-line data", "data: a\ndata: b\n\n", []Frame{{Data: "a\nb", Line: 1}}},
		{"unterminated last frame", "data: z", []Frame{{Data: "z", Line: 1}}},
		{"keepalive", ": keepalive\n\n: dropped 2 events\n\n", []Frame{{Comment: "keepalive", IsComment: true, Line: 1}, {Comment: "dropped 2 events", IsComment: true, Line: 3}}},
		{"a line outside SSE framing is skipped on a live stream", "{\"a\":1}\ndata: 2\n\n", []Frame{{Data: "2", Line: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in))
			var got []Frame
			for {
				f, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, f)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d frames %+v, want %+v", len(got), got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("frame %d: got %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestOpenFallsBackToGET(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"eventStart\":null,\"eventEnd\":1,\"severity\":\"info\",\"message\":{\"type\":\"requestStarted\"}}\n\n")
		io.WriteString(w, "data: {\"eventStart\":null,\"eventEnd\":2,\"severity\":\"info\",\"message\":{\"type\":\"requestFinished\"}}\n\n")
	}))
	defer srv.Close()
	s, err := Open(context.Background(), srv.Client(), strings.TrimPrefix(srv.URL, "http://"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Method != http.MethodGet {
		t.Errorf("method: got %s, want GET", s.Method)
	}
	tr, err := ReadTrace(s.frames)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Events) != 2 || !tr.EndedAfterFinished {
		t.Errorf("got %d events, ended after finished %v; want 2, true", len(tr.Events), tr.EndedAfterFinished)
	}
}

func TestOpenReportsRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "invalid expression: syntax error", http.StatusBadRequest)
	}))
	defer srv.Close()
	_, err := Open(context.Background(), srv.Client(), strings.TrimPrefix(srv.URL, "http://"), "request.path ==")
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 400 || !strings.Contains(se.Body, "invalid expression") {
		t.Fatalf("got %v, want a 400 StatusError with the body", err)
	}
}

// TestEachData: data frames in order, comments skipped, nil at the end, and
// the read error when the stream breaks.
func TestEachData(t *testing.T) {
	var got []string
	err := EachData(strings.NewReader(": ready\n\ndata: {\"a\":1}\n\ndata: [DONE]\n\n"), Limits{}, func(d string) { got = append(got, d) })
	if err != nil || strings.Join(got, "|") != `{"a":1}|[DONE]` {
		t.Errorf("got %q, %v; want the two data frames and nil", got, err)
	}
	boom := errors.New("boom")
	got = nil
	err = EachData(io.MultiReader(strings.NewReader("data: 1\n\n"), iotest.ErrReader(boom)), Limits{}, func(d string) { got = append(got, d) })
	if !errors.Is(err, boom) || len(got) != 1 {
		t.Errorf("broken stream: got %q, %v; want one frame, then boom", got, err)
	}
}
