package remote

import (
	"testing"
)

// FuzzDescriptor: any entry and limitOverride expression a config may
// hold either fails to compile or evaluates against a request without
// panicking; a descriptor that does not evaluate to a string (or a valid
// override) is skipped, never sent half-built.
func FuzzDescriptor(f *testing.F) {
	for _, s := range [][2]string{
		{`request.headers["x-user"]`, `{"unit": "minute", "requestsPerUnit": 10}`},
		{`"fixed"`, `{"unit": "day", "requestsPerUnit": 4294967295}`},
		{`source.address`, `{"unit": "week", "requestsPerUnit": 1}`},
		{`request.path + "/" + request.method`, `{"unit": "second", "requestsPerUnit": -1}`},
		{`string(source.port)`, `{"unit": 1, "requestsPerUnit": "x"}`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, value, override string) {
		prog, err := Compile(value)
		if err != nil {
			return
		}
		c := compiled{keys: []string{"k"}}
		c.values = append(c.values, prog)
		if o, err := CompileOverride(override); err == nil {
			c.override = o
		}
		rd, err := c.eval(act)
		if err != nil {
			return
		}
		if len(rd.Entries) != 1 || rd.Entries[0].Key != "k" {
			t.Fatalf("descriptor %v: want the one entry", rd)
		}
		if c.override != nil && rd.Limit != nil && rd.Limit.Unit == 0 {
			t.Fatalf("override with no unit: %v", rd.Limit)
		}
	})
}
