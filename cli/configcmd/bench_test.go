package configcmd

import (
	"io"
	"os"
	"testing"
)

// BenchmarkBackendsTable measures parsing a dump and writing the backends table.
func BenchmarkBackendsTable(b *testing.B) {
	raw, err := os.ReadFile("testdata/dump.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		d, err := ParseDump(raw)
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteBackends(io.Discard, d.Backends, true); err != nil {
			b.Fatal(err)
		}
	}
}
