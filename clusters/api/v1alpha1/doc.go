// Package v1alpha1 is the reference rate-limit policy resource of spec part
// 2.3: kind GatewayPolicy, group gwdiag.dev, version v1alpha1, namespaced.
// Its shape and validation follow the reference implementation's
// AgentgatewayPolicy (agentgateway.dev/v1alpha1) for the fields the spec
// names, so the same manifests and conformance steps work with both.
//
// The CRD in clusters/crds is generated from these types by controller-gen
// (make generate-crds); zz_generated.deepcopy.go likewise.
//
// +kubebuilder:object:generate=true
// +groupName=gwdiag.dev
package v1alpha1
