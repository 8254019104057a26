package ratelimit

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// headerKey is a KeyFunc reading act["key"], absent when it is missing or
// not a string (as a failed CEL expression).
func headerKey(act any) (string, bool) {
	m, _ := act.(map[string]any)
	k, ok := m["key"].(string)
	return k, ok
}

func keyAct(k string) map[string]any { return map[string]any{"key": k} }

func TestKeyedBucketPerKey(t *testing.T) {
	k := NewKeyed(Spec{MaxTokens: 2, TokensPerFill: 2, FillInterval: time.Minute}, headerKey, 0)
	s := NewKeyedSet(nil, []*Keyed{k})
	admit := func(act map[string]any) Decision {
		h := s.Hold(act)
		return h.Admit(at(0))
	}
	// alice spends her two; bob still has his own two.
	for i, want := range []bool{true, true, false} {
		if d := admit(keyAct("alice")); d.Allowed != want {
			t.Fatalf("alice request %d: allowed=%v, want %v", i+1, d.Allowed, want)
		}
	}
	if d := admit(keyAct("bob")); !d.Allowed || d.Remaining != 1 || d.Limit != 2 {
		t.Fatalf("bob's first request = %+v, want allowed with 1 of 2 remaining", d)
	}
	// Requests without a key (missing, failed, empty) share one bucket.
	for i, act := range []map[string]any{nil, {}, {"key": 42}, keyAct("")} {
		d := admit(act)
		if want := i < 2; d.Allowed != want {
			t.Errorf("keyless request %d: allowed=%v, want %v (one shared bucket of 2)", i+1, d.Allowed, want)
		}
	}
	if got := k.Len(); got != 2 {
		t.Errorf("Len() = %d, want 2 live keys (the shared bucket not counted)", got)
	}
}

func TestKeyedEvictsLeastRecentlyUsed(t *testing.T) {
	k := NewKeyed(Spec{MaxTokens: 1, TokensPerFill: 1, FillInterval: time.Hour}, headerKey, 2)
	s := NewKeyedSet(nil, []*Keyed{k})
	use := func(key string) bool {
		h := s.Hold(keyAct(key))
		return h.Admit(at(0)).Allowed
	}
	use("a")
	use("b")
	use("a") // a is now the most recent; b the least
	use("c") // evicts b
	if k.Len() != 2 || k.Evictions() != 1 {
		t.Fatalf("Len()=%d Evictions()=%d, want 2 and 1", k.Len(), k.Evictions())
	}
	if use("a") {
		t.Error("a was kept (spent), want refused")
	}
	if !use("b") {
		t.Error("b was evicted and starts again full, want allowed")
	}
	// b's return evicted c, the least recently used.
	if !use("c") {
		t.Error("c was evicted and starts again full, want allowed")
	}
}

func TestKeyedLongKeysAreDigests(t *testing.T) {
	k := NewKeyed(Spec{MaxTokens: 1, TokensPerFill: 1, FillInterval: time.Hour}, headerKey, 0)
	long := strings.Repeat("x", 10_000)
	b := k.Bucket(long)
	if got := b.Key(); !strings.HasPrefix(got, digestPrefix) || len(got) != len(digestPrefix)+64 {
		t.Fatalf("Key() of a 10000-byte key = %q, want sha256:<64 hex digits>", got)
	}
	if k.Bucket(long) != b {
		t.Error("the same long key gave another bucket")
	}
	if k.Bucket(long+"y") == b {
		t.Error("two long keys share a bucket")
	}
	// A short key that spells a digest is another key.
	if k.Bucket(b.Key()) == b {
		t.Error("a short key equal to a digest's text shares its bucket")
	}
	if short := strings.Repeat("x", maxKeyLen); k.Bucket(short).Key() != short {
		t.Errorf("a key of MaxKeyLen bytes is kept as it is")
	}
}

// TestDenyingHeaders: a 429's headers are those of the entry that denied
// (remaining 0, its reset), not of one that passed with fewer remaining
// or an earlier reset.
func TestDenyingHeaders(t *testing.T) {
	// passing: 1 request left, refills in 1s; denying: empty tokens
	// bucket, refills in a minute.
	passing := NewBucket(Spec{MaxTokens: 1, TokensPerFill: 1, FillInterval: time.Second})
	denying := NewBucket(Spec{MaxTokens: 100, TokensPerFill: 100, FillInterval: time.Minute, Type: Tokens})
	s := newSet(passing, denying)
	s.Charge(at(0), 100)
	d := s.Admit(at(0))
	if want := (Decision{Allowed: false, Limit: 100, Remaining: 0, Reset: time.Minute, Limited: true,
		Requests: Window{Set: true, Limit: 1, Period: time.Second, Remaining: 1, Reset: time.Second},
		Tokens:   Window{Set: true, Limit: 100, Period: time.Minute, Remaining: 0, Reset: time.Minute, Full: time.Minute, Refused: true}}); d != want {
		t.Errorf("Admit = %+v, want the denying entry's %+v", d, want)
	}
	// A local limit that passed with nothing left against a global one
	// that denied: the global one's headers.
	local := Decision{Allowed: true, Limit: 5, Remaining: 0, Reset: time.Second, Limited: true}
	global := Decision{Allowed: false, Limit: 2, Remaining: 0, Reset: 30 * time.Second, Limited: true}
	if got := Tighter(local, global); got != global {
		t.Errorf("Tighter(passed, denied) = %+v, want the denied %+v", got, global)
	}
	if got := Tighter(global, local); got != global {
		t.Errorf("Tighter(denied, passed) = %+v, want the denied %+v", got, global)
	}
	var got []string
	global.RetryAfter(func(k string, v []byte) { got = append(got, k+": "+string(v)) })
	if want := "Retry-After: 30"; len(got) != 1 || got[0] != want {
		t.Errorf("RetryAfter = %v, want [%s]", got, want)
	}
}

// TestHeldNowShowsCharge: a response whose charge is known before its
// headers go out shows it (three 39-token completions on 1000: 961, 922,
// 883).
func TestHeldNowShowsCharge(t *testing.T) {
	s := newSet(NewBucket(Spec{MaxTokens: 1000, TokensPerFill: 1000, FillInterval: time.Minute, Type: Tokens}))
	for i, want := range []uint64{961, 922, 883} {
		h := s.Hold(nil)
		if d := h.Admit(at(0)); !d.Allowed {
			t.Fatalf("request %d refused", i+1)
		}
		h.Charge(at(0), 39)
		if d := h.Now(at(0)); d.Remaining != want || !d.Allowed || !d.Limited {
			t.Errorf("request %d: Now() = %+v, want remaining %d", i+1, d, want)
		}
	}
}

func TestKeyedConcurrent(t *testing.T) {
	k := NewKeyed(Spec{MaxTokens: 10, TokensPerFill: 10, FillInterval: time.Hour}, headerKey, 8)
	plain := NewBucket(Spec{MaxTokens: 1 << 40, TokensPerFill: 1, FillInterval: time.Hour})
	s := NewKeyedSet([]*Bucket{plain}, []*Keyed{k})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				h := s.Hold(keyAct(fmt.Sprint((g + i) % 16)))
				h.Admit(at(0))
			}
		})
	}
	wg.Wait()
	if n := k.Len(); n > 8 {
		t.Errorf("Len() = %d live keys, want at most the bound 8", n)
	}
}

// BenchmarkKeyedAdmit is the limiter's cost per request of a keyed entry
// with 1, 1000 and 100000 live keys: the key's lookup, the LRU move and
// the bucket's decision (the key expression's evaluation not included).
// "new key" is a request whose key is not live (a bucket created, the
// least recently used evicted).
func BenchmarkKeyedAdmit(b *testing.B) {
	spec := Spec{MaxTokens: 1 << 62, TokensPerFill: 1 << 62, FillInterval: time.Second}
	for _, n := range []int{1, 1000, 100_000} {
		k := NewKeyed(spec, headerKey, n)
		s := NewKeyedSet(nil, []*Keyed{k})
		acts := make([]map[string]any, n)
		for i := range acts {
			acts[i] = keyAct(fmt.Sprintf("client-%d", i))
			h := s.Hold(acts[i])
			h.Admit(time.Now())
		}
		now := time.Now()
		b.Run(fmt.Sprintf("live keys=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				h := s.Hold(acts[i])
				if !h.Admit(now).Allowed {
					b.Fatal("refused")
				}
				i++
				if i == n {
					i = 0
				}
			}
		})
	}
	b.Run("new key", func(b *testing.B) {
		k := NewKeyed(spec, headerKey, 1000)
		s := NewKeyedSet(nil, []*Keyed{k})
		keys := make([]map[string]any, 4096)
		for i := range keys {
			keys[i] = keyAct(fmt.Sprintf("client-%d", i))
		}
		now := time.Now()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			h := s.Hold(keys[i%len(keys)])
			h.Admit(now)
			i++
		}
	})
	b.Run("long key digest", func(b *testing.B) {
		k := NewKeyed(spec, headerKey, 0)
		s := NewKeyedSet(nil, []*Keyed{k})
		act := keyAct(strings.Repeat("k", 1024))
		now := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			h := s.Hold(act)
			h.Admit(now)
		}
	})
}

// BenchmarkKeyedMemory reports the heap a live key costs (bytes/key),
// keys of 16 bytes ("client-000012345"), 100000 keys.
func BenchmarkKeyedMemory(b *testing.B) {
	const n = 100_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("client-%09d", i)
	}
	spec := Spec{MaxTokens: 10, TokensPerFill: 10, FillInterval: time.Second}
	var perKey float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		k := NewKeyed(spec, headerKey, n)
		for _, key := range keys {
			k.Bucket(key)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perKey = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(k)
	}
	b.ReportMetric(perKey, "bytes/key")
}
