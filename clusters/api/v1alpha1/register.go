package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of the reference policy resource; Kind is its kind.
const (
	Group   = "gwdiag.dev"
	Version = "v1alpha1"
	Kind    = "GatewayPolicy"
)

// GroupVersion is the API group and version of the policy resource.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// AddToScheme registers the policy types in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &GatewayPolicy{}, &GatewayPolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
