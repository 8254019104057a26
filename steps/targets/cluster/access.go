package cluster

import (
	"errors"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gwdiag/gwdiag/steps/targets"
)

// Scenario is what Configure returns on this target: a scenario's
// Deployment, and where its objects live, for tools that reach the
// cluster on their own (the CLI's end-to-end tests run gwdiag against it).
type Scenario interface {
	targets.Deployment
	// Namespace is the scenario's namespace (gwdiag-xxxxx).
	Namespace() string
	// Gateway is the name of the scenario's Gateway.
	Gateway() string
}

// Namespace implements Scenario.
func (d *clusterDeployment) Namespace() string { return d.ns }

// Gateway implements Scenario.
func (d *clusterDeployment) Gateway() string { return clusterGatewayName }

// WriteKubeconfig writes a kubeconfig file for the cluster the target
// runs on, with the credentials the target uses (cluster-admin on the
// local API server and the local node), so that a separate process, such
// as the gwdiag binary, reaches the same cluster. The file refers to the
// cluster's certificate files where the target's config does: it is valid
// until Stop. Call it after Start.
func (c *Cluster) WriteKubeconfig(path string) error {
	if c.cfg == nil {
		return errors.New("cluster target: not started")
	}
	return clientcmd.WriteToFile(kubeconfigFor(c.cfg), path)
}

// kubeconfigFor is the kubeconfig of cfg, one context named "gwdiag".
func kubeconfigFor(cfg *rest.Config) clientcmdapi.Config {
	const name = "gwdiag"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		Username:              cfg.Username,
		Password:              cfg.Password,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return *kc
}
