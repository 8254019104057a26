// Package clusterstatus cites what a cluster's API server says of the
// resources behind a request's outcome (spec part 2.4: the conditions that
// indicate health): the matched HTTPRoute's Accepted and ResolvedRefs, the
// Accepted and Attached of the policies on it or its Gateway, and for a
// request no route took, the routes of the Gateway that would have taken
// it but are not Accepted and the policies that are not Attached. It reads
// HTTPRoutes as Gateway API types and policies as unstructured objects of
// any known policy kind (gwdiag.dev GatewayPolicy, agentgateway.dev
// AgentgatewayPolicy), so a cluster without one of them is no error.
package clusterstatus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/golden/routing"
)

// policyKinds are the policy resources read, by group, version and kind.
var policyKinds = []schema.GroupVersionKind{
	{Group: "gwdiag.dev", Version: "v1alpha1", Kind: "GatewayPolicy"},
	{Group: "agentgateway.dev", Version: "v1alpha1", Kind: "AgentgatewayPolicy"},
}

// maxCites bounds what a request with no route cites: the rest is counted.
const maxCites = 5

// Request is what the outcome was and what the request was.
type Request struct {
	// Route is the selected route's key ("ns/name.00.http"), "" for none.
	Route string
	// NoRoute: no route took the request (404).
	NoRoute bool
	Status  int
	// The request, to find the routes that would have taken it.
	Method, Path, Host, Query string
	Headers                   map[string]string
}

// Cite returns what the API server says, one phrase per resource whose
// conditions are not all True, for the Gateway ns/gateway.
func Cite(ctx context.Context, cl client.Client, ns, gateway string, r Request) ([]string, error) {
	var cites []string
	var errs []error
	gw := gwv1.ParentReference{Name: gwv1.ObjectName(gateway), Namespace: ptr.To(gwv1.Namespace(ns))}
	policies, err := listPolicies(ctx, cl)
	if err != nil {
		errs = append(errs, err)
	}
	if r.Route != "" {
		rns, name, ok := routeName(r.Route)
		if ok {
			var route gwv1.HTTPRoute
			err := cl.Get(ctx, client.ObjectKey{Namespace: rns, Name: name}, &route)
			switch {
			case err == nil:
				cites = append(cites, routeConditions(&route, gw, false)...)
			case client.IgnoreNotFound(err) == nil:
				cites = append(cites, fmt.Sprintf("HTTPRoute %s/%s is not in the cluster (the proxy serves an older configuration)", rns, name))
			default:
				errs = append(errs, err)
			}
			for _, p := range policies {
				if p.targets("HTTPRoute", rns, name) || p.targets("Gateway", ns, gateway) {
					cites = append(cites, p.unhealthy()...)
				}
			}
		}
	}
	if r.NoRoute {
		var routes gwv1.HTTPRouteList
		if err := cl.List(ctx, &routes); err != nil {
			errs = append(errs, err)
		}
		var more []string
		// The policies that may concern the request: those in the
		// Gateway's namespace and in the namespaces of its routes.
		nss := map[string]bool{ns: true}
		for i := range routes.Items {
			rt := &routes.Items[i]
			if !parentOf(rt, gw) {
				continue
			}
			nss[rt.Namespace] = true
			if wouldMatch(rt, r) {
				more = append(more, routeConditions(rt, gw, true)...)
			}
		}
		for _, p := range policies {
			if nss[p.ns] {
				more = append(more, p.unhealthy()...)
			}
		}
		if len(more) > maxCites {
			more = append(more[:maxCites], fmt.Sprintf("%d more not shown", len(more)-maxCites))
		}
		cites = append(cites, more...)
	}
	return cites, errors.Join(errs...)
}

// routeKeyRe is a cluster route key: namespace/name.<rule><match>.<protocol>
// (refproxy's controller: httpbin/httpbin.00.http) or with the indexes
// apart (agentgateway: httpbin/httpbin.0.0.http).
var routeKeyRe = regexp.MustCompile(`^([^/]+)/(.+?)\.\d+(?:\.\d+)?\.[a-z]+$`)

// routeName is the HTTPRoute of a cluster route key.
func routeName(key string) (ns, name string, ok bool) {
	m := routeKeyRe.FindStringSubmatch(key)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// parentOf tells whether the route names the Gateway among its parents.
func parentOf(rt *gwv1.HTTPRoute, gw gwv1.ParentReference) bool {
	for _, p := range rt.Spec.ParentRefs {
		ns := rt.Namespace
		if p.Namespace != nil {
			ns = string(*p.Namespace)
		}
		if p.Name == gw.Name && ns == string(*gw.Namespace) && (p.Kind == nil || *p.Kind == "Gateway") {
			return true
		}
	}
	return false
}

// routeConditions cites the route's conditions under the Gateway that are
// not True; wouldMatch says the route would have taken the request.
func routeConditions(rt *gwv1.HTTPRoute, gw gwv1.ParentReference, wouldMatch bool) []string {
	what := fmt.Sprintf("HTTPRoute %s/%s", rt.Namespace, rt.Name)
	if wouldMatch {
		what += " would match"
	}
	var out []string
	found := false
	for _, ps := range rt.Status.Parents {
		ns := rt.Namespace
		if ps.ParentRef.Namespace != nil {
			ns = string(*ps.ParentRef.Namespace)
		}
		if ps.ParentRef.Name != gw.Name || ns != string(*gw.Namespace) {
			continue
		}
		found = true
		for _, t := range []string{string(gwv1.RouteConditionAccepted), string(gwv1.RouteConditionResolvedRefs)} {
			c := meta.FindStatusCondition(ps.Conditions, t)
			switch {
			case c == nil:
				out = append(out, fmt.Sprintf("%s has no %s condition", what, t))
			case c.Status != "True":
				out = append(out, fmt.Sprintf("%s %s=%s (%s: %s)", what, t, c.Status, c.Reason, c.Message))
			}
		}
	}
	if !found {
		out = append(out, fmt.Sprintf("%s has no status from Gateway %s/%s (no controller took it)", what, *gw.Namespace, gw.Name))
	}
	return out
}

// wouldMatch evaluates the request against the route's rules with the
// one route matcher (golden/routing).
func wouldMatch(rt *gwv1.HTTPRoute, r Request) bool {
	var specs []routing.MatchSpec
	for _, rule := range rt.Spec.Rules {
		ms := rule.Matches
		if len(ms) == 0 {
			ms = []gwv1.HTTPRouteMatch{{}}
		}
		for _, m := range ms {
			specs = append(specs, controller.Match(m))
		}
	}
	var hosts []string
	for _, h := range rt.Spec.Hostnames {
		hosts = append(hosts, string(h))
	}
	route, err := routing.NewRoute(rt.Namespace+"/"+rt.Name, 0, hosts, specs)
	if err != nil {
		return false
	}
	b := &routing.Bind{Listeners: []*routing.Listener{routing.NewListener("", "", []*routing.Route{route})}}
	host := strings.ToLower(r.Host)
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	got, _ := b.Select(&routing.Request{Method: r.Method, Path: r.Path, Host: host, Query: r.Query}, func(name string) (string, bool) {
		v, ok := r.Headers[name]
		return v, ok
	})
	return got != nil
}

// policy is a policy resource read as unstructured.
type policy struct {
	kind, ns, name string
	refs           []target
	conditions     []condition
}

type target struct{ kind, name string }

type condition struct{ typ, status, reason, message string }

func (p policy) targets(kind, ns, name string) bool {
	if p.ns != ns {
		return false
	}
	for _, t := range p.refs {
		if t.kind == kind && t.name == name {
			return true
		}
	}
	return false
}

// unhealthy cites the policy's Accepted and Attached conditions that are
// not True, once each (every ancestor entry carries them).
func (p policy) unhealthy() []string {
	var out []string
	for _, c := range p.conditions {
		if (c.typ != "Accepted" && c.typ != "Attached") || c.status == "True" {
			continue
		}
		s := fmt.Sprintf("%s %s/%s %s=%s (%s: %s)", p.kind, p.ns, p.name, c.typ, c.status, c.reason, c.message)
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// listPolicies reads every policy of the known kinds; a kind the cluster
// does not serve is skipped.
func listPolicies(ctx context.Context, cl client.Client) ([]policy, error) {
	var out []policy
	var errs []error
	for _, gvk := range policyKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := cl.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			errs = append(errs, fmt.Errorf("listing %s: %w", gvk.Kind, err))
			continue
		}
		for _, u := range list.Items {
			p := policy{kind: gvk.Kind, ns: u.GetNamespace(), name: u.GetName()}
			refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "targetRefs")
			for _, r := range refs {
				m, _ := r.(map[string]any)
				k, _ := m["kind"].(string)
				n, _ := m["name"].(string)
				p.refs = append(p.refs, target{kind: k, name: n})
			}
			ancestors, _, _ := unstructured.NestedSlice(u.Object, "status", "ancestors")
			for _, a := range ancestors {
				am, _ := a.(map[string]any)
				conds, _, _ := unstructured.NestedSlice(am, "conditions")
				for _, c := range conds {
					cm, _ := c.(map[string]any)
					s := func(k string) string { v, _ := cm[k].(string); return v }
					p.conditions = append(p.conditions, condition{typ: s("type"), status: s("status"), reason: s("reason"), message: s("message")})
				}
			}
			out = append(out, p)
		}
	}
	return out, errors.Join(errs...)
}
