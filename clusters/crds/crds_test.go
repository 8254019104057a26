package crds

import (
	"testing"
)

func TestAllParse(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"gateways.gateway.networking.k8s.io":        false,
		"gatewayclasses.gateway.networking.k8s.io":  false,
		"httproutes.gateway.networking.k8s.io":      false,
		"referencegrants.gateway.networking.k8s.io": false,
		"gatewaypolicies.gwdiag.dev":                false,
	}
	for _, c := range all {
		if _, ok := want[c.Name]; ok {
			want[c.Name] = true
		}
		if c.Spec.Group != "gwdiag.dev" && c.Annotations["gateway.networking.k8s.io/bundle-version"] != GatewayAPIVersion {
			t.Errorf("%s: bundle-version %q, want %q", c.Name, c.Annotations["gateway.networking.k8s.io/bundle-version"], GatewayAPIVersion)
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("CRD %s missing from the embedded manifests", name)
		}
	}
}

func TestPolicyCRDShape(t *testing.T) {
	pol, err := policy()
	if err != nil {
		t.Fatal(err)
	}
	if len(pol) != 1 {
		t.Fatalf("got %d policy CRDs, want 1", len(pol))
	}
	c := pol[0]
	if got, want := c.Spec.Names.Kind, "GatewayPolicy"; got != want {
		t.Errorf("kind: got %q, want %q", got, want)
	}
	if got, want := string(c.Spec.Scope), "Namespaced"; got != want {
		t.Errorf("scope: got %q, want %q", got, want)
	}
	if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Name != "v1alpha1" || c.Spec.Versions[0].Subresources == nil || c.Spec.Versions[0].Subresources.Status == nil {
		t.Errorf("versions: got %+v, want one v1alpha1 with the status subresource", c.Spec.Versions)
	}
}
