package trace

import (
	"errors"
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
		`{"type":"routeSelection","reasons":[{"route":"r","result":"noMatch","reason":"x","condtion":"method"}]}`:                                                                                       "condtion",
		`{"type":"policy","kind":"localRateLimit","result":{"type":"apply","entries":[{"index":0,"from":"f","type":"requests","maxTokens":1,"tokensPerFill":1,"fillInterval":"1s","refusedBy":true}]}}`: "refusedBy",
		`{"type":"policy","kind":"remoteRateLimit","result":{"type":"apply","descriptors":[{"entries":{"k":"v"},"type":"requests","code":"OK","limit":"two"}]}}`:                                        "limit",
		`{"type":"policy","kind":"jwt","result":{"type":"apply","provider":"idp"}}`:                                                                                                                     "provider",
		`{"type":"policy","kind":"apiKey","result":{"type":"apply","apiKey":"sk-1"}}`:                                                                                                                   "apiKey",
		`{"type":"policyEvent","kind":"localRateLimit","details":"d","tokens":40,"entries":[],"usage":{"promptTokens":10}}`:                                                                             "promptTokens",
		`{"type":"requestFinished","cause":{"kind":"noRoute","reason":"r","route":"x"}}`:                                                                                                                "route",
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
