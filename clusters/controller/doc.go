// Package controller is gwdiag's reference controller: controller-runtime
// reconcilers that write the status conditions spec parts 2.3, 2.4 and 3
// name, the way the reference implementation (agentgateway) writes them.
//
//   - GatewayClass (spec.controllerName = ControllerName): Accepted.
//   - Gateway of such a class: Accepted and Programmed.
//   - HTTPRoute, per parent Gateway of such a class: Accepted (the
//     listener allows the route) and ResolvedRefs (every backend Service
//     exists, cross-namespace only with a ReferenceGrant).
//   - GatewayPolicy (gwdiag.dev/v1alpha1): per ancestor Gateway, Accepted
//     (Valid, or Invalid with the validation error) and Attached (Attached,
//     or Pending with why).
//
// It is a control-plane reference: it runs no proxy. Programmed=True means
// the controller accepted the Gateway's configuration; gwdiag's tests run
// it against a bare kube-apiserver, where no pod could run anyway.
//
// Whether a route or a policy attaches is computed from the objects' specs
// (read live from the API server), never from another object's status, so
// the first status a controller writes is already the settled one when the
// objects are created in dependency order.
package controller
