package features

import (
	"testing"
	"testing/fstest"
)

// TestDigest: the digest is of the names and contents of the feature
// files, so renaming a file or changing a scenario changes it.
func TestDigest(t *testing.T) {
	base := fstest.MapFS{"a.feature": {Data: []byte("Feature: a")}, "b.feature": {Data: []byte("Feature: b")}}
	tests := []struct {
		name string
		fsys fstest.MapFS
		same bool
	}{
		{"same files", fstest.MapFS{"b.feature": {Data: []byte("Feature: b")}, "a.feature": {Data: []byte("Feature: a")}}, true},
		{"a file renamed", fstest.MapFS{"a.feature": {Data: []byte("Feature: a")}, "c.feature": {Data: []byte("Feature: b")}}, false},
		{"a scenario changed", fstest.MapFS{"a.feature": {Data: []byte("Feature: A")}, "b.feature": {Data: []byte("Feature: b")}}, false},
		{"bytes moved across files", fstest.MapFS{"a.feature": {Data: []byte("Feature: aF")}, "b.feature": {Data: []byte("eature: b")}}, false},
		{"other files ignored", fstest.MapFS{"a.feature": {Data: []byte("Feature: a")}, "b.feature": {Data: []byte("Feature: b")}, "README.md": {Data: []byte("x")}}, true},
	}
	want := digestOf(base)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := digestOf(tt.fsys); (got == want) != tt.same || len(got) != 12 {
				t.Errorf("digest %q vs %q: same = %v, want %v", got, want, got == want, tt.same)
			}
		})
	}
	if d := Digest(); len(d) != 12 || d != digestOf(FS) {
		t.Errorf("Digest() = %q, want the 12-digit digest of the embedded features", d)
	}
}
