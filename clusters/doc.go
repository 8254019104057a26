// Package clusters is the Kubernetes side of gwdiag: the Gateway API and
// policy CRDs (crds), the policy API types (api/v1alpha1), the reference
// controller that writes their status conditions (controller), and the
// local control plane the tests run against (kube). Its tests run the
// conformance suite's condition-status scenarios against the cluster
// target; see docs/clusters.md.
package clusters
