package procout

import (
	"strings"
	"sync"
	"testing"
)

func TestBuffer(t *testing.T) {
	var tee strings.Builder
	b := &Buffer{Tee: &tee, Max: 64}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { b.Write([]byte(strings.Repeat("x", i) + "\n")) })
	}
	wg.Wait()
	if got := strings.Count(tee.String(), "\n"); got != 8 {
		t.Errorf("tee got %d lines, want 8", got)
	}
	if len(b.String()) > 64 {
		t.Errorf("kept %d bytes, want at most 64", len(b.String()))
	}
	var c Buffer
	c.Write([]byte("a\nb\nc\n"))
	if got := c.Tail(2); got != "b\nc" {
		t.Errorf("Tail(2) = %q", got)
	}
}
