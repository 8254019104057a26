//go:build race

package steps

// raceEnabled: this test binary is built with the race detector.
const raceEnabled = true
