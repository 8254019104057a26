package stepdefs

import (
	"strings"
	"testing"
	"time"
)

func TestWindowEndWithin(t *testing.T) {
	// 10:59:58 UTC: the hour's window ends in 2 s, the day's in 13 h 2 s.
	at := time.Date(2026, 11, 30, 10, 59, 58, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		got, u    int64
		sent, arr time.Time
		wantErr   string
	}{
		{"the hour's end", 2, 3600, at, at, ""},
		{"a second late, rounded", 3, 3600, at, at, ""},
		{"the day's end", 13*3600 + 2, 86400, at, at, ""},
		{"the hour's for the day's", 2, 86400, at, at, "got 2, want the seconds until the service's day window ends, 46802"},
		{"a whole window", 3600, 3600, at, at, "got 3600"},
		// The hour ended between sending and arrival: the service may
		// have answered in either window.
		{"across the hour, before", 2, 3600, at, at.Add(3 * time.Second), ""},
		{"across the hour, after", 3599, 3600, at, at.Add(3 * time.Second), ""},
	} {
		err := windowEndWithin(tt.got, tt.u, tt.sent, tt.arr, "Retry-After", map[int64]string{3600: "hour", 86400: "day"}[tt.u])
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}
