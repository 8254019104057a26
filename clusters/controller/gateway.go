package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
)

// gatewayClassReconciler accepts the GatewayClasses naming this controller
// and lists the features it supports in their status.
type gatewayClassReconciler struct {
	base
	features []string // sorted, without repeats
}

func (r *gatewayClassReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("gatewayclass").For(&gwv1.GatewayClass{}).Complete(r)
}

func (r *gatewayClassReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	gc := &gwv1.GatewayClass{}
	if err := r.client.Get(ctx, req.NamespacedName, gc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if gc.Spec.ControllerName != r.name {
		return ctrl.Result{}, nil
	}
	conds := append([]metav1.Condition(nil), gc.Status.Conditions...)
	meta.SetStatusCondition(&conds, condition(string(gwv1.GatewayClassConditionStatusAccepted), true,
		string(gwv1.GatewayClassReasonAccepted), "Handled by "+string(r.name), gc.Generation))
	var features []gwv1.SupportedFeature
	for _, f := range r.features {
		features = append(features, gwv1.SupportedFeature{Name: gwv1.FeatureName(f)})
	}
	if equality.Semantic.DeepEqual(conds, gc.Status.Conditions) && equality.Semantic.DeepEqual(features, gc.Status.SupportedFeatures) {
		return ctrl.Result{}, nil
	}
	gc.Status.Conditions, gc.Status.SupportedFeatures = conds, features
	return ctrl.Result{}, r.client.Status().Update(ctx, gc)
}

// gatewayReconciler writes Accepted and Programmed on the Gateways of this
// controller's classes.
type gatewayReconciler struct{ base }

func (r *gatewayReconciler) setup(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named("gateway").For(&gwv1.Gateway{}).
		Watches(&gwv1.GatewayClass{}, handler.EnqueueRequestsFromMapFunc(r.gatewaysOfClass)).
		Watches(&gwv1.HTTPRoute{}, handler.EnqueueRequestsFromMapFunc(r.parentsOfRoute))
	if r.dataPlane != nil {
		// The data plane's config depends on the Gateway's routes (the
		// route watch above maps a route to the Gateways it names, before
		// and after a change), the policies that target it or its routes,
		// and the endpoints of its routes' backends. Only the Gateways a
		// change concerns are translated again: re-translating every
		// Gateway on any change kept the reconciler busy with the other
		// scenarios' Gateways while this one waited.
		b = b.Owns(&appsv1.Deployment{}).Owns(&corev1.ConfigMap{}).Owns(&corev1.Service{}).
			Watches(&v1alpha1.GatewayPolicy{}, handler.EnqueueRequestsFromMapFunc(r.gatewaysOfPolicy)).
			Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.gatewaysOfEndpoints))
	}
	return b.Complete(r)
}

// gatewaysOfPolicy maps a policy to the Gateways it targets, directly or
// through the routes it targets (read from the cache: a route created
// later brings its Gateways in through the route watch).
func (r *gatewayReconciler) gatewaysOfPolicy(ctx context.Context, o client.Object) []reconcile.Request {
	pol, ok := o.(*v1alpha1.GatewayPolicy)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, t := range pol.Spec.TargetRefs {
		key := types.NamespacedName{Namespace: pol.Namespace, Name: string(t.Name)}
		switch t.Kind {
		case "Gateway":
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		case "HTTPRoute":
			route := &gwv1.HTTPRoute{}
			if err := r.client.Get(ctx, key, route); err == nil {
				reqs = append(reqs, r.parentsOfRoute(ctx, route)...)
			}
		}
	}
	return reqs
}

// gatewaysOfEndpoints maps an EndpointSlice to the Gateways of the routes
// whose backendRefs name its Service.
func (r *gatewayReconciler) gatewaysOfEndpoints(ctx context.Context, o client.Object) []reconcile.Request {
	svc := o.GetLabels()[discoveryv1.LabelServiceName]
	if svc == "" {
		return nil
	}
	var routes gwv1.HTTPRouteList
	if err := r.client.List(ctx, &routes); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range routes.Items {
		route := &routes.Items[i]
		if routeNamesService(route, o.GetNamespace(), svc) {
			reqs = append(reqs, r.parentsOfRoute(ctx, route)...)
		}
	}
	return reqs
}

// routeNamesService tells whether a backendRef of route names Service
// ns/name.
func routeNamesService(route *gwv1.HTTPRoute, ns, name string) bool {
	for _, rule := range route.Spec.Rules {
		for _, br := range rule.BackendRefs {
			brNS := route.Namespace
			if br.Namespace != nil {
				brNS = string(*br.Namespace)
			}
			if brNS == ns && string(br.Name) == name {
				return true
			}
		}
	}
	return false
}

// parentsOfRoute maps a route to the Gateways it names, whose listeners
// count attached routes.
func (r *gatewayReconciler) parentsOfRoute(_ context.Context, o client.Object) []reconcile.Request {
	route, ok := o.(*gwv1.HTTPRoute)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, ref := range route.Spec.ParentRefs {
		if key, ok := gatewayKey(route.Namespace, ref); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}

// gatewayKey is the Gateway a parentRef names, if it names one.
func gatewayKey(routeNamespace string, ref gwv1.ParentReference) (types.NamespacedName, bool) {
	if ref.Group != nil && *ref.Group != gwv1.GroupName || ref.Kind != nil && *ref.Kind != "Gateway" {
		return types.NamespacedName{}, false
	}
	key := types.NamespacedName{Namespace: routeNamespace, Name: string(ref.Name)}
	if ref.Namespace != nil {
		key.Namespace = string(*ref.Namespace)
	}
	return key, true
}

func (r *gatewayReconciler) gatewaysOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	var list gwv1.GatewayList
	if err := r.client.List(ctx, &list); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, gw := range list.Items {
		if string(gw.Spec.GatewayClassName) == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&gw)})
		}
	}
	return reqs
}

// supportedProtocols are the listener protocols HTTPRoutes attach to.
var supportedProtocols = map[gwv1.ProtocolType]bool{gwv1.HTTPProtocolType: true, gwv1.HTTPSProtocolType: true}

func (r *gatewayReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	gw := &gwv1.Gateway{}
	if err := r.client.Get(ctx, req.NamespacedName, gw); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ours, err := r.ownsGateway(ctx, gw)
	if err != nil || !ours {
		return ctrl.Result{}, err
	}
	var invalid []string
	for _, l := range gw.Spec.Listeners {
		if !supportedProtocols[l.Protocol] {
			invalid = append(invalid, fmt.Sprintf("listener %s: protocol %s is not supported (HTTP, HTTPS)", l.Name, l.Protocol))
		}
	}
	accepted := condition(string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonAccepted), "Gateway accepted", gw.Generation)
	programmed := condition(string(gwv1.GatewayConditionProgrammed), true, string(gwv1.GatewayReasonProgrammed), "Gateway programmed", gw.Generation)
	if len(invalid) > 0 {
		accepted.Reason, accepted.Message = string(gwv1.GatewayReasonListenersNotValid), joinMessages(invalid)
		if len(invalid) == len(gw.Spec.Listeners) {
			accepted.Status = metav1.ConditionFalse
			programmed.Status, programmed.Reason, programmed.Message = metav1.ConditionFalse, string(gwv1.GatewayReasonInvalid), "no valid listener"
		}
	}
	if r.dataPlane != nil && programmed.Status == metav1.ConditionTrue {
		p, err := r.applyDataPlane(ctx, gw)
		if err != nil {
			return ctrl.Result{}, err
		}
		programmed = condition(string(gwv1.GatewayConditionProgrammed), p.ok, p.reason, p.message, gw.Generation)
	}
	conds := append([]metav1.Condition(nil), gw.Status.Conditions...)
	meta.SetStatusCondition(&conds, accepted)
	meta.SetStatusCondition(&conds, programmed)
	listeners, err := r.listenerStatus(ctx, gw)
	if err != nil {
		return ctrl.Result{}, err
	}
	if equality.Semantic.DeepEqual(conds, gw.Status.Conditions) && equality.Semantic.DeepEqual(listeners, gw.Status.Listeners) {
		return ctrl.Result{}, nil
	}
	gw.Status.Conditions, gw.Status.Listeners = conds, listeners
	return ctrl.Result{}, r.client.Status().Update(ctx, gw)
}

// listenerStatus is the status of each listener: its conditions, the
// route kinds it takes and how many routes attach to it.
func (r *gatewayReconciler) listenerStatus(ctx context.Context, gw *gwv1.Gateway) ([]gwv1.ListenerStatus, error) {
	var routes gwv1.HTTPRouteList
	if err := r.client.List(ctx, &routes); err != nil {
		return nil, err
	}
	self := client.ObjectKeyFromObject(gw)
	var out []gwv1.ListenerStatus
	for _, l := range gw.Spec.Listeners {
		var old []metav1.Condition
		for _, ls := range gw.Status.Listeners {
			if ls.Name == l.Name {
				old = append(old, ls.Conditions...)
			}
		}
		st := gwv1.ListenerStatus{Name: l.Name, SupportedKinds: []gwv1.RouteGroupKind{}, Conditions: old}
		set := func(typ string, ok bool, reason, msg string) {
			meta.SetStatusCondition(&st.Conditions, condition(typ, ok, reason, msg, gw.Generation))
		}
		if supportedProtocols[l.Protocol] {
			st.SupportedKinds = append(st.SupportedKinds, gwv1.RouteGroupKind{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: "HTTPRoute"})
			set(string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "Listener accepted")
			set(string(gwv1.ListenerConditionProgrammed), true, string(gwv1.ListenerReasonProgrammed), "Listener programmed")
		} else {
			msg := fmt.Sprintf("protocol %s is not supported (HTTP, HTTPS)", l.Protocol)
			set(string(gwv1.ListenerConditionAccepted), false, string(gwv1.ListenerReasonUnsupportedProtocol), msg)
			set(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), msg)
		}
		set(string(gwv1.ListenerConditionResolvedRefs), true, string(gwv1.ListenerReasonResolvedRefs), "All references resolved")
		set(string(gwv1.ListenerConditionConflicted), false, string(gwv1.ListenerReasonNoConflicts), "No conflicts")
		for i := range routes.Items {
			route := &routes.Items[i]
			for _, ref := range route.Spec.ParentRefs {
				if key, ok := gatewayKey(route.Namespace, ref); !ok || key != self || !selects(ref, l) {
					continue
				}
				ok, err := r.listenerTakes(ctx, gw, l, route.Namespace)
				if err != nil {
					return nil, err
				}
				if ok {
					st.AttachedRoutes++
					break
				}
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// ownsGateway tells whether gw's class names this controller, reading the
// class live.
func (b base) ownsGateway(ctx context.Context, gw *gwv1.Gateway) (bool, error) {
	gc := &gwv1.GatewayClass{}
	err := b.live.Get(ctx, types.NamespacedName{Name: string(gw.Spec.GatewayClassName)}, gc)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return gc.Spec.ControllerName == b.name, nil
}

func condition(typ string, ok bool, reason, msg string, gen int64) metav1.Condition {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen}
}

// joinMessages keeps a condition message within the 32768 bytes the
// Condition schema allows.
func joinMessages(msgs []string) string {
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += "; "
		}
		if len(out)+len(m) > 30000 {
			return out + "..."
		}
		out += m
	}
	return out
}
