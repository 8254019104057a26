// Package duration is a duration as gwdiag's files write it: the
// reference proxy's configs (`fillInterval: 60s`), the suite's options
// and the bounds on what is read from a proxy (`frameTime: 30s`). It is
// written as a Go duration string and read back from one, in JSON and in
// the config loader's YAML (refproxy/config). It imports nothing of the
// project, so every floor of it can use it.
package duration

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Duration is a Go duration string such as "1s" or "60s".
type Duration time.Duration

// String formats the duration as the config writes it: whole seconds as
// "60s" (not Go's "1m0s"), whole milliseconds as "500ms".
func (d Duration) String() string {
	switch td := time.Duration(d); {
	case td != 0 && td%time.Second == 0:
		return strconv.FormatInt(int64(td/time.Second), 10) + "s"
	case td != 0 && td%time.Millisecond == 0:
		return strconv.FormatInt(int64(td/time.Millisecond), 10) + "ms"
	default:
		return td.String()
	}
}

// UnmarshalJSON reads a Go duration string ("1.5s", "500ms"); option
// files loaded through JSON (the conformance suite's) use it.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"5s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string ("1s"), as the config does.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }
