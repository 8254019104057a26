// Package authntest issues JWTs and htpasswd entries for tests of
// refproxy's auth policies: an issuer with a fresh key, its JWKS, and
// tokens with the claims a test gives.
package authntest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/crypto/bcrypt"
)

// Issuer signs tokens with one ES256 key.
type Issuer struct {
	t   testing.TB
	key *ecdsa.PrivateKey
	// KeyID is the key's kid in the JWKS and in every token header.
	KeyID string
}

// NewIssuer makes an issuer with a new P-256 key named kid.
func NewIssuer(t testing.TB, kid string) *Issuer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Issuer{t: t, key: k, KeyID: kid}
}

// JWKS is the issuer's public key as a JSON Web Key Set.
func (is *Issuer) JWKS() string {
	is.t.Helper()
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: is.KeyID, Use: "sig"}}}
	b, err := json.Marshal(set)
	if err != nil {
		is.t.Fatal(err)
	}
	return string(b)
}

// Token signs claims (ES256, the issuer's kid).
func (is *Issuer) Token(claims map[string]any) string {
	is.t.Helper()
	return is.TokenWithKid(is.KeyID, claims)
}

// TokenWithKid signs claims with the issuer's key but names kid in the
// header ("" for none).
func (is *Issuer) TokenWithKid(kid string, claims map[string]any) string {
	is.t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key}, opts)
	if err != nil {
		is.t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		is.t.Fatal(err)
	}
	jws, err := sig.Sign(payload)
	if err != nil {
		is.t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		is.t.Fatal(err)
	}
	return s
}

// Bcrypt is an htpasswd line for user with password hashed by bcrypt
// (minimum cost: tests hash and check many).
func Bcrypt(t testing.TB, user, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return user + ":" + string(h)
}
