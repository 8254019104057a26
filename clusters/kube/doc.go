// Package kube starts what the cluster tests need: a real etcd and
// kube-apiserver (built from Go modules, see EnsureBinaries) on free
// loopback ports in a temporary directory, with the Gateway API and policy
// CRDs installed. There is no kubelet, scheduler or controller-manager: the
// tests check API-server-level behaviour (schemas, validation, status
// written by the reference controller), never pods.
//
// The control plane itself is started by controller-runtime's envtest
// package, which generates the serving certificates and service-account
// keys, picks the ports and waits for readiness; this package supplies the
// binaries, the CRDs and a kubeconfig file. Package kubeenv wraps it for
// sigs.k8s.io/e2e-framework, with a kind cluster path for machines where a
// container registry and kind's node image are available.
package kube
