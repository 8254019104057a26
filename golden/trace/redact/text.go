package redact

import (
	"bytes"
	"strings"
)

// AppendText appends the text src to dst redacted, and reports whether
// anything was: text that is no trace event but may quote a header, such
// as curl's -v output ("> Authorization: Bearer ..."), a message, a line
// of a capture that is not JSON, YAML, or a JSON text a line at a time
// (`"cookie": "a=b",`). Wherever the name of a header r redacts stands as
// a word, followed by a colon (the name may be quoted), its value is
// redacted as AppendValue redacts it and its credentials added to s: the
// rest of the line, or up to the quote that closes it when the name or
// the value is quoted; a value that is a JSON object, array, number or
// null is left. So is the value of every credential query parameter in a
// URL ("> GET /v1beta/models/m:generateContent?key=... HTTP/1.1").
// Then every secret of s is scrubbed from each line, as Scrub scrubs a
// string. Nothing changed: dst gets src byte for byte.
func (r *Redactor) AppendText(dst, src []byte, s *Secrets) ([]byte, bool) {
	if s == nil {
		s = &Secrets{}
	}
	changed := false
	for len(src) > 0 {
		line := src
		if i := bytes.IndexByte(src, '\n'); i >= 0 {
			line = src[:i+1]
		}
		src = src[len(line):]
		body := strings.TrimRight(string(line), "\r\n")
		out, ok := r.textLine(body, s)
		r.addQuerySecrets(out, s)
		if q, ok2 := r.redactQuery(out); ok2 {
			out, ok = q, true
		}
		if sc, ok2 := r.Scrub(out, s); ok2 {
			out, ok = sc, true
		}
		if !ok {
			dst = append(dst, line...)
			continue
		}
		dst = append(dst, out...)
		dst = append(dst, line[len(body):]...)
		changed = true
	}
	return dst, changed
}

// Text is AppendText on a string.
func (r *Redactor) Text(src string, s *Secrets) string {
	out, changed := r.AppendText(nil, []byte(src), s)
	if !changed {
		return src
	}
	return string(out)
}

// textLine redacts the header values line quotes (see AppendText).
func (r *Redactor) textLine(line string, s *Secrets) (string, bool) {
	var b strings.Builder
	last, changed := 0, false
	for i := 0; i < len(line); {
		if !isNameByte(line[i]) || i > 0 && isNameByte(line[i-1]) {
			i++
			continue
		}
		j := i
		for j < len(line) && isNameByte(line[j]) {
			j++
		}
		name := line[i:j]
		if !r.Sensitive(name) {
			i = j
			continue
		}
		// The name may be quoted: "cookie": ..., 'Authorization: ...'.
		var quote byte
		if i > 0 && (line[i-1] == '"' || line[i-1] == '\'') {
			quote = line[i-1]
		}
		k, member := j, false
		if quote != 0 && k < len(line) && line[k] == quote {
			k++
			quote, member = 0, true // "name": the value says how far it goes
		}
		for k < len(line) && (line[k] == ' ' || line[k] == '\t') {
			k++
		}
		if k >= len(line) || line[k] != ':' {
			i = j
			continue
		}
		k++
		for k < len(line) && (line[k] == ' ' || line[k] == '\t') {
			k++
		}
		start, end := k, len(line)
		switch {
		case quote != 0:
			// 'Authorization: Bearer x': up to the closing quote.
			if e := strings.IndexByte(line[k:], quote); e >= 0 {
				end = k + e
			}
		case k < len(line) && (line[k] == '"' || line[k] == '\''):
			q := line[k]
			start = k + 1
			end = start
			for end < len(line) && line[end] != q {
				if line[end] == '\\' && q == '"' {
					end++
				}
				end++
			}
			end = min(end, len(line))
		case member && k < len(line) && (line[k] == '{' || line[k] == '[' || line[k] == 'n' && strings.HasPrefix(line[k:], "null") || '0' <= line[k] && line[k] <= '9'):
			// a JSON member that is no header's value: a policy named
			// like one ("authorization": {...}), null, a number
			i = k
			continue
		}
		value := strings.TrimRight(line[start:end], " \t")
		end = start + len(value)
		Credentials(name, value, s.Add)
		if red := r.Value(name, value); red != value {
			b.WriteString(line[last:start])
			b.WriteString(red)
			last, changed = end, true
		}
		i = max(end, j)
	}
	if !changed {
		return line, false
	}
	b.WriteString(line[last:])
	return b.String(), true
}

// isNameByte reports whether c may be part of a header name as text
// quotes one (a token of letters, digits, "-" and "_").
func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
