package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"unsafe"
)

// defaultMaxKeys is the number of live keys a keyed entry keeps when its
// configuration sets no bound: past it the least recently used key's
// bucket is forgotten (that key starts again from a full bucket).
const defaultMaxKeys = 100_000

// maxKeyLen is the longest key kept as it is; a longer key is kept as the
// hex SHA-256 of its bytes with a "sha256:" prefix, so that a client
// cannot make the limiter hold arbitrarily large keys. A digest key is
// longer than maxKeyLen and so never equals a key kept as it is.
const maxKeyLen = 64

// digestPrefix marks a key kept as its digest.
const digestPrefix = "sha256:"

// KeyFunc is a keyed entry's key of one request (act: what the route's
// expressions see of it, as cel.Program.Eval takes it); ok false when
// the request has none, or its expression failed.
type KeyFunc func(act any) (key string, ok bool)

// Keyed is one limit entry with a key: a bucket of the same Spec per
// key, created full on first use. Requests without a key share one
// bucket. At most max keys are live; using a new key past that evicts the
// least recently used one.
//
// A key's lookup takes Keyed's lock, finds the bucket in a map and moves
// it to the front of the LRU list: a live key allocates nothing.
type Keyed struct {
	spec   Spec
	keyOf  KeyFunc
	max    int
	shared *Bucket // requests without a key

	mu     sync.Mutex
	m      map[string]*Bucket
	lru    Bucket // sentinel of the LRU list: lru.next is the most recent
	evicts uint64
}

// NewKeyed returns a keyed entry of spec; keyOf gives a request's key, and
// maxKeys bounds the live keys (<= 0: 100 000).
func NewKeyed(spec Spec, keyOf KeyFunc, maxKeys int) *Keyed {
	if maxKeys <= 0 {
		maxKeys = defaultMaxKeys
	}
	k := &Keyed{spec: spec, keyOf: keyOf, max: maxKeys, m: make(map[string]*Bucket)}
	k.lru.prev, k.lru.next = &k.lru, &k.lru
	k.shared = NewBucket(spec)
	k.shared.keyed = k
	return k
}

// Spec is the configuration of every bucket of k.
func (k *Keyed) Spec() Spec { return k.spec }

// Shared is the bucket of requests without a key.
func (k *Keyed) Shared() *Bucket { return k.shared }

// Len is the number of live keys (the shared bucket not counted).
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}

// Evictions is how many keys were forgotten to keep within the bound.
func (k *Keyed) Evictions() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.evicts
}

// For is the bucket of one request: its key's, or the shared one.
func (k *Keyed) For(act any) *Bucket {
	if k.keyOf == nil {
		return k.shared
	}
	key, ok := k.keyOf(act)
	if !ok {
		return k.shared
	}
	return k.Bucket(key)
}

// Bucket is the bucket of key, created full on first use; "" is no key
// (the shared bucket).
func (k *Keyed) Bucket(key string) *Bucket {
	if key == "" {
		return k.shared
	}
	var buf [len(digestPrefix) + 2*sha256.Size]byte
	if len(key) > maxKeyLen {
		sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(key), len(key)))
		copy(buf[:], digestPrefix)
		hex.Encode(buf[len(digestPrefix):], sum[:])
		key = unsafe.String(&buf[0], len(buf)) // only looked up; stored as a copy
	}
	k.mu.Lock()
	b, ok := k.m[key]
	if ok {
		if k.lru.next != b {
			b.unlink()
			b.linkAfter(&k.lru)
		}
		k.mu.Unlock()
		return b
	}
	if len(k.m) >= k.max {
		old := k.lru.prev
		old.unlink()
		delete(k.m, old.key)
		k.evicts++
	}
	b = NewBucket(k.spec)
	b.keyed, b.key = k, string([]byte(key)) // a copy: key may be buf
	k.m[b.key] = b
	b.linkAfter(&k.lru)
	k.mu.Unlock()
	return b
}

// Keyed is the keyed entry b belongs to, nil for a plain bucket.
func (b *Bucket) Keyed() *Keyed { return b.keyed }

// Key is b's key ("" for a plain bucket and a keyed entry's shared
// bucket); a key longer than 64 bytes is shown as its digest.
func (b *Bucket) Key() string { return b.key }

func (b *Bucket) unlink() {
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
}

func (b *Bucket) linkAfter(at *Bucket) {
	b.prev, b.next = at, at.next
	at.next.prev = b
	at.next = b
}
