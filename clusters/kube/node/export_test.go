package node

// WithMachineLockHeld marks a start whose caller holds LockMachine: a test
// that compares the machine before and after a node holds the lock around
// both reads, so that no other node runs in between.
func WithMachineLockHeld(o ClusterOptions) ClusterOptions {
	o.lockHeld = true
	return o
}
