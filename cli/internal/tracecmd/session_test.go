package tracecmd

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/cli/inject"
)

// fakeSender stands in for curl: it tells the fake proxy a request arrived.
type fakeSender struct {
	sent  chan struct{}
	calls atomic.Int32
	err   error
}

func (f *fakeSender) Send(context.Context, inject.Request, string) (string, error) {
	f.calls.Add(1)
	if f.err != nil {
		return "", f.err
	}
	close(f.sent)
	return "", nil
}

// olderProxy is an admin server like agentgateway 1.2: no `: ready` comment,
// the headers are the only sign the watcher is registered. It streams a
// trace once the request is sent.
func olderProxy(t *testing.T, sent <-chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-sent:
		case <-r.Context().Done():
			return
		}
		for _, typ := range []string{"requestStarted", "requestFinished"} {
			fmt.Fprintf(w, "data: {\"eventStart\":null,\"eventEnd\":1,\"severity\":\"info\",\"message\":{\"type\":%q}}\n\n", typ)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestInjectWithoutReadyComment(t *testing.T) {
	sender := &fakeSender{sent: make(chan struct{})}
	u, _ := url.Parse("http://h.example/")
	s := session{
		client:   &admin.Client{BaseURL: olderProxy(t, sender.sent)},
		request:  &inject.Request{URL: u},
		listener: "127.0.0.1:1",
		sender:   sender,
	}
	var types []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.stream(ctx, nil, func(ev admin.Event) { types = append(types, string(ev.Event.Type())) }, nil)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if sender.calls.Load() != 1 || strings.Join(types, ",") != "requestStarted,requestFinished" {
		t.Errorf("sent %d times, events %v; want 1 send and the whole trace", sender.calls.Load(), types)
	}
}

func TestInjectSendFailureEndsTrace(t *testing.T) {
	sender := &fakeSender{sent: make(chan struct{}), err: fmt.Errorf("sending the request with curl failed: curl: (7) refused")}
	u, _ := url.Parse("http://h.example/")
	s := session{
		client:   &admin.Client{BaseURL: olderProxy(t, sender.sent)},
		request:  &inject.Request{URL: u},
		listener: "127.0.0.1:1",
		sender:   sender,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.stream(ctx, nil, nil, nil)
	if err == nil || err.Error() != "sending the request with curl failed: curl: (7) refused" {
		t.Fatalf("stream error = %v, want the send failure", err)
	}
}
