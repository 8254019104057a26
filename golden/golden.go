// Package golden keeps canonical JSONL traces, normalises their volatile fields
// (times, ports, addresses, dates, pod names) in one place, and shows a
// readable event-by-event, field-level diff between two traces.
//
// SKELETON: replaced by the conformance suite work (issue 4).
package golden

import (
	"errors"

	"github.com/gwdiag/gwdiag/refproxy/trace"
)

// Normalize returns a copy of events with volatile values replaced by stable
// placeholders, keeping event order and relative timing.
func Normalize(events []trace.Event) []trace.Event { return events }

// Diff returns a readable event-by-event, field-level diff of two normalised
// traces; "" when they are equal.
func Diff(want, got []trace.Event) string { return "" }

// ReadJSONL reads a JSON Lines trace.
func ReadJSONL(path string) ([]trace.Event, error) { return nil, errors.New("golden: not implemented") }
