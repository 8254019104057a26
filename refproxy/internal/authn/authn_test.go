package authn

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/refproxy/internal/authn/authntest"
)

// TestHtpasswdFormats: entries hashed by an independent tool verify.
// testdata/htpasswd was made with openssl 3: alice `openssl passwd -apr1
// -salt abcdefgh pa55word`, bob {SHA} of `printf password | openssl dgst
// -sha1 -binary | base64`, carol `openssl passwd -6 -salt abcdefgh
// pa55word`; dave's bcrypt line is made here.
func TestHtpasswdFormats(t *testing.T) {
	data, err := os.ReadFile("testdata/htpasswd")
	if err != nil {
		t.Fatal(err)
	}
	db := string(data) + authntest.Bcrypt(t, "dave", "s3cret") + "\n\n"
	h, err := ParseHtpasswd(db)
	if err != nil {
		t.Fatal(err)
	}
	if h.Users() != 4 {
		t.Errorf("Users = %d, want 4", h.Users())
	}
	for _, tc := range []struct {
		user, password string
		ok, known      bool
	}{
		{"alice", "pa55word", true, true},
		{"alice", "pa55wordx", false, true},
		{"bob", "password", true, true},
		{"bob", "Password", false, true},
		{"carol", "pa55word", true, true},
		{"dave", "s3cret", true, true},
		{"dave", "", false, true},
		{"eve", "pa55word", false, false},
		// A hash is not its own password (the plain-text parser is off).
		{"bob", "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", false, true},
	} {
		ok, known := h.Check(tc.user, tc.password)
		if ok != tc.ok || known != tc.known {
			t.Errorf("Check(%q, %q) = %v, %v; want %v, %v", tc.user, tc.password, ok, known, tc.ok, tc.known)
		}
	}
}

// TestHtpasswdErrors: each bad line is named by number (and user), never
// by its hash.
func TestHtpasswdErrors(t *testing.T) {
	const secretHash = "abJnggxhB/yWI"
	for _, tc := range []struct {
		name, db, want string
		unsupported    bool
	}{
		{"no colon", "alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\nbob" + secretHash, "htpasswd line 2: want user:hash", false},
		{"empty user", ":" + secretHash, "htpasswd line 1: empty user name", false},
		{"des crypt", "\nbob:" + secretHash, `htpasswd line 2 (user "bob"): a password hash in a format refproxy does not verify`, true},
		{"plain text", "bob:" + secretHash + "x", `htpasswd line 1 (user "bob"): a password hash in a format`, true},
		{"bad sha", "bob:{SHA}" + secretHash, `htpasswd line 1 (user "bob"): malformed SHA-1 hash`, false},
		{"bad md5", "bob:$apr1$" + secretHash, `htpasswd line 1 (user "bob"): malformed Apache MD5 hash`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHtpasswd(tc.db)
			var he *HtpasswdError
			if !errors.As(err, &he) {
				t.Fatalf("err = %v, want an *HtpasswdError", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) || he.Unsupported != tc.unsupported {
				t.Errorf("err = %q (unsupported %v)\nwant %q... (unsupported %v)", err, he.Unsupported, tc.want, tc.unsupported)
			}
			if strings.Contains(err.Error(), secretHash) {
				t.Errorf("the error quotes the hash: %q", err)
			}
		})
	}
}

// TestKeyStore: plain keys, sha256: hashes and bcrypt hashes match by
// their index; nothing else does.
func TestKeyStore(t *testing.T) {
	sum := sha256.Sum256([]byte("hashed-key-2"))
	bc := strings.TrimPrefix(authntest.Bcrypt(t, "", "bcrypt-key-3"), ":")
	ks, err := NewKeyStore([]KeyEntry{{Key: "plain-key-0"}, {Key: "plain-key-1"}, {Hash: "sha256:" + strings.ToUpper(hex.EncodeToString(sum[:]))}, {Hash: bc}})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int{"plain-key-0": 0, "plain-key-1": 1, "hashed-key-2": 2, "bcrypt-key-3": 3,
		"plain-key-": -1, "": -1, "sha256:" + hex.EncodeToString(sum[:]): -1, bc: -1} {
		if got := ks.Match(key); got != want {
			t.Errorf("Match(%q) = %d, want %d", key, got, want)
		}
	}
	for _, bad := range []string{"md5:abc", "sha256:abc", "sha256:" + strings.Repeat("zz", 32), "$2y$04$short"} {
		if err := ParseKeyHash(bad); err == nil || strings.Contains(err.Error(), bad) {
			t.Errorf("ParseKeyHash(%q) = %v, want an error that does not quote it", bad, err)
		}
	}
}

// TestVerify: a token is accepted only signed by a provider's key, from
// its issuer, for one of its audiences, within exp and nbf (with the
// leeway), with the required claims; each refusal says why in the
// reference's words, and no error quotes the token.
func TestVerify(t *testing.T) {
	a := authntest.NewIssuer(t, "kid-a")
	b := authntest.NewIssuer(t, "kid-b")
	pa, err := NewProvider("https://a.example", []string{"api"}, DefaultRequiredClaims, []byte(a.JWKS()))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := NewProvider("https://b.example", nil, []string{"exp", "sub"}, []byte(b.JWKS()))
	if err != nil {
		t.Fatal(err)
	}
	v := &Verifier{Providers: []*Provider{pa, pb}}
	now := time.Unix(1_800_000_000, 0)
	exp := now.Add(time.Hour).Unix()
	good := map[string]any{"iss": "https://a.example", "aud": "api", "sub": "alice", "exp": exp, "team": "blue"}
	with := func(k string, val any) map[string]any {
		c := map[string]any{}
		for kk, vv := range good {
			c[kk] = vv
		}
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		token string
		want  string // error, "" for accepted
	}{
		{"good", a.Token(good), ""},
		{"audience list", a.Token(with("aud", []string{"other", "api"})), ""},
		{"expired within leeway", a.Token(with("exp", now.Add(-30*time.Second).Unix())), ""},
		{"second provider", b.Token(map[string]any{"iss": "https://b.example", "sub": "bob", "exp": exp}), ""},
		{"expired", a.Token(with("exp", now.Add(-2*time.Minute).Unix())), "the token is invalid or malformed: the token has expired"},
		{"not yet", a.Token(with("nbf", now.Add(2*time.Minute).Unix())), "the token is invalid or malformed: the token is not valid yet (nbf)"},
		{"no exp", a.Token(with("exp", nil)), "the token is invalid or malformed: missing required claim exp"},
		{"wrong issuer", a.Token(with("iss", "https://evil.example")), `the token is invalid or malformed: the issuer is not "https://a.example"`},
		{"wrong audience", a.Token(with("aud", "web")), "the token is invalid or malformed: no audience of the token is accepted"},
		{"no audience", a.Token(with("aud", nil)), "the token is invalid or malformed: missing required claim aud"},
		{"required sub", b.Token(map[string]any{"iss": "https://b.example", "exp": exp}), "the token is invalid or malformed: missing required claim sub"},
		{"other issuer's key", b.TokenWithKid("kid-a", good), "the token is invalid or malformed: the signature does not verify"},
		{"unknown kid", a.TokenWithKid("kid-z", good), `token uses the unknown key "kid-z"`},
		{"no kid", a.TokenWithKid("", good), "the token header does not specify a `kid`"},
		{"not a jwt", "not.a.jwt", "the token header is malformed: not a signed JWT in compact form with a supported algorithm"},
		{"unsigned", "eyJhbGciOiJub25lIiwia2lkIjoia2lkLWEifQ.eyJpc3MiOiJodHRwczovL2EuZXhhbXBsZSJ9.", "the token header is malformed: not a signed JWT in compact form with a supported algorithm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify(tc.token, now)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("err = %v, want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), tc.token):
				t.Fatalf("the error quotes the token")
			}
			if tc.name == "good" && (got.Issuer != "https://a.example" || got.Subject != "alice" || got.Claims["team"] != "blue" || got.Provider != 0 || got.KeyID != "kid-a") {
				t.Errorf("verified %+v", got)
			}
			if tc.name == "second provider" && got.Provider != 1 {
				t.Errorf("provider %d, want 1", got.Provider)
			}
		})
	}
}

// TestNewProviderErrors: a JWKS refproxy cannot use is named by key index
// and kid, never quoted.
func TestNewProviderErrors(t *testing.T) {
	for _, tc := range []struct{ name, jwks, want string }{
		{"not json", `{"keys": [`, "not a JSON Web Key Set: JSON syntax error at byte 10"},
		{"no keys", `{}`, `not a JSON Web Key Set: want {"keys": [...]}`},
		{"no kid", `{"keys": [{"kty": "EC", "crv": "P-256", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`,
			"keys[0]: missing kid (a token names its key by kid)"},
		{"symmetric", `{"keys": [{"kty": "oct", "kid": "k1", "k": "c2VjcmV0LXNpZ25pbmcta2V5"}]}`,
			`keys[0] (kid "k1"): not an RSA, EC or Ed25519 public key (symmetric keys are not accepted)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewProvider("i", nil, nil, []byte(tc.jwks))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
