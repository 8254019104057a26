// Package authn checks the credentials of refproxy's auth policies: an
// htpasswd user database (basicAuth), API keys given in clear or as a
// hash (apiKey), and JWTs signed by the keys of a JSON Web Key Set
// (jwtAuth). The config loader parses the policies' material with it (so
// that a bad htpasswd line or JWKS key is a config error naming its field)
// and the data plane checks requests with it. It is a leaf: it imports
// nothing of refproxy.
//
// Nothing here puts a credential in an error: errors name a line, a user,
// a key's index or id, never a password, a hash or a key.
package authn

import (
	"bufio"
	"fmt"
	"strings"

	htpasswd "github.com/tg123/go-htpasswd"
)

// htpasswdFormats names the password hashes Htpasswd verifies, for errors
// and docs.
const htpasswdFormats = "bcrypt ($2y$, $2a$, $2b$), SHA-1 ({SHA}), salted SHA-1 ({SSHA}), Apache MD5 ($apr1$, $1$), SHA-crypt ($5$, $6$)"

// htpasswdParsers are the formats github.com/tg123/go-htpasswd verifies,
// without its plain-text parser: that one takes any line, so an entry in a
// format it does not know (DES crypt, say) would become a password equal
// to its own hash.
var htpasswdParsers = []htpasswd.PasswdParser{
	htpasswd.AcceptBcrypt, htpasswd.AcceptSha, htpasswd.AcceptSsha, htpasswd.AcceptMd5, htpasswd.AcceptCryptSha,
}

// HtpasswdError is a line of an htpasswd database refproxy cannot use.
type HtpasswdError struct {
	// Line is the line's number, from 1.
	Line int
	// User is the line's user ("" when the line has none).
	User string
	// Unsupported: the hash is in a format refproxy does not verify (the
	// reference may); otherwise the line is malformed.
	Unsupported bool
	Msg         string
}

func (e *HtpasswdError) Error() string {
	if e.User != "" {
		return fmt.Sprintf("htpasswd line %d (user %q): %s", e.Line, e.User, e.Msg)
	}
	return fmt.Sprintf("htpasswd line %d: %s", e.Line, e.Msg)
}

// Htpasswd is a user database in htpasswd format.
type Htpasswd struct {
	file  *htpasswd.File
	users int
}

// ParseHtpasswd reads an htpasswd database: one `user:hash` a line, blank
// lines ignored. Every line must be usable; the first that is not is the
// error (which names its number and user, never its hash).
func ParseHtpasswd(data string) (*Htpasswd, error) {
	users := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		if !ok {
			return nil, &HtpasswdError{Line: n, Msg: "want user:hash"}
		}
		if user == "" {
			return nil, &HtpasswdError{Line: n, Msg: "empty user name"}
		}
		known := false
		for _, p := range htpasswdParsers {
			m, err := p(hash)
			if err != nil {
				// The library's message quotes the hash: not passed on.
				return nil, &HtpasswdError{Line: n, User: user, Msg: "malformed " + hashKind(hash) + " hash"}
			}
			if m != nil {
				known = true
				break
			}
		}
		if !known {
			return nil, &HtpasswdError{Line: n, User: user, Unsupported: true,
				Msg: "a password hash in a format refproxy does not verify (it verifies " + htpasswdFormats + "; plain text is refused)"}
		}
		users[user] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("htpasswd: %v", err)
	}
	f, err := htpasswd.NewFromReader(strings.NewReader(data), htpasswdParsers, nil)
	if err != nil {
		return nil, fmt.Errorf("htpasswd: %v", err)
	}
	return &Htpasswd{file: f, users: len(users)}, nil
}

// hashKind names a hash's format by its prefix, for errors.
func hashKind(h string) string {
	for _, k := range []struct{ prefix, name string }{
		{"$2", "bcrypt"}, {"{SHA}", "SHA-1"}, {"{SSHA}", "salted SHA-1"}, {"$apr1$", "Apache MD5"}, {"$1$", "MD5"}, {"$5$", "SHA-256 crypt"}, {"$6$", "SHA-512 crypt"},
	} {
		if strings.HasPrefix(h, k.prefix) {
			return k.name
		}
	}
	return "password"
}

// Users is the number of users in the database.
func (h *Htpasswd) Users() int { return h.users }

// Check reports whether password is user's; known whether the user is in
// the database at all (for the trace's reason: a user name is no secret).
// The comparison takes constant time for a given hash (bcrypt's, or the
// library's constant-time comparison of digests).
func (h *Htpasswd) Check(user, password string) (ok, known bool) {
	return h.file.Match(user, password), h.file.Exists(user)
}
