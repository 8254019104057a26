// Command pause is the sandbox ("pause") container of the local node's
// pods: it holds the pod's namespaces and waits, as registry.k8s.io/pause
// does, until it is told to stop. It is built static and packed into an
// image locally, since no registry is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
