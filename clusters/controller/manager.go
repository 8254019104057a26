package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
)

// ControllerName is the GatewayClass spec.controllerName this controller
// serves, and the controllerName of the route and policy statuses it writes.
const ControllerName gwv1.GatewayController = "gwdiag.dev/reference-controller"

// NewScheme returns a scheme with the core, Gateway API and policy types.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gwv1.Install, gwv1beta1.Install, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NewClient is a client for cfg's cluster that knows NewScheme's types
// and can also watch them.
func NewClient(cfg *rest.Config) (client.WithWatch, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme})
}

// Options configure the controller; the zero value works.
type Options struct {
	// ControllerName overrides ControllerName.
	ControllerName gwv1.GatewayController
	// Logger receives the reconcilers' logs; zero discards them.
	Logger logr.Logger
	// DataPlane, when set, is deployed for each Gateway (a Deployment,
	// Service and ConfigMap), and Programmed waits for a ready replica.
	DataPlane *DataPlane
	// SupportedFeatures are written, sorted, to the status.supportedFeatures
	// of the GatewayClasses this controller accepts: the features its
	// data plane claims, which a conformance suite reads when the user
	// claims none (gwdiag's cluster profile does, as the Gateway API suite
	// does with its own feature names).
	SupportedFeatures []string
}

func (o Options) name() gwv1.GatewayController {
	if o.ControllerName == "" {
		return ControllerName
	}
	return o.ControllerName
}

// Setup registers the reconcilers with mgr.
func Setup(mgr ctrl.Manager, o Options) error {
	b := base{client: mgr.GetClient(), live: mgr.GetAPIReader(), name: o.name(), scheme: mgr.GetScheme(), dataPlane: o.DataPlane}
	features := slices.Sorted(slices.Values(o.SupportedFeatures))
	return errors.Join(
		(&gatewayClassReconciler{base: b, features: slices.Compact(features)}).setup(mgr),
		(&gatewayReconciler{b}).setup(mgr),
		(&routeReconciler{b}).setup(mgr),
		(&policyReconciler{b}).setup(mgr),
	)
}

// Run starts a manager with the reconcilers against cfg and returns once
// its caches are synced; stop stops it and waits until it has.
func Run(ctx context.Context, cfg *rest.Config, o Options) (stop func(), err error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		// client-go's default (5 requests a second, bursts of 10) throttles
		// the reconcilers, which read live and write several objects per
		// Gateway: a scenario's status and data plane waited on the client.
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = 200, 400
	}
	log := o.Logger
	if log.GetSink() == nil {
		log = DiscardLogger()
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Several managers run in one test process; controller names only
		// need to be unique for metrics, which are off.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("controller manager: %w", err)
	}
	if err := Setup(mgr, o); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		err := <-done
		return nil, fmt.Errorf("controller caches did not sync: %w", errors.Join(ctx.Err(), err))
	}
	return func() {
		cancel()
		<-done
	}, nil
}

// base is what every reconciler shares: the cached client for watches and
// writes, and a live reader for the objects a decision depends on (the
// cache may not have seen an object created a moment ago).
type base struct {
	client    client.Client
	live      client.Reader
	name      gwv1.GatewayController
	scheme    *runtime.Scheme
	dataPlane *DataPlane
}

// DiscardLogger drops every log line. Unlike logr.Discard, its sink is not
// nil, which controller-runtime would take as "unset" and replace with its
// global logger.
func DiscardLogger() logr.Logger {
	return funcr.New(func(string, string) {}, funcr.Options{})
}
