package authn

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// keyHashFormats names the forms of an API key's keyHash, for errors.
const keyHashFormats = "sha256:<64 hex digits>, or a bcrypt hash ($2a$, $2b$, $2y$)"

// ParseKeyHash checks an API key's keyHash: "sha256:" and the key's
// SHA-256 in hex (the reference's form), or a bcrypt hash (its newer one).
// The error never quotes the hash.
func ParseKeyHash(s string) error {
	_, _, err := parseKeyHash(s)
	return err
}

func parseKeyHash(s string) (digest [32]byte, isBcrypt bool, err error) {
	if isBcryptHash(s) {
		if _, err := bcrypt.Cost([]byte(s)); err != nil {
			return digest, true, errors.New("malformed bcrypt hash")
		}
		return digest, true, nil
	}
	hexDigest, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		return digest, false, errors.New("want " + keyHashFormats)
	}
	b, err := hex.DecodeString(hexDigest)
	if err != nil || len(b) != len(digest) {
		return digest, false, errors.New("want sha256: and 64 hex digits")
	}
	copy(digest[:], b)
	return digest, false, nil
}

func isBcryptHash(s string) bool {
	return strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$")
}

// KeyEntry is one accepted API key: the key itself, or its hash.
type KeyEntry struct {
	Key, Hash string
}

// KeyStore holds the API keys of one policy, as digests: SHA-256 of the
// plain keys and of sha256: hashes, and bcrypt hashes. No key is kept in
// clear.
type KeyStore struct {
	digests []storedDigest
	bcrypts []storedBcrypt
}

type storedDigest struct {
	sum   [32]byte
	index int
}

type storedBcrypt struct {
	hash  []byte
	index int
}

// NewKeyStore builds the store of entries (in order: Match returns the
// index of the entry that matched).
func NewKeyStore(entries []KeyEntry) (*KeyStore, error) {
	ks := &KeyStore{}
	for i, e := range entries {
		if e.Hash == "" {
			ks.digests = append(ks.digests, storedDigest{sum: sha256.Sum256([]byte(e.Key)), index: i})
			continue
		}
		sum, isBcrypt, err := parseKeyHash(e.Hash)
		if err != nil {
			return nil, err
		}
		if isBcrypt {
			ks.bcrypts = append(ks.bcrypts, storedBcrypt{hash: []byte(e.Hash), index: i})
			continue
		}
		ks.digests = append(ks.digests, storedDigest{sum: sum, index: i})
	}
	return ks, nil
}

// Match returns the index of the entry that presented matches, or -1.
// Every SHA-256 digest is compared, in constant time, whatever matches, so
// the time taken tells nothing of which key is close; bcrypt hashes (slow
// by design) are tried after, in order.
func (ks *KeyStore) Match(presented string) int {
	sum := sha256.Sum256([]byte(presented))
	found := -1
	for _, d := range ks.digests {
		if subtle.ConstantTimeCompare(sum[:], d.sum[:]) == 1 && found < 0 {
			found = d.index
		}
	}
	if found >= 0 {
		return found
	}
	for _, b := range ks.bcrypts {
		if bcrypt.CompareHashAndPassword(b.hash, []byte(presented)) == nil {
			return b.index
		}
	}
	return -1
}
