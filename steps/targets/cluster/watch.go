package cluster

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// changeFallback is how often a wait of the scenario reads again when no
// change was seen: the watches wake the waits; this only covers a watch
// that is down (it restarts at once, and after a failure a second later).
const changeFallback = time.Second

// watchNamespace watches what the scenario's waits read (its Gateway,
// routes, policies and pods) and tells d.changes of every event, until
// d.stopWatch (the deployment's Stop; ctx's cancel does not end them, as
// Configure's ctx may end before the deployment). A wait then reads once
// per change instead of polling the API server: with two scenarios at
// once, polls every 50 to 100 ms made about 50 of the 170 requests a
// second the local node's API server served during the cluster profile.
func (d *clusterDeployment) watchNamespace(ctx context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	d.stopWatch = func() {
		cancel()
		wg.Wait()
	}
	policies := &unstructured.UnstructuredList{}
	policies.SetGroupVersionKind(d.c.policy.GroupVersion().WithKind(d.c.policy.Kind + "List"))
	for _, list := range []client.ObjectList{&gwv1.GatewayList{}, &gwv1.HTTPRouteList{}, policies, &corev1.PodList{}} {
		wg.Go(func() { d.watch(ctx, list) })
	}
}

// watch keeps one watch of list's kind in the namespace open until ctx
// ends, telling every event; it restarts a watch the server ended. Each
// restart tells a change too, since events may have passed meanwhile.
func (d *clusterDeployment) watch(ctx context.Context, list client.ObjectList) {
	for ctx.Err() == nil {
		w, err := d.c.client.Watch(ctx, list, client.InNamespace(d.ns))
		if err != nil {
			// A kind the cluster does not serve (a policy CRD not
			// installed) or a server that is away: the waits' fallback
			// reads meanwhile.
			select {
			case <-ctx.Done():
			case <-time.After(changeFallback):
			}
			continue
		}
		d.changes.Notify()
		for ev := range w.ResultChan() {
			if ev.Type != watch.Bookmark {
				d.changes.Notify()
			}
		}
		w.Stop()
	}
}
