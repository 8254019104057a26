package tracecmd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

func followEvent(t *testing.T, id, typ string, status int) admin.Event {
	t.Helper()
	msg := fmt.Sprintf(`{"type":%q`, typ)
	if status != 0 {
		msg += fmt.Sprintf(`,"status":%d`, status)
	}
	raw := fmt.Sprintf(`{"eventStart":null,"eventEnd":1,"severity":"info","requestId":%q,"message":%s}}`, id, msg)
	ev, err := trace.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return admin.Event{Raw: []byte(raw), Event: ev, Header: trace.HeaderOf(ev)}
}

// TestFollowCheckBounds: what the follow check holds of a hostile proxy's
// stream stays bounded, however long the stream (issue 30), and says so.
func TestFollowCheckBounds(t *testing.T) {
	filter, err := outcomeExpr("5xx", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	s := session{outcome: filter, filterDesc: "--status 5xx"}

	t.Run("requests that never finish", func(t *testing.T) {
		stops, emitted := 0, 0
		c := newFollowCheck(s, func(admin.Event) { emitted++ }, func() { stops++ })
		for i := range sse.MaxOpenTraces + 100 {
			c.event(followEvent(t, fmt.Sprint("r", i), "requestStarted", 0))
		}
		if len(c.held) > sse.MaxOpenTraces || stops != 1 || emitted != 0 {
			t.Fatalf("held %d requests, stopped %d times, emitted %d; want at most %d held, one stop, nothing emitted",
				len(c.held), stops, emitted, sse.MaxOpenTraces)
		}
		err := c.finish()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d requests were under way at once", sse.MaxOpenTraces)) {
			t.Fatalf("finish: got %v, want the requests-under-way bound named", err)
		}
	})

	t.Run("a filter ignored many times", func(t *testing.T) {
		c := newFollowCheck(s, nil, func() {})
		const n = 1000
		for i := range n {
			id := fmt.Sprint("r", i)
			c.event(followEvent(t, id, "requestStarted", 0))
			c.event(followEvent(t, id, "requestFinished", 200))
		}
		err := c.finish()
		if err == nil {
			t.Fatal("finish: got nil, want the ignored filter named")
		}
		msg := err.Error()
		if !strings.Contains(msg, fmt.Sprintf("%d traces failing it not shown", n)) || strings.Count(msg, "status 200") != maxExamples || !strings.Contains(msg, ", ...)") {
			t.Fatalf("finish: got %q, want the count of %d and only %d examples, then ...", msg, n, maxExamples)
		}
	})
}
