package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(name string, phase corev1.PodPhase, ready bool, mut ...func(*corev1.Pod)) corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
	for _, m := range mut {
		m(&p)
	}
	return p
}

func TestFirstReady(t *testing.T) {
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	waiting := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present"}}}}
	}
	tests := []struct {
		name     string
		pods     []corev1.Pod
		want     string
		whyNoPod string
	}{
		{"first ready by name", []corev1.Pod{pod("b", corev1.PodRunning, true), pod("a", corev1.PodRunning, true)}, "a", ""},
		{"not ready skipped", []corev1.Pod{pod("a", corev1.PodRunning, false), pod("b", corev1.PodRunning, true)}, "b", ""},
		{"terminating skipped", []corev1.Pod{pod("a", corev1.PodRunning, true, terminating), pod("b", corev1.PodRunning, true)}, "b", ""},
		{"none ready says why", []corev1.Pod{pod("b", corev1.PodPending, false, waiting), pod("a", corev1.PodRunning, true, terminating)}, "",
			"a: Terminating; b: Pending (container proxy waiting: ErrImageNeverPull not present)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, why := FirstReady(tt.pods)
			got := ""
			if p != nil {
				got = p.Name
			}
			if got != tt.want || why != tt.whyNoPod {
				t.Errorf("FirstReady: got %q, %q; want %q, %q", got, why, tt.want, tt.whyNoPod)
			}
		})
	}
}
