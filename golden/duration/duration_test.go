package duration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDurationString(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{time.Minute, "60s"},
		{time.Second, "1s"},
		{time.Hour, "3600s"},
		{500 * time.Millisecond, "500ms"},
		{1500 * time.Microsecond, "1.5ms"},
		{0, "0s"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Duration(tt.in).String(); got != tt.want {
				t.Errorf("Duration(%v).String() = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestDurationJSON: a duration goes out as the config writes it and comes
// back the same; anything but a duration string is refused, saying what
// was wanted.
func TestDurationJSON(t *testing.T) {
	for _, d := range []time.Duration{time.Minute, 1500 * time.Microsecond, 0} {
		b, err := json.Marshal(Duration(d))
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || time.Duration(back) != d {
			t.Errorf("%s back as %v (%v), want %v", b, time.Duration(back), err, d)
		}
	}
	for in, want := range map[string]string{`5`: `want a string such as "5s", got 5`, `"5 seconds"`: `duration "5 seconds"`} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Unmarshal(%s) = %v, want an error with %q", in, err, want)
		}
	}
}
