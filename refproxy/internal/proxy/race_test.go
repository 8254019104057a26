//go:build race

package proxy

// raceEnabled: the race detector's instrumentation allocates, so
// allocation counts are only exact without it.
const raceEnabled = true
