package configcmd

import (
	"io"
	"os"
	"testing"

	"github.com/gwdiag/gwdiag/golden/configdump"
)

// BenchmarkBackendsTable measures parsing a dump and writing the backends table.
func BenchmarkBackendsTable(b *testing.B) {
	raw, err := os.ReadFile("testdata/dump.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		d, err := configdump.Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		if err := writeBackends(io.Discard, backendRows(d, true), "short"); err != nil {
			b.Fatal(err)
		}
	}
}
