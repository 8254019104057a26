package controller

import (
	"context"
	"fmt"

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

// Policy condition types, reasons and messages, as the reference
// implementation writes them.
const (
	policyConditionAccepted = "Accepted"
	policyConditionAttached = "Attached"

	policyReasonValid    = "Valid"
	policyReasonInvalid  = "Invalid"
	policyReasonAttached = "Attached"
	policyReasonPending  = "Pending"

	messagePolicyAccepted  = "Policy accepted"
	messageAttachedAll     = "Attached to all targets"
	messageInvalidPending  = "Policy is not attached due to invalid status"
	messageNotAttachedFmt  = "Policy is not attached: %s"
	messageRouteUnattached = "HTTPRoute %s/%s is not attached to any Gateway"
)

// policyReconciler writes a GatewayPolicy's status: one ancestor entry
// per Gateway its targets attach to, and one per target that attaches to
// none (with the target itself as ancestorRef), each with Accepted and
// Attached.
type policyReconciler struct{ base }

func (r *policyReconciler) setup(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(r.allPolicies)
	return ctrl.NewControllerManagedBy(mgr).Named("gatewaypolicy").For(&v1alpha1.GatewayPolicy{}).
		Watches(&gwv1.HTTPRoute{}, all).
		Watches(&gwv1.Gateway{}, all).
		Watches(&gwv1.GatewayClass{}, all).
		Complete(r)
}

func (r *policyReconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.GatewayPolicyList
	if err := r.client.List(ctx, &list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return reqs
}

// ancestor is one entry of the policy's status before conditions.
type ancestor struct {
	ref      gwv1.ParentReference
	attached bool
	message  string // why not attached
}

func (r *policyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := &v1alpha1.GatewayPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, pol); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ancestors, err := r.ancestors(ctx, pol)
	if err != nil {
		return ctrl.Result{}, err
	}
	invalid := Validate(pol.Spec)
	allAttached := true
	for _, a := range ancestors {
		allAttached = allAttached && a.attached
	}
	var statuses []gwv1.PolicyAncestorStatus
	for _, s := range pol.Status.Ancestors {
		if s.ControllerName != r.name {
			statuses = append(statuses, s)
		}
	}
	for _, a := range ancestors {
		var conds []metav1.Condition
		for _, old := range pol.Status.Ancestors {
			if old.ControllerName == r.name && equality.Semantic.DeepEqual(old.AncestorRef, a.ref) {
				conds = append(conds, old.Conditions...)
			}
		}
		var accepted, attached metav1.Condition
		switch {
		case invalid != nil:
			accepted = condition(policyConditionAccepted, false, policyReasonInvalid, joinMessages([]string{invalid.Error()}), pol.Generation)
			attached = condition(policyConditionAttached, false, policyReasonPending, messageInvalidPending, pol.Generation)
		case !a.attached:
			accepted = condition(policyConditionAccepted, true, policyReasonValid, messagePolicyAccepted, pol.Generation)
			attached = condition(policyConditionAttached, false, policyReasonPending, fmt.Sprintf(messageNotAttachedFmt, a.message), pol.Generation)
		default:
			accepted = condition(policyConditionAccepted, true, policyReasonValid, messagePolicyAccepted, pol.Generation)
			msg := messageAttachedAll
			if !allAttached {
				msg = "Attached to some targets; see the other ancestors for the rest"
			}
			attached = condition(policyConditionAttached, true, policyReasonAttached, msg, pol.Generation)
		}
		meta.SetStatusCondition(&conds, accepted)
		meta.SetStatusCondition(&conds, attached)
		statuses = append(statuses, gwv1.PolicyAncestorStatus{AncestorRef: a.ref, ControllerName: r.name, Conditions: conds})
	}
	if len(statuses) > 16 { // the schema's maxItems
		statuses = statuses[:16]
	}
	if equality.Semantic.DeepEqual(statuses, pol.Status.Ancestors) {
		return ctrl.Result{}, nil
	}
	pol.Status.Ancestors = statuses
	return ctrl.Result{}, r.client.Status().Update(ctx, pol)
}

// ancestors resolves the policy's targets: the Gateways they attach to,
// and the targets that attach to none. Unattached targets come first, so a
// reader taking the first condition of a type sees the problem.
func (r *policyReconciler) ancestors(ctx context.Context, pol *v1alpha1.GatewayPolicy) ([]ancestor, error) {
	var unattached, gateways []ancestor
	seen := map[types.NamespacedName]bool{}
	addGateway := func(k types.NamespacedName) {
		if !seen[k] {
			seen[k] = true
			gateways = append(gateways, ancestor{ref: gatewayRef(k), attached: true})
		}
	}
	for _, t := range pol.Spec.TargetRefs {
		key := types.NamespacedName{Namespace: pol.Namespace, Name: string(t.Name)}
		self := gwv1.ParentReference{Group: ptr.To(t.Group), Kind: ptr.To(t.Kind), Namespace: ptr.To(gwv1.Namespace(pol.Namespace)), Name: t.Name, SectionName: t.SectionName}
		switch t.Kind {
		case "Gateway":
			gw := &gwv1.Gateway{}
			err := r.live.Get(ctx, key, gw)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			found, ours := err == nil, false
			if found {
				if ours, err = r.ownsGateway(ctx, gw); err != nil {
					return nil, err
				}
			}
			switch {
			case !found:
				unattached = append(unattached, ancestor{ref: self, message: fmt.Sprintf("Gateway %s not found", key)})
			case !ours:
				unattached = append(unattached, ancestor{ref: self, message: fmt.Sprintf("Gateway %s is not managed by %s", key, r.name)})
			case t.SectionName != nil && !hasListener(gw, *t.SectionName):
				unattached = append(unattached, ancestor{ref: self, message: fmt.Sprintf("Gateway %s has no listener %s", key, *t.SectionName)})
			default:
				addGateway(key)
			}
		case "HTTPRoute":
			route := &gwv1.HTTPRoute{}
			err := r.live.Get(ctx, key, route)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			var parents []parentResult
			if err == nil {
				if parents, err = r.routeParents(ctx, route); err != nil {
					return nil, err
				}
			}
			n := 0
			for _, p := range parents {
				if p.accepted {
					n++
					addGateway(p.gateway)
				}
			}
			switch {
			case n == 0:
				unattached = append(unattached, ancestor{ref: self, message: fmt.Sprintf(messageRouteUnattached, key.Namespace, key.Name)})
			case t.SectionName != nil && !hasRule(route, *t.SectionName):
				unattached = append(unattached, ancestor{ref: self, message: fmt.Sprintf("HTTPRoute %s has no rule named %s", key, *t.SectionName)})
			}
		default:
			// Validate reports the kind; the target still gets its entry.
			unattached = append(unattached, ancestor{ref: self, message: fmt.Sprintf("%s %s is not a supported target kind", t.Kind, key)})
		}
	}
	return append(unattached, gateways...), nil
}

func gatewayRef(k types.NamespacedName) gwv1.ParentReference {
	return gwv1.ParentReference{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("Gateway")), Namespace: ptr.To(gwv1.Namespace(k.Namespace)), Name: gwv1.ObjectName(k.Name)}
}

func hasListener(gw *gwv1.Gateway, name gwv1.SectionName) bool {
	for _, l := range gw.Spec.Listeners {
		if l.Name == name {
			return true
		}
	}
	return false
}

func hasRule(route *gwv1.HTTPRoute, name gwv1.SectionName) bool {
	for _, r := range route.Spec.Rules {
		if r.Name != nil && *r.Name == name {
			return true
		}
	}
	return false
}
