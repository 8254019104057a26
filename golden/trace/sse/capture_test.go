package sse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadCaptureRealTraces reads every trace the real proxy and its docs
// produced (testdata/agentgateway, see its README): each valid event is
// delivered, and each line the docs elided with `...` is named.
func TestReadCaptureRealTraces(t *testing.T) {
	tests := []struct {
		file   string
		events int
		bad    []int // lines that are not JSON
	}{
		{"k8s-latest.docs.jsonl", 15, nil},
		{"k8s-12x.docs.jsonl", 12, nil},
		{"k8s-latest.DERIVED-sse-framing.sse", 15, nil},
		{"standalone-latest.deelided.jsonl", 17, nil},
		{"standalone-12x.deelided.jsonl", 8, nil},
		{"standalone-latest.docs.jsonl", 7, []int{2, 3, 4, 6, 7, 8, 9, 13, 14, 15}},
		{"standalone-12x.docs.jsonl", 5, []int{2, 4, 7}},
		{"trace_test-event-INFO-uppercase.jsonl", 1, nil},
		{"trace_test-event-lowercase.jsonl", 1, nil},
		{"trace_test-policyEvent-cors.jsonl", 1, nil},
		{"trace_test-traceSampling.jsonl", 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "agentgateway", tt.file)
			var got []Captured
			err := ReadCaptureFile(path, nil, func(c Captured) error {
				got = append(got, c)
				return nil
			})
			if len(got) != tt.events {
				t.Errorf("got %d events, want %d", len(got), tt.events)
			}
			var bad []int
			var ce *CaptureError
			if errors.As(err, &ce) {
				for _, b := range ce.Bad {
					bad = append(bad, b.Line)
				}
			} else if err != nil {
				t.Fatalf("error %v, want nil or a *CaptureError", err)
			}
			if fmt.Sprint(bad) != fmt.Sprint(tt.bad) {
				t.Errorf("bad lines %v, want %v (error: %v)", bad, tt.bad, err)
			}
			for _, l := range tt.bad {
				if want := fmt.Sprintf("%s:%d: not a JSON trace event", path, l); !strings.Contains(err.Error(), want) {
					t.Errorf("error does not name line %d:\n%v", l, err)
				}
			}
		})
	}
}

// TestReadCaptureSSEEqualsJSONL: the SSE capture and the JSON Lines print
// of the same trace give the same events, byte for byte, on the lines of
// their data frames.
func TestReadCaptureSSEEqualsJSONL(t *testing.T) {
	read := func(name string) []Captured {
		var out []Captured
		if err := ReadCaptureFile(filepath.Join("testdata", "agentgateway", name), nil, func(c Captured) error {
			out = append(out, c)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	sse, jsonl := read("k8s-latest.DERIVED-sse-framing.sse"), read("k8s-latest.docs.jsonl")
	if len(sse) != len(jsonl) {
		t.Fatalf("SSE capture: %d events, JSON Lines: %d", len(sse), len(jsonl))
	}
	for i := range sse {
		if string(sse[i].Raw) != string(jsonl[i].Raw) {
			t.Errorf("event %d: SSE %s\nJSON Lines %s", i+1, sse[i].Raw, jsonl[i].Raw)
		}
	}
	if sse[0].Line != 7 || jsonl[0].Line != 1 {
		t.Errorf("first event on line %d (SSE) and %d (JSON Lines), want 7 and 1", sse[0].Line, jsonl[0].Line)
	}
}

func TestReadCapture(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		raws   []string
		lines  []int
		errMsg string // "" for no error
	}{
		{"JSON Lines kept byte for byte", "{ \"eventEnd\": 1, \"severity\":\"INFO\" }\r\n\n   \n{\"eventEnd\":2}\n",
			[]string{`{ "eventEnd": 1, "severity":"INFO" }`, `{"eventEnd":2}`}, []int{1, 4}, ""},
		{"SSE with comments, event and id fields", ": ready\n\nevent: trace\nid: 7\ndata: {\"eventEnd\":1}\n\n: keepalive\n\ndata: {\"eventEnd\":2}\n\n",
			[]string{`{"eventEnd":1}`, `{"eventEnd":2}`}, []int{5, 9}, ""},
		{"SSE data over two lines", "data: {\"eventEnd\":\ndata: 3}\n\n", []string{"{\"eventEnd\":\n3}"}, []int{1}, ""},
		{"last line without newline", "{\"eventEnd\":1}", []string{`{"eventEnd":1}`}, []int{1}, ""},
		{"bad lines named, good ones kept", "{\"eventEnd\":1}\n{oops\n[1]\n{\"eventEnd\":\"soon\"}\n{\"eventEnd\":5}\n",
			[]string{`{"eventEnd":1}`, `{"eventEnd":5}`}, []int{1, 5},
			"t.jsonl: 3 lines are not trace events:\n  t.jsonl:2: not a JSON trace event: invalid character 'o'" +
				" looking for beginning of object key string\n  t.jsonl:3: not a JSON trace event: want an object\n" +
				"  t.jsonl:4: not a JSON trace event: json: cannot unmarshal string into Go struct field Event.eventEnd of type int64"},
		{"bad SSE frame", ": ready\n\ndata: nope\n\n", nil, nil,
			"t.jsonl: 1 line is not a trace event:\n  t.jsonl:3: not a JSON trace event: invalid character 'o' in literal null (expecting 'u')"},
		{"empty", "", nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raws []string
			var lines []int
			err := ReadCapture(strings.NewReader(tt.in), "t.jsonl", func(c Captured) error {
				raws = append(raws, string(c.Raw))
				lines = append(lines, c.Line)
				return nil
			})
			if fmt.Sprintf("%q", raws) != fmt.Sprintf("%q", tt.raws) || fmt.Sprint(lines) != fmt.Sprint(tt.lines) {
				t.Errorf("events:\ngot  %q on lines %v\nwant %q on lines %v", raws, lines, tt.raws, tt.lines)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.errMsg {
				t.Errorf("error:\ngot  %s\nwant %s", gotErr, tt.errMsg)
			}
		})
	}
}

// TestReadCaptureStopsOnCallbackError: the caller can stop the reading
// (a closed pipe, a full disk).
func TestReadCaptureStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := ReadCapture(strings.NewReader("{}\n{}\n{}\n"), "t", func(Captured) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("got %d calls and %v, want 1 call and the callback's error", n, err)
	}
}

func TestReadCaptureFileStdinAndMissing(t *testing.T) {
	n := 0
	if err := ReadCaptureFile("-", strings.NewReader("{}\n"), func(Captured) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("stdin: %d events, %v; want 1, nil", n, err)
	}
	err := ReadCaptureFile(filepath.Join(t.TempDir(), "none.jsonl"), nil, func(Captured) error { return nil })
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want not-exist", err)
	}
	// A bad line is named by its input: "stdin" for "-", else the path.
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(path, []byte("{}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, name string }{{"-", "stdin"}, {path, path}} {
		var bad *CaptureError
		err := ReadCaptureFile(tt.path, strings.NewReader("{}\nnot json\n"), func(Captured) error { return nil })
		if !errors.As(err, &bad) || bad.Name != tt.name {
			t.Errorf("ReadCaptureFile(%q): %v; want a CaptureError of %q", tt.path, err, tt.name)
		}
		err = ReadTracesFile(tt.path, strings.NewReader("{}\nnot json\n"), func(CapturedTrace) error { return nil })
		if !errors.As(err, &bad) || bad.Name != tt.name {
			t.Errorf("ReadTracesFile(%q): %v; want a CaptureError of %q", tt.path, err, tt.name)
		}
	}
}
