package jsonscan

import (
	"math/rand/v2"
	"testing"
)

// TestRunsMatchByteByByte: Plain, HTMLSafe and Printable stop where a byte-by-byte
// walk by their tables stops, for every byte that needs a look (a quote,
// a backslash, <, > and &, a control byte, one past ASCII) at every
// offset of a word, from every start, for strings with none, and for
// random strings. And the tables are what they say.
func TestRunsMatchByteByByte(t *testing.T) {
	for c := range 256 {
		b := byte(c)
		wantPlain := b >= 0x20 && b < 0x80 && b != '"' && b != '\\'
		wantSafe := wantPlain && b != '<' && b != '>' && b != '&'
		wantPrintable := b >= 0x20 && b < 0x7f
		if plain[b] != wantPlain || htmlSafe[b] != wantSafe || printable[b] != wantPrintable {
			t.Fatalf("byte %#x: plain %v htmlSafe %v printable %v, want %v %v %v", b, plain[b], htmlSafe[b], printable[b], wantPlain, wantSafe, wantPrintable)
		}
	}
	scanners := []struct {
		name string
		run  func(string, int) int
		ok   *[256]bool
	}{{"Plain", Plain, &plain}, {"HTMLSafe", HTMLSafe, &htmlSafe}, {"Printable", Printable, &printable}}
	specials := []byte{'"', '\\', '<', '>', '&', 0, 0x1f, 0x7e, 0x7f, 0x80, 0x9b, 0xc2, 0xe2, 0xff, '\n', '\t', '\r', 0x1b, ' ' - 1}
	base := "abcdefghijklmnopqrstuvwxyz0123456789 !#$%'()*+,-./:;=?@[]^_`{|}~"
	for _, sc := range scanners {
		slow := func(s string, i int) int {
			for i < len(s) && sc.ok[s[i]] {
				i++
			}
			return i
		}
		check := func(s string, start int) {
			t.Helper()
			if got, want := sc.run(s, start), slow(s, start); got != want {
				t.Fatalf("%s(%q, %d) = %d, want %d", sc.name, s, start, got, want)
			}
		}
		for n := range 40 {
			s := base[:n%len(base)]
			for at := -1; at < n; at++ {
				for _, c := range specials {
					b := []byte(s)
					if at >= 0 {
						b[at] = c
					}
					for start := 0; start <= len(b); start++ {
						check(string(b), start)
					}
				}
			}
		}
		r := rand.New(rand.NewPCG(7, 11))
		for range 20000 {
			b := make([]byte, r.IntN(64))
			for i := range b {
				b[i] = byte(r.IntN(256))
				if r.IntN(4) > 0 {
					b[i] = base[r.IntN(len(base))]
				}
			}
			check(string(b), r.IntN(len(b)+1))
		}
	}
}
