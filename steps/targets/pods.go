package targets

// The interfaces below are implemented by deployments whose proxy runs in
// pods of a cluster that the suite reaches (capabilities cluster and
// data-plane): they tell what the target knows of those pods and saw of
// them, which no trace or condition shows on its own.

// ClusterEnv is implemented by deployments whose proxy runs in a cluster
// pod: the identity that spec part 2.1 says every snapshot of that pod's
// traces carries as env.
type ClusterEnv interface {
	// ProxyEnv is the pod the scenario's traffic and traces go to, its
	// namespace, and the name of the Gateway it serves.
	ProxyEnv() (Env, error)
}

// Env is a proxy pod's identity, as the env object of a trace snapshot
// names it (podName, namespace, gateway).
type Env struct {
	PodName   string `json:"podName"`
	Namespace string `json:"namespace"`
	Gateway   string `json:"gateway"`
}

// ProgrammedObserver is implemented by deployments whose Gateway's
// proxy runs in pods: the target watched the Gateway from its creation,
// and looked at its proxy pods the moment it first read Programmed=True.
type ProgrammedObserver interface {
	// ProgrammedSeen is what the target saw then; an error when it never
	// saw the Gateway Programmed.
	ProgrammedSeen() (ProgrammedObservation, error)
}

// ProgrammedObservation is the Gateway's Programmed condition as the
// target first read it True, and the Gateway's proxy pods at that moment.
type ProgrammedObservation struct {
	// Programmed is the condition as first read with status True.
	Programmed Condition
	// ProxyReady tells whether a proxy pod of the Gateway was Ready,
	// read right after the condition.
	ProxyReady bool
	// Pods says what the proxy pods were doing (name, phase, readiness,
	// why a container waits), or that there were none.
	Pods string
}
