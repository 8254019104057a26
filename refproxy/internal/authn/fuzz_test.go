package authn

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/refproxy/internal/authn/authntest"
)

// FuzzVerify: any string a client sends as a token is refused (or, signed
// by the provider's key, accepted) without a panic, and no error quotes it.
func FuzzVerify(f *testing.F) {
	is := authntest.NewIssuer(f, "k1")
	p, err := NewProvider("https://idp.example", []string{"api"}, DefaultRequiredClaims, []byte(is.JWKS()))
	if err != nil {
		f.Fatal(err)
	}
	v := &Verifier{Providers: []*Provider{p}}
	good := is.Token(map[string]any{"iss": "https://idp.example", "aud": "api", "exp": 1 << 40})
	for _, s := range []string{good, good[:len(good)-2], "a.b.c", "", "....", strings.Replace(good, ".", "..", 1),
		"eyJhbGciOiJub25lIn0.e30.", "eyJhbGciOiJIUzI1NiIsImtpZCI6ImsxIn0.e30.c2ln"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		_, err := v.Verify(token, time.Unix(1_800_000_000, 0))
		if err != nil && len(token) >= 8 && strings.Contains(err.Error(), token) {
			t.Fatalf("the error quotes the token: %v", err)
		}
	})
}

// FuzzParseHtpasswd: any database parses or names its bad line, and the
// error never quotes a hash.
func FuzzParseHtpasswd(f *testing.F) {
	for _, s := range []string{"alice:$apr1$abcdefgh$hbAboF.tMUnn0szRg6OHz.\n", "bob:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "x", ":y",
		"a:$2y$05$abcdefghijklmnopqrstuu", "c:$6$rounds=5000$salt$hash", "d:{SSHA}AAAA", "e:$1$$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, db string) {
		_, err := ParseHtpasswd(db)
		if err == nil {
			return
		}
		lines := strings.Split(db, "\n")
		var users strings.Builder
		for _, line := range lines {
			user, _, _ := strings.Cut(strings.TrimSpace(line), ":")
			users.WriteString(strconv.Quote(user))
		}
		for _, line := range lines {
			_, hash, ok := strings.Cut(strings.TrimSpace(line), ":")
			// A hash that the error may hold anyway (in a user's name as
			// quoted, or in its fixed words) proves nothing.
			if !ok || len(hash) < 12 || strings.Contains(users.String(), hash) || strings.Contains(htpasswdFormats, hash) {
				continue
			}
			if strings.Contains(err.Error(), hash) {
				t.Fatalf("the error quotes a hash: %v", err)
			}
		}
	})
}
