package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestStrictReasons: every reason shape refproxy writes passes, each of
// them with one field misspelt or of another type fails and names the
// event, and events that carry no reasons pass whatever their fields.
func TestStrictReasons(t *testing.T) {
	good := []string{
		`{"type":"routeSelection","selectedRoute":"r","listener":"l","reasons":[{"route":"r","result":"noMatch","reason":"method is GET, the route wants POST","condition":"method","want":"POST","got":"GET","match":1}]}`,
		`{"type":"policy","kind":"localRateLimit","result":{"type":"apply","details":"refused by ...","decision":"refused","entries":[{"entry":0,"index":0,"from":"route default/api","type":"tokens","maxTokens":10,"tokensPerFill":10,"fillInterval":"1m0s","shadow":true,"remaining":0,"resetSeconds":42,"wouldRefuse":true,"key":"request.headers[\"x-user\"]","bucket":null}]}}`,
		`{"type":"policy","kind":"remoteRateLimit","result":{"type":"apply","details":"refused by ...","decision":"refused","service":"127.0.0.1:8081","domain":"d","from":"route default/api","failureMode":"failClosed","descriptors":[{"entries":{"generic_key":"a"},"type":"requests","code":"OVER_LIMIT","limit":2,"unit":"day","remaining":0,"resetSeconds":86399}]}}`,
		`{"type":"policy","kind":"remoteRateLimit","result":{"type":"apply","details":"could not answer","decision":"failed","service":"s","domain":"d","from":"f","failureMode":"failOpen","descriptors":[{"entries":{"k":"v"},"type":"tokens","code":""}],"error":"connection refused"}}`,
		`{"type":"policy","kind":"apiKey","result":{"type":"apply","details":"authenticated with API key keys[0]","decision":"allowed","phase":"route","key":0,"metadata":{"name":"ci","tier":3}}}`,
		`{"type":"policy","kind":"basicAuth","result":{"type":"apply","details":"authenticated as user \"alice\"","decision":"allowed","phase":"gateway","user":"alice"}}`,
		`{"type":"policy","kind":"jwt","result":{"type":"apply","details":"authenticated","decision":"allowed","phase":"route","issuer":"https://idp.example","subject":"","keyId":"k1","provider":0}}`,
		`{"type":"policy","kind":"backendAuth","result":{"type":"apply","details":"sent the configured key","backend":"b","locations":["header authorization"]}}`,
		`{"type":"policy","kind":"cors","result":{"type":"skip","reason":"policy default/p targets listener other"}}`,
		`{"type":"policyEvent","kind":"localRateLimit","details":"the response's usage took 40 tokens","tokens":40,"entries":[{"entry":0,"index":0,"from":"route default/api","type":"tokens","maxTokens":100,"tokensPerFill":100,"fillInterval":"1m0s","remaining":60,"resetSeconds":59}],"usage":{"inputTokens":10,"outputTokens":30}}`,
		`{"type":"requestFinished","status":429,"cause":{"kind":"rateLimit","reason":"exhausted","policy":"localRateLimit"}}`,
		`{"type":"requestSnapshot","anything":{"at":"all"}}`,
		`{"type":"routeSelection","selectedRoute":null,"evaluatedRoutes":[]}`,
	}
	for _, s := range good {
		if err := StrictReasons(event(t, s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	// Each bad one is a good one with one field misspelt, or of another
	// type: a reader decoding it would lose the field.
	bad := map[string]string{
		`{"type":"routeSelection","reasons":[{"route":"r","result":"noMatch","reason":"x","condtion":"method"}]}`:                                                                                           "condtion",
		`{"type":"policy","kind":"localRateLimit","result":{"type":"apply","entries":[{"index":0,"from":"f","type":"requests","maxTokens":1,"tokensPerFill":1,"fillInterval":"1s","refusedBy":true}]}}`:     "refusedBy",
		`{"type":"policy","kind":"remoteRateLimit","result":{"type":"apply","descriptors":[{"entries":{"k":"v"},"type":"requests","code":"OK","limit":"two"}]}}`:                                            "limit",
		`{"type":"policy","kind":"localRateLimit","result":{"type":"apply","entries":[{"index":0,"from":"f","type":"requests","maxTokens":1,"tokensPerFill":1,"fillInterval":"1s","key":"k","bucket":5}]}}`: "result.entries[0].bucket: 5",
		`{"type":"policy","kind":"jwt","result":{"type":"apply","provider":"idp"}}`:                                                                                                                         "provider",
		`{"type":"policy","kind":"apiKey","result":{"type":"apply","apiKey":"sk-1"}}`:                                                                                                                       "apiKey",
		`{"type":"policyEvent","kind":"localRateLimit","details":"d","tokens":40,"entries":[],"usage":{"promptTokens":10}}`:                                                                                 "promptTokens",
		`{"type":"requestFinished","cause":{"kind":"noRoute","reason":"r","route":"x"}}`:                                                                                                                    "route",
	}
	for s, field := range bad {
		// The event is in the error; the decoder's own words (the
		// wrapped error) must name the field.
		err := StrictReasons(event(t, s))
		if err == nil || !strings.Contains(errors.Unwrap(err).Error(), field) || !strings.Contains(err.Error(), string(event(t, s).Type())) {
			t.Errorf("%s: %v; want an error naming the event and the field %q", s, err, field)
		}
	}
}

func event(t *testing.T, message string) Event {
	t.Helper()
	e, err := Parse([]byte(`{"eventStart":null,"eventEnd":1,"severity":"info","message":` + message + `}`))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestReasonFieldsAreInKeyOrder: the reason types a producer writes from
// list their fields in the order of their JSON names, so that
// encoding/json writes them in the order it writes a map's keys (sorted):
// a trace written from the types has the bytes of one written from maps.
// Each type, with every field set (a Nullable as null and as a value),
// is written, read back as a map and written again: the bytes must not
// change.
func TestReasonFieldsAreInKeyOrder(t *testing.T) {
	one, two := 1, int64(2)
	three, sub, key := uint64(3), "", "request.headers[\"x-user\"]"
	yes := true
	entry := func(n Nullable[string]) LimitEntry {
		return LimitEntry{Applies: &yes, Bucket: n, Condition: n, Entry: &one, FillInterval: "1m0s", From: "route r",
			Index: 1, Key: &key, MaxTokens: 3, Policy: "default/p", Refused: true, Remaining: &two, ResetSeconds: &two,
			Shadow: true, TokensPerFill: 3, Type: "tokens", WouldRefuse: true}
	}
	values := []any{
		PolicyOutcome{Backend: "b", Decision: "refused", Descriptors: []Descriptor{{Code: "OVER_LIMIT",
			Entries: map[string]string{"b": "<x>", "a": "&"}, Limit: &three, Remaining: &three, ResetSeconds: &two,
			Type: "requests", Unit: "day"}}, Details: "refused by <it>", Domain: "d",
			Entries: []LimitEntry{entry(Null[string]()), entry(Some("a && b"))}, Error: "e", FailureMode: "failOpen",
			From: "f", Issuer: "i", Key: &one, KeyID: "k", Locations: []string{"header authorization"},
			Metadata: map[string]any{"z": 1, "a": []any{"x"}}, Phase: "route", Provider: &one, Reason: "r",
			Service: "s", Subject: &sub, Type: "apply", User: "u"},
		PolicyCharge{Details: "d", Entries: []LimitEntry{entry(Some("c"))}, Kind: "localRateLimit", Tokens: 40,
			Type: "policyEvent", Usage: Usage{InputTokens: 10, OutputTokens: 30}},
		Cause{Kind: "rateLimit", Policy: "localRateLimit", Reason: "exhausted"},
	}
	for _, v := range values {
		typed, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		var m map[string]any
		if err := json.Unmarshal(typed, &m); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		mapped, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if !bytes.Equal(typed, mapped) {
			t.Errorf("%T is not written in key order:\n typed %s\n  maps %s", v, typed, mapped)
		}
	}
	// Every field above is set: a field added to a type without a value
	// here would go unchecked.
	for _, v := range values {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			if rv.Field(i).IsZero() {
				t.Errorf("%T.%s is not set in this test", v, rv.Type().Field(i).Name)
			}
		}
	}
}

// TestNullable: a Nullable is left out, null, or its value, and reads
// back as it was written.
func TestNullable(t *testing.T) {
	type s struct {
		N Nullable[string] `json:"n,omitzero"`
	}
	for want, v := range map[string]s{`{}`: {}, `{"n":null}`: {N: Null[string]()}, `{"n":"a"}`: {N: Some("a")}} {
		b, err := json.Marshal(v)
		if err != nil || string(b) != want {
			t.Errorf("%+v: %s, %v; want %s", v, b, err, want)
		}
		var back s
		if err := json.Unmarshal(b, &back); err != nil || back.N.Set != v.N.Set || (back.N.Value == nil) != (v.N.Value == nil) ||
			back.N.Value != nil && *back.N.Value != *v.N.Value {
			t.Errorf("%s read back as %+v, %v", b, back, err)
		}
	}
}

// TestNullableOfAnotherTypeIsLenient: a lenient reader of a Nullable of
// another type reads it as null and goes on with the fields after it
// (encoding/json would stop at an Unmarshaler's error).
func TestNullableOfAnotherTypeIsLenient(t *testing.T) {
	var o PolicyOutcome
	m := map[string]any{"type": "apply", "service": "s",
		"entries": []any{map[string]any{"bucket": 5, "condition": "c", "index": 3, "from": "f"}}}
	if !DecodeReason(m, &o) {
		t.Fatal("not decoded")
	}
	if len(o.Entries) != 1 || o.Service != "s" || o.Type != "apply" {
		t.Fatalf("fields after the bucket of another type were lost: %+v", o)
	}
	e := o.Entries[0]
	if !e.Bucket.Set || e.Bucket.Value != nil || e.Index != 3 || e.From != "f" || e.Condition.Value == nil || *e.Condition.Value != "c" {
		t.Errorf("entry read as %+v", e)
	}
}
