package authn

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// leeway is the clock skew allowed on exp and nbf: the reference's
// (jsonwebtoken's default, 60 seconds).
const leeway = 60 * time.Second

// DefaultRequiredClaims are the claims a token must carry when the
// provider's jwtValidationOptions do not say: the reference's default.
var DefaultRequiredClaims = []string{"exp"}

// enforcedClaims are the registered claims whose presence a provider can
// require (jwtValidationOptions.requiredClaims); the reference ignores
// others (iat, jti), and so does refproxy.
var enforcedClaims = []string{"exp", "nbf", "aud", "iss", "sub"}

// supportedAlgorithms are every signature algorithm a key may verify.
var supportedAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512, jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// Provider is a trusted issuer and the keys of its JWKS.
type Provider struct {
	Issuer    string
	Audiences []string
	// Required are the claims a token must carry (besides iss, and aud
	// when Audiences is set).
	Required []string
	keys     map[string]verifyKey
	kids     []string
}

type verifyKey struct {
	key  any
	algs []jose.SignatureAlgorithm
}

// NewProvider parses the provider's JWKS. Every key must have a kid (the
// token names its key by it) and be an RSA, EC or Ed25519 public key (a
// private key's public half is used); errors name the key by its index and
// kid, and quote nothing of it.
func NewProvider(issuer string, audiences, required []string, jwks []byte) (*Provider, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(jwks, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %v", jsonError(err))
	}
	if set.Keys == nil {
		return nil, errors.New(`not a JSON Web Key Set: want {"keys": [...]}`)
	}
	p := &Provider{Issuer: issuer, Audiences: audiences, Required: required, keys: map[string]verifyKey{}}
	for i, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("keys[%d]: not a usable JWK (%v)", i, err)
		}
		if k.KeyID == "" {
			return nil, fmt.Errorf("keys[%d]: missing kid (a token names its key by kid)", i)
		}
		pub := k.Public()
		var algs []jose.SignatureAlgorithm
		switch pub.Key.(type) {
		case *rsa.PublicKey:
			algs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512}
		case *ecdsa.PublicKey:
			algs = []jose.SignatureAlgorithm{jose.ES256, jose.ES384}
		case ed25519.PublicKey:
			algs = []jose.SignatureAlgorithm{jose.EdDSA}
		default:
			return nil, fmt.Errorf("keys[%d] (kid %q): not an RSA, EC or Ed25519 public key (symmetric keys are not accepted)", i, k.KeyID)
		}
		if k.Algorithm != "" {
			a := jose.SignatureAlgorithm(k.Algorithm)
			if !slices.Contains(supportedAlgorithms, a) {
				return nil, fmt.Errorf("keys[%d] (kid %q): unsupported alg %q", i, k.KeyID, k.Algorithm)
			}
			algs = []jose.SignatureAlgorithm{a}
		}
		if _, dup := p.keys[k.KeyID]; !dup {
			p.kids = append(p.kids, k.KeyID)
		}
		p.keys[k.KeyID] = verifyKey{key: pub.Key, algs: algs}
	}
	return p, nil
}

// jsonError keeps a JSON syntax error's offset and drops the rest.
func jsonError(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "JSON syntax error at byte " + strconv.FormatInt(se.Offset, 10)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "a " + te.Value + " where " + te.Type.String() + " belongs"
	}
	return "malformed JSON"
}

// KeyIDs are the kids of the provider's keys, in the JWKS's order.
func (p *Provider) KeyIDs() []string { return p.kids }

// TokenError is why a token was not accepted, in the reference's words.
type TokenError struct {
	// Kind is missing, noKid, unknownKey or invalid.
	Kind string
	Msg  string
}

func (e *TokenError) Error() string { return e.Msg }

// Token error kinds.
const (
	tokenMissing    = "missing"
	tokenNoKeyID    = "noKid"
	tokenUnknownKey = "unknownKey"
	tokenInvalid    = "invalid"
)

// ErrNoToken is a request without a token.
var ErrNoToken = &TokenError{Kind: tokenMissing, Msg: "no bearer token found"}

func invalid(why string) *TokenError {
	return &TokenError{Kind: tokenInvalid, Msg: "the token is invalid or malformed: " + why}
}

// Verified is a token that passed: its claims and who vouched for it.
type Verified struct {
	Claims map[string]any
	// Provider is the index of the provider whose key verified it.
	Provider int
	Issuer   string
	Subject  string
	KeyID    string
}

// Verifier checks tokens against providers, as the reference does: the
// token's kid names its key; the providers whose issuer is the token's
// (unverified) iss and that have the kid are tried first; without one, the
// first provider with the kid decides (so that a wrong issuer is an
// issuer error, not an unknown key).
type Verifier struct {
	Providers []*Provider
}

// maxKeyIDQuote bounds how much of an unknown kid an error quotes.
const maxKeyIDQuote = 64

// Verify checks token at time now. The error never quotes the token.
func (v *Verifier) Verify(token string, now time.Time) (*Verified, error) {
	tok, err := jwt.ParseSigned(token, supportedAlgorithms)
	if err != nil {
		return nil, &TokenError{Kind: tokenInvalid, Msg: "the token header is malformed: not a signed JWT in compact form with a supported algorithm"}
	}
	if len(tok.Headers) != 1 {
		return nil, invalid("want one signature")
	}
	h := tok.Headers[0]
	if h.KeyID == "" {
		return nil, &TokenError{Kind: tokenNoKeyID, Msg: "the token header does not specify a `kid`"}
	}
	var unverified struct {
		Iss any `json:"iss"`
	}
	_ = tok.UnsafeClaimsWithoutVerification(&unverified)
	iss, _ := unverified.Iss.(string)
	var first error
	for i, p := range v.Providers {
		if p.Issuer != iss {
			continue
		}
		if k, ok := p.keys[h.KeyID]; ok {
			out, err := p.verify(tok, k, now)
			if err == nil {
				out.Provider, out.KeyID = i, h.KeyID
				return out, nil
			}
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		return nil, first
	}
	for i, p := range v.Providers {
		if k, ok := p.keys[h.KeyID]; ok {
			out, err := p.verify(tok, k, now)
			if err != nil {
				return nil, err
			}
			out.Provider, out.KeyID = i, h.KeyID
			return out, nil
		}
	}
	kid := h.KeyID
	if len(kid) > maxKeyIDQuote {
		kid = kid[:maxKeyIDQuote] + "..."
	}
	return nil, &TokenError{Kind: tokenUnknownKey, Msg: fmt.Sprintf("token uses the unknown key %q", kid)}
}

// verify checks the signature with k, then the claims.
func (p *Provider) verify(tok *jwt.JSONWebToken, k verifyKey, now time.Time) (*Verified, error) {
	alg := jose.SignatureAlgorithm(tok.Headers[0].Algorithm)
	if !slices.Contains(k.algs, alg) {
		return nil, invalid(fmt.Sprintf("algorithm %s is not one the key verifies", alg))
	}
	var std jwt.Claims
	claims := map[string]any{}
	if err := tok.Claims(k.key, &std, &claims); err != nil {
		var je *json.UnmarshalTypeError
		if errors.As(err, &je) {
			return nil, invalid("a registered claim of the wrong type (" + je.Field + ")")
		}
		return nil, invalid("the signature does not verify")
	}
	for _, c := range p.Required {
		if _, ok := claims[c]; !ok && slices.Contains(enforcedClaims, c) {
			return nil, invalid("missing required claim " + c)
		}
	}
	if _, ok := claims["iss"]; !ok || std.Issuer != p.Issuer {
		return nil, invalid("the issuer is not " + strconv.Quote(p.Issuer))
	}
	if len(p.Audiences) > 0 {
		if _, ok := claims["aud"]; !ok {
			return nil, invalid("missing required claim aud")
		}
		if !slices.ContainsFunc(p.Audiences, std.Audience.Contains) {
			return nil, invalid("no audience of the token is accepted")
		}
	}
	if std.Expiry != nil && now.After(std.Expiry.Time().Add(leeway)) {
		return nil, invalid("the token has expired")
	}
	if std.NotBefore != nil && now.Add(leeway).Before(std.NotBefore.Time()) {
		return nil, invalid("the token is not valid yet (nbf)")
	}
	return &Verified{Claims: claims, Issuer: std.Issuer, Subject: std.Subject}, nil
}
