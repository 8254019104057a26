// Package pods says which pod serves and why one does not: the one rule of
// the project for picking a Gateway's proxy pod (the first ready one by
// name) and for describing a pod that is not ready. The CLI's cluster mode
// and the conformance suite's cluster target both use it, so they pick the
// same pod; it imports only the core API types, so the CLI may import it.
package pods

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// FirstReady returns the first pod by name that is Ready, or nil and
// Describe of each pod, joined with "; ". It sorts pods in place.
func FirstReady(pods []corev1.Pod) (*corev1.Pod, string) {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var seen []string
	for i := range pods {
		if Ready(&pods[i]) {
			return &pods[i], ""
		}
		seen = append(seen, Describe(&pods[i]))
	}
	return nil, strings.Join(seen, "; ")
}

// Ready tells whether p runs, is not being deleted, and is Ready.
func Ready(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Describe says in a few words why p is not ready: its phase, and why
// its containers wait, ended or are not ready.
func Describe(p *corev1.Pod) string {
	phase := string(p.Status.Phase)
	switch {
	case p.DeletionTimestamp != nil:
		phase = "Terminating"
	case phase == "":
		phase = "Unknown"
	}
	var why []string
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			why = append(why, strings.TrimSpace(fmt.Sprintf("container %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)))
		case cs.State.Terminated != nil:
			why = append(why, strings.TrimSpace(fmt.Sprintf("container %s terminated: %s (exit %d) %s", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)))
		case !cs.Ready:
			why = append(why, fmt.Sprintf("container %s not ready, %d restarts", cs.Name, cs.RestartCount))
		}
	}
	if phase == string(corev1.PodRunning) && p.DeletionTimestamp == nil {
		phase = "Running, not ready"
	}
	if len(why) == 0 {
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				why = append(why, fmt.Sprintf("%s: %s", c.Type, c.Message))
			}
		}
	}
	if len(why) == 0 {
		return p.Name + ": " + phase
	}
	return p.Name + ": " + phase + " (" + strings.Join(why, ", ") + ")"
}
