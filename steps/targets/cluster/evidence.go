package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/steps/targets"
)

// maxPodLog bounds each pod's log a bundle keeps.
const maxPodLog = 1 << 20

// applied is a resource the scenario created, by kind and name.
type applied struct {
	gvk  schema.GroupVersionKind
	name string
}

var _ targets.EvidenceKeeper = (*clusterDeployment)(nil)

// Evidence implements targets.EvidenceKeeper: resources.yaml, every
// resource the scenario applied as the API server holds it now (status
// included, managed fields left out), and with a data plane each pod's
// log, pods/<name>.log.
func (d *clusterDeployment) Evidence(ctx context.Context) (map[string][]byte, error) {
	files := map[string][]byte{}
	var docs []string
	var errs []error
	for _, a := range d.applied {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(a.gvk)
		if err := d.c.client.Get(ctx, client.ObjectKey{Namespace: d.ns, Name: a.name}, u); err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", a.gvk.Kind, d.ns, a.name, err))
			continue
		}
		u.SetManagedFields(nil)
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, string(b))
	}
	files["resources.yaml"] = []byte(strings.Join(docs, "---\n"))
	if d.serving {
		errs = append(errs, d.podLogs(ctx, files))
	}
	return files, errors.Join(errs...)
}

// podLogs adds the log of every pod of the scenario's namespace.
func (d *clusterDeployment) podLogs(ctx context.Context, files map[string][]byte) error {
	cs, err := kubernetes.NewForConfig(d.c.cfg)
	if err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := d.c.client.List(ctx, pods, client.InNamespace(d.ns)); err != nil {
		return fmt.Errorf("pods of %s: %w", d.ns, err)
	}
	var errs []error
	limit := int64(maxPodLog)
	for _, p := range pods.Items {
		b, err := cs.CoreV1().Pods(d.ns).GetLogs(p.Name, &corev1.PodLogOptions{LimitBytes: &limit}).DoRaw(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("log of pod %s/%s: %w", d.ns, p.Name, err))
			continue
		}
		files["pods/"+p.Name+".log"] = b
	}
	return errors.Join(errs...)
}
