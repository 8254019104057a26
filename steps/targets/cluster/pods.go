package cluster

import (
	"context"
	"fmt"
	"time"

	kubepods "github.com/gwdiag/gwdiag/clusters/kube/pods"
	"github.com/gwdiag/gwdiag/steps/await"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// observeProgrammed waits, from the Gateway's creation, until it reads the
// Gateway Programmed=True at its current generation (reading it at each
// change in the namespace), and at once looks for
// a Ready proxy pod: what it saw is the deployment's ProgrammedSeen. A
// controller that says Programmed while its proxy still starts is caught
// here; the waits of serve, which go on until a proxy pod is ready, would
// hide it.
func (d *clusterDeployment) observeProgrammed(ctx context.Context) error {
	var cond *targets.Condition
	timeout := time.Duration(d.c.opts.ServeTimeout)
	err := await.UntilChanged(ctx, timeout, changeFallback, d.changes.Next, func(ctx context.Context) (bool, string, error) {
		conds, seen := d.readGateway(ctx)
		cond = programmed(conds)
		return cond != nil, seen, nil
	})
	if err != nil {
		return fmt.Errorf("Gateway %s/%s not Programmed: %w", d.ns, clusterGatewayName, err)
	}
	seen := &targets.ProgrammedObservation{Programmed: *cond}
	// One read decides; a failed read is retried briefly, since an
	// answer seconds later would no longer say what the Gateway claimed.
	for attempt := 0; ; attempt++ {
		readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		pod, why, err := d.proxyPod(readCtx)
		cancel()
		if err == nil {
			seen.ProxyReady = pod != nil
			if pod != nil {
				seen.Pods = kubepods.Describe(pod)
			} else {
				seen.Pods = why
			}
			break
		}
		if attempt == 2 {
			d.programmedErr = fmt.Errorf("Gateway %s/%s turned Programmed, but its proxy pods could not be listed then: %w", d.ns, clusterGatewayName, err)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.programmed = seen
	return nil
}

// ProgrammedSeen implements targets.ProgrammedObserver.
func (d *clusterDeployment) ProgrammedSeen() (targets.ProgrammedObservation, error) {
	switch {
	case d.programmedErr != nil:
		return targets.ProgrammedObservation{}, d.programmedErr
	case d.programmed == nil:
		return targets.ProgrammedObservation{}, errNoDataPlane
	}
	return *d.programmed, nil
}

// ProxyEnv implements targets.ClusterEnv: the proxy pod the forwards go
// to, the scenario's namespace and its Gateway.
func (d *clusterDeployment) ProxyEnv() (targets.Env, error) {
	if !d.serving || d.proxyPodName == "" {
		return targets.Env{}, errNoDataPlane
	}
	return targets.Env{PodName: d.proxyPodName, Namespace: d.ns, Gateway: clusterGatewayName}, nil
}
