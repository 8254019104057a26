// Package crds holds the CustomResourceDefinitions a gwdiag cluster needs:
// the Gateway API standard channel, copied unchanged from
// sigs.k8s.io/gateway-api@v1.6.3 config/crd/standard (the same version the
// main module requires; the validating admission policy of that folder is
// not a CRD and is left out), and the reference policy resource
// GatewayPolicy (gwdiag.dev/v1alpha1), generated from clusters/api/v1alpha1
// by controller-gen.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// GatewayAPIVersion is the Gateway API release the embedded CRDs come from.
const GatewayAPIVersion = "v1.6.3"

//go:embed gateway-api/*.yaml gwdiag.dev_*.yaml
var files embed.FS

// gatewayAPI returns the Gateway API standard-channel CRDs.
func gatewayAPI() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return load("gateway-api/*.yaml")
}

// policy returns the reference policy CRD (gatewaypolicies.gwdiag.dev).
func policy() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return load("gwdiag.dev_*.yaml")
}

// All returns the Gateway API CRDs and then the policy CRD.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	gw, err := gatewayAPI()
	if err != nil {
		return nil, err
	}
	pol, err := policy()
	if err != nil {
		return nil, err
	}
	return append(gw, pol...), nil
}

func load(pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, pattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("crds/%s: %w", name, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("crds/%s: kind %q, want CustomResourceDefinition", path.Base(name), crd.Kind)
		}
		out = append(out, crd)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("crds: no manifest matches %s", pattern)
	}
	return out, nil
}
