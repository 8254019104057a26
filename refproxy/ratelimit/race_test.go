//go:build race

package ratelimit

// raceEnabled: the race detector's instrumentation allocates, so
// allocation counts are only exact without it.
const raceEnabled = true
