package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// routeReconciler writes, per parent Gateway of this controller, the
// HTTPRoute's Accepted and ResolvedRefs conditions.
type routeReconciler struct{ base }

func (r *routeReconciler) setup(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(r.allRoutes)
	return ctrl.NewControllerManagedBy(mgr).Named("httproute").For(&gwv1.HTTPRoute{}).
		Watches(&gwv1.Gateway{}, all).
		Watches(&gwv1.GatewayClass{}, all).
		Watches(&corev1.Service{}, all).
		Watches(&gwv1beta1.ReferenceGrant{}, all).
		Complete(r)
}

// allRoutes re-evaluates every route when something a route depends on
// changes; the reference controller serves test-sized clusters, where this
// is cheaper to get right than precise indexes.
func (r *routeReconciler) allRoutes(ctx context.Context, _ client.Object) []reconcile.Request {
	var list gwv1.HTTPRouteList
	if err := r.client.List(ctx, &list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, rt := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rt)})
	}
	return reqs
}

func (r *routeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	route := &gwv1.HTTPRoute{}
	if err := r.client.Get(ctx, req.NamespacedName, route); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	parents, err := r.routeParents(ctx, route)
	if err != nil {
		return ctrl.Result{}, err
	}
	resolved, err := r.resolveBackends(ctx, route)
	if err != nil {
		return ctrl.Result{}, err
	}
	var statuses []gwv1.RouteParentStatus
	for _, ps := range route.Status.Parents {
		if ps.ControllerName != r.name {
			statuses = append(statuses, ps) // another controller's entry: keep it as it is
		}
	}
	for _, p := range parents {
		var conds []metav1.Condition
		for _, old := range route.Status.Parents {
			if old.ControllerName == r.name && equality.Semantic.DeepEqual(old.ParentRef, p.ref) {
				conds = append(conds, old.Conditions...)
			}
		}
		meta.SetStatusCondition(&conds, condition(string(gwv1.RouteConditionAccepted), p.accepted, p.reason, p.message, route.Generation))
		rc := resolved
		rc.ObservedGeneration = route.Generation
		meta.SetStatusCondition(&conds, rc)
		statuses = append(statuses, gwv1.RouteParentStatus{ParentRef: p.ref, ControllerName: r.name, Conditions: conds})
	}
	if len(statuses) > 32 { // the schema's maxItems
		statuses = statuses[:32]
	}
	if equality.Semantic.DeepEqual(statuses, route.Status.Parents) {
		return ctrl.Result{}, nil
	}
	route.Status.Parents = statuses
	return ctrl.Result{}, r.client.Status().Update(ctx, route)
}

// parentResult is how one parentRef of a route fares with a Gateway of
// this controller.
type parentResult struct {
	ref      gwv1.ParentReference // as written in the route
	gateway  types.NamespacedName
	accepted bool
	reason   string
	message  string
}

// routeParents evaluates the route's parentRefs that name Gateways of this
// controller; parents of other controllers, and missing Gateways, are left
// out (they are not this controller's to report on).
func (b base) routeParents(ctx context.Context, route *gwv1.HTTPRoute) ([]parentResult, error) {
	var out []parentResult
	for _, ref := range route.Spec.ParentRefs {
		key, ok := gatewayKey(route.Namespace, ref)
		if !ok {
			continue
		}
		gw := &gwv1.Gateway{}
		if err := b.live.Get(ctx, key, gw); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		ours, err := b.ownsGateway(ctx, gw)
		if err != nil {
			return nil, err
		}
		if !ours {
			continue
		}
		p := parentResult{ref: ref, gateway: key}
		p.accepted, p.reason, p.message, err = b.listenerAllows(ctx, gw, ref, route.Namespace)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// listenerAllows tells whether a listener of gw that ref selects takes an
// HTTPRoute from namespace ns. Hostname intersection is not checked.
func (b base) listenerAllows(ctx context.Context, gw *gwv1.Gateway, ref gwv1.ParentReference, ns string) (bool, string, string, error) {
	matched := 0
	for _, l := range gw.Spec.Listeners {
		if !selects(ref, l) {
			continue
		}
		matched++
		ok, err := b.listenerTakes(ctx, gw, l, ns)
		if err != nil {
			return false, "", "", err
		}
		if ok {
			return true, string(gwv1.RouteReasonAccepted), "Route accepted", nil
		}
	}
	if matched == 0 {
		return false, string(gwv1.RouteReasonNoMatchingParent), fmt.Sprintf("Gateway %s/%s has no listener matching the parentRef", gw.Namespace, gw.Name), nil
	}
	return false, string(gwv1.RouteReasonNotAllowedByListeners), fmt.Sprintf("no listener of Gateway %s/%s allows an HTTPRoute from namespace %s", gw.Namespace, gw.Name, ns), nil
}

// selects tells whether a parentRef's sectionName and port select l.
func selects(ref gwv1.ParentReference, l gwv1.Listener) bool {
	return (ref.SectionName == nil || l.Name == *ref.SectionName) && (ref.Port == nil || l.Port == *ref.Port)
}

// listenerTakes tells whether listener l of gw takes an HTTPRoute from
// namespace ns.
func (b base) listenerTakes(ctx context.Context, gw *gwv1.Gateway, l gwv1.Listener, ns string) (bool, error) {
	if !supportedProtocols[l.Protocol] || !allowsKind(l.AllowedRoutes) {
		return false, nil
	}
	return b.allowsNamespace(ctx, gw.Namespace, l.AllowedRoutes, ns)
}

func allowsKind(ar *gwv1.AllowedRoutes) bool {
	if ar == nil || len(ar.Kinds) == 0 {
		return true
	}
	for _, k := range ar.Kinds {
		if k.Kind == "HTTPRoute" && (k.Group == nil || *k.Group == gwv1.GroupName) {
			return true
		}
	}
	return false
}

func (b base) allowsNamespace(ctx context.Context, gwNamespace string, ar *gwv1.AllowedRoutes, ns string) (bool, error) {
	from := gwv1.NamespacesFromSame
	if ar != nil && ar.Namespaces != nil && ar.Namespaces.From != nil {
		from = *ar.Namespaces.From
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true, nil
	case gwv1.NamespacesFromSelector:
		if ar.Namespaces.Selector == nil {
			return false, nil
		}
		sel, err := metav1.LabelSelectorAsSelector(ar.Namespaces.Selector)
		if err != nil {
			return false, nil
		}
		n := &corev1.Namespace{}
		if err := b.live.Get(ctx, types.NamespacedName{Name: ns}, n); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return sel.Matches(labels.Set(n.Labels)), nil
	default:
		return ns == gwNamespace, nil
	}
}

// resolveBackends is the ResolvedRefs condition of a route: every
// backendRef is a Service that exists, in another namespace only where a
// ReferenceGrant allows it.
func (b base) resolveBackends(ctx context.Context, route *gwv1.HTTPRoute) (metav1.Condition, error) {
	reason, msgs := "", []string(nil)
	fail := func(r, m string) {
		if reason == "" {
			reason = r
		}
		msgs = append(msgs, m)
	}
	for _, rule := range route.Spec.Rules {
		for _, br := range rule.BackendRefs {
			group, kind := "", "Service"
			if br.Group != nil {
				group = string(*br.Group)
			}
			if br.Kind != nil {
				kind = string(*br.Kind)
			}
			ns := route.Namespace
			if br.Namespace != nil {
				ns = string(*br.Namespace)
			}
			if group != "" || kind != "Service" {
				fail(string(gwv1.RouteReasonInvalidKind), fmt.Sprintf("backendRef %s: kind %s.%s is not supported (Service)", br.Name, kind, group))
				continue
			}
			if ns != route.Namespace {
				ok, err := b.granted(ctx, route.Namespace, ns, string(br.Name))
				if err != nil {
					return metav1.Condition{}, err
				}
				if !ok {
					fail(string(gwv1.RouteReasonRefNotPermitted), fmt.Sprintf("Service %s/%s: no ReferenceGrant in %s allows HTTPRoutes from %s", ns, br.Name, ns, route.Namespace))
					continue
				}
			}
			err := b.live.Get(ctx, types.NamespacedName{Namespace: ns, Name: string(br.Name)}, &corev1.Service{})
			if apierrors.IsNotFound(err) {
				fail(string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("Service %s/%s not found", ns, br.Name))
				continue
			}
			if err != nil {
				return metav1.Condition{}, err
			}
		}
	}
	if reason != "" {
		return condition(string(gwv1.RouteConditionResolvedRefs), false, reason, joinMessages(msgs), 0), nil
	}
	return condition(string(gwv1.RouteConditionResolvedRefs), true, string(gwv1.RouteReasonResolvedRefs), "All references resolved", 0), nil
}

// granted tells whether a ReferenceGrant in namespace to lets HTTPRoutes of
// namespace from refer to the Service name.
func (b base) granted(ctx context.Context, from, to, name string) (bool, error) {
	var grants gwv1beta1.ReferenceGrantList
	if err := b.live.List(ctx, &grants, client.InNamespace(to)); err != nil {
		return false, err
	}
	for _, g := range grants.Items {
		fromOK, toOK := false, false
		for _, f := range g.Spec.From {
			fromOK = fromOK || f.Group == gwv1.GroupName && f.Kind == "HTTPRoute" && string(f.Namespace) == from
		}
		for _, t := range g.Spec.To {
			toOK = toOK || t.Group == "" && t.Kind == "Service" && (t.Name == nil || string(*t.Name) == name)
		}
		if fromOK && toOK {
			return true, nil
		}
	}
	return false, nil
}
