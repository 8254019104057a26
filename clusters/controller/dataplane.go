package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
)

// DataPlane is the proxy the controller deploys for each Gateway of its
// classes. Without one (Options.DataPlane nil) the controller only writes
// status, and Programmed means "configuration accepted".
type DataPlane struct {
	// Image is the refproxy image, e.g. gwdiag/refproxy:dev.
	Image string
	// PullPolicy of the image; IfNotPresent when empty. Clusters without a
	// registry import the image and use Never.
	PullPolicy corev1.PullPolicy
	// Replicas of each Gateway's Deployment; 1 when zero.
	Replicas int32
}

// Labels and names of what the controller deploys for a Gateway.
const (
	// GatewayNameLabel is on the proxy pods: the CLI finds them by it.
	GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"
	// configHashAnnotation carries the hash of the config the pods were
	// last given, on the ConfigMap.
	configHashAnnotation = "gwdiag.dev/config-hash"
	// ConfigFile is the config's key in the ConfigMap and its file name in
	// the pod.
	ConfigFile = "config.yaml"
	// readinessPort is where the pods answer the kubelet's probe.
	readinessPort = 15021

	configDir = "/etc/refproxy"
)

// DataPlaneName is the name of a Gateway's Deployment, Service and
// ConfigMap.
func DataPlaneName(gateway string) string { return gateway + "-refproxy" }

// model gathers what gw's data plane is made from.
func (b base) model(ctx context.Context, gw *gwv1.Gateway) (Model, error) {
	m := Model{Gateway: gw, Endpoints: map[string][]string{}}
	var routes gwv1.HTTPRouteList
	if err := b.live.List(ctx, &routes); err != nil {
		return m, err
	}
	self := client.ObjectKeyFromObject(gw)
	attached := map[client.ObjectKey]bool{}
	for i := range routes.Items {
		r := &routes.Items[i]
		ar := AttachedRoute{Route: r}
		for _, ref := range r.Spec.ParentRefs {
			if key, ok := gatewayKey(r.Namespace, ref); !ok || key != self {
				continue
			}
			for _, l := range gw.Spec.Listeners {
				if !selects(ref, l) || slices.Contains(ar.Listeners, l.Name) {
					continue
				}
				ok, err := b.listenerTakes(ctx, gw, l, r.Namespace)
				if err != nil {
					return m, err
				}
				if ok {
					ar.Listeners = append(ar.Listeners, l.Name)
				}
			}
		}
		if len(ar.Listeners) == 0 {
			continue
		}
		attached[client.ObjectKeyFromObject(r)] = true
		m.Routes = append(m.Routes, ar)
		for _, rule := range r.Spec.Rules {
			for _, br := range rule.BackendRefs {
				ns := r.Namespace
				if br.Namespace != nil {
					ns = string(*br.Namespace)
				}
				if err := b.endpoints(ctx, ns, string(br.Name), ptr.Deref(br.Port, 0), m.Endpoints); err != nil {
					return m, err
				}
			}
		}
	}
	var policies v1alpha1.GatewayPolicyList
	if err := b.live.List(ctx, &policies); err != nil {
		return m, err
	}
	for _, p := range policies.Items {
		if Validate(p.Spec) != nil {
			continue // reported Invalid by the policy reconciler, applied nowhere
		}
		for _, t := range p.Spec.TargetRefs {
			if t.Kind == "Gateway" && string(t.Name) == gw.Name && p.Namespace == gw.Namespace ||
				t.Kind == "HTTPRoute" && attached[client.ObjectKey{Namespace: p.Namespace, Name: string(t.Name)}] {
				m.Policies = append(m.Policies, p)
				break
			}
		}
	}
	return m, nil
}

// endpoints adds the ready endpoints of Service ns/name's port to eps.
func (b base) endpoints(ctx context.Context, ns, name string, port gwv1.PortNumber, eps map[string][]string) error {
	key := ServicePortKey(ns, name, int32(port))
	if _, done := eps[key]; done {
		return nil
	}
	eps[key] = nil
	svc := &corev1.Service{}
	if err := b.live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		return client.IgnoreNotFound(err)
	}
	portName := ""
	found := false
	for _, sp := range svc.Spec.Ports {
		if sp.Port == int32(port) {
			portName, found = sp.Name, true
		}
	}
	if !found {
		return nil
	}
	var list discoveryv1.EndpointSliceList
	if err := b.live.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return err
	}
	for _, s := range list.Items {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, p := range s.Ports {
			if ptr.Deref(p.Name, "") != portName || p.Port == nil {
				continue
			}
			for _, e := range s.Endpoints {
				if !ptr.Deref(e.Conditions.Ready, true) {
					continue
				}
				for _, a := range e.Addresses {
					eps[key] = append(eps[key], fmt.Sprintf("%s:%d", a, *p.Port))
				}
			}
		}
	}
	slices.Sort(eps[key])
	return nil
}

// programmed is the Gateway's Programmed condition once its data plane is
// applied: True with a ready replica, else Pending (no replica ready yet)
// or NoResources (the Deployment cannot make its pods), with why.
type programmed struct {
	ok      bool
	reason  string
	message string
}

// applyDataPlane writes gw's ConfigMap, Deployment and Service and reports
// how far the Deployment has come.
func (r *gatewayReconciler) applyDataPlane(ctx context.Context, gw *gwv1.Gateway) (programmed, error) {
	dp := r.dataPlane
	m, err := r.model(ctx, gw)
	if err != nil {
		return programmed{}, err
	}
	cfg, err := Translate(m)
	if err != nil {
		return programmed{reason: string(gwv1.GatewayReasonInvalid), message: err.Error()}, nil
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return programmed{}, err
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:8])
	name := DataPlaneName(gw.Name)
	labels := map[string]string{GatewayNameLabel: gw.Name, "app.kubernetes.io/name": "refproxy", "app.kubernetes.io/managed-by": "gwdiag-reference-controller"}
	selector := map[string]string{GatewayNameLabel: gw.Name}
	// apply creates or updates o, gw's object of that kind: gw's labels,
	// what set writes, and gw as its controller.
	apply := func(kind string, o client.Object, set func()) error {
		o.SetName(name)
		o.SetNamespace(gw.Namespace)
		if _, err := controllerutil.CreateOrUpdate(ctx, r.client, o, func() error {
			o.SetLabels(labels)
			set()
			return controllerutil.SetControllerReference(gw, o, r.scheme)
		}); err != nil {
			return fmt.Errorf("%s %s/%s: %w", kind, gw.Namespace, name, err)
		}
		return nil
	}

	cm := &corev1.ConfigMap{}
	if err := apply("ConfigMap", cm, func() {
		cm.Annotations = map[string]string{configHashAnnotation: hash}
		cm.Data = map[string]string{ConfigFile: string(data)}
	}); err != nil {
		return programmed{}, err
	}

	svc := &corev1.Service{}
	if err := apply("Service", svc, func() {
		svc.Spec.Selector = selector
		var ports []corev1.ServicePort
		for _, l := range gw.Spec.Listeners {
			if !supportedProtocols[l.Protocol] || slices.ContainsFunc(ports, func(p corev1.ServicePort) bool { return p.Port == int32(l.Port) }) {
				continue
			}
			ports = append(ports, corev1.ServicePort{Name: string(l.Name), Port: int32(l.Port), TargetPort: intstr.FromInt32(int32(l.Port)), Protocol: corev1.ProtocolTCP})
		}
		if len(ports) == 0 { // a Service needs a port; the admin port is harmless
			ports = []corev1.ServicePort{{Name: "admin", Port: 15000, TargetPort: intstr.FromInt32(15000), Protocol: corev1.ProtocolTCP}}
		}
		svc.Spec.Ports = ports
	}); err != nil {
		return programmed{}, err
	}

	dep := &appsv1.Deployment{}
	if err := apply("Deployment", dep, func() {
		dep.Spec.Replicas = ptr.To(max(dp.Replicas, 1))
		dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
		// Never two versions of the config for long, and never no pod:
		// one new pod at a time, an old one kept until it is ready.
		dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}}
		dep.Spec.Template = r.podTemplate(gw, labels, name)
	}); err != nil {
		return programmed{}, err
	}
	return deploymentProgress(dep), nil
}

// podTemplate is the proxy pod: refproxy reading the ConfigMap (a changed
// config is picked up in place, by content, with no restart and no request
// dropped), its identity in the env for trace snapshots (spec 2.1), admin
// on loopback 15000, readiness on 15021.
func (r *gatewayReconciler) podTemplate(gw *gwv1.Gateway, labels map[string]string, name string) corev1.PodTemplateSpec {
	fieldEnv := func(env, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	var ports []corev1.ContainerPort
	for _, l := range gw.Spec.Listeners {
		if supportedProtocols[l.Protocol] && !slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == int32(l.Port) }) {
			ports = append(ports, corev1.ContainerPort{ContainerPort: int32(l.Port), Protocol: corev1.ProtocolTCP})
		}
	}
	ports = append(ports, corev1.ContainerPort{Name: "readiness", ContainerPort: readinessPort, Protocol: corev1.ProtocolTCP})
	pull := r.dataPlane.PullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(35)),
			EnableServiceLinks:            ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "refproxy",
				Image:           r.dataPlane.Image,
				ImagePullPolicy: pull,
				Args:            []string{"-f", configDir + "/" + ConfigFile, "--readiness-addr", fmt.Sprintf(":%d", readinessPort)},
				Env: []corev1.EnvVar{
					fieldEnv("POD_NAME", "metadata.name"),
					fieldEnv("POD_NAMESPACE", "metadata.namespace"),
					{Name: "GATEWAY_NAME", Value: gw.Name},
				},
				Ports: ports,
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(readinessPort)}},
					PeriodSeconds: 1, FailureThreshold: 3,
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: configDir, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}},
		},
	}
}

// deploymentProgress reads a Deployment's status as the Gateway's
// Programmed condition.
func deploymentProgress(dep *appsv1.Deployment) programmed {
	want := ptr.Deref(dep.Spec.Replicas, 1)
	if dep.Status.ReadyReplicas >= 1 {
		return programmed{ok: true, reason: string(gwv1.GatewayReasonProgrammed),
			message: fmt.Sprintf("Deployment %s/%s has %d of %d replicas ready", dep.Namespace, dep.Name, dep.Status.ReadyReplicas, want)}
	}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return programmed{reason: string(gwv1.GatewayReasonNoResources),
				message: fmt.Sprintf("Deployment %s/%s cannot create its pods: %s", dep.Namespace, dep.Name, c.Message)}
		}
	}
	return programmed{reason: string(gwv1.GatewayReasonPending),
		message: fmt.Sprintf("waiting for a ready replica of Deployment %s/%s (0 of %d ready)", dep.Namespace, dep.Name, want)}
}
