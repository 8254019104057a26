package connect

import (
	"context"
	"testing"
)

func TestParseResource(t *testing.T) {
	tests := []struct {
		in      string
		want    Resource
		wantErr string
	}{
		{"gateway/gw", Resource{Kind: "gateway", Name: "gw"}, ""},
		{"gateway/gw.prod", Resource{Kind: "gateway", Name: "gw", Namespace: "prod"}, ""},
		{"gw/a", Resource{Kind: "gateway", Name: "a"}, ""},
		{"Gateways/a", Resource{Kind: "gateway", Name: "a"}, ""},
		{"gateway", Resource{}, `invalid resource "gateway": want type/name[.namespace], e.g. gateway/my-gateway`},
		{"gateway/", Resource{}, `invalid resource "gateway/": want type/name[.namespace], e.g. gateway/my-gateway`},
		{"/x", Resource{}, `invalid resource "/x": want type/name[.namespace], e.g. gateway/my-gateway`},
		{"gateway/a/b", Resource{}, `invalid resource "gateway/a/b": want type/name[.namespace], e.g. gateway/my-gateway`},
		{"pod/x", Resource{}, `invalid resource "pod/x": unsupported type "pod" (supported: gateway)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseResource(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error:\ngot  %v\nwant %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseResource = %+v, %v; want %+v", got, err, tt.want)
			}
			if s := got.String(); tt.in == "gateway/gw.prod" && s != tt.in {
				t.Errorf("String = %q, want %q", s, tt.in)
			}
		})
	}
}

func TestLocal(t *testing.T) {
	l := Local{Admin: "http://127.0.0.1:15000"}
	if u, err := l.AdminURL(context.Background()); err != nil || u != "http://127.0.0.1:15000" {
		t.Errorf("AdminURL = %q, %v", u, err)
	}
	// Standalone mode always sends to 127.0.0.1:<port> (spec part 1).
	if a, err := l.Listener(context.Background(), 3000); err != nil || a != "127.0.0.1:3000" {
		t.Errorf("Listener = %q, %v; want 127.0.0.1:3000", a, err)
	}
}
