package config

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// settingRefused are the config settings that would change what refproxy
// serves: it refuses them rather than serve something else.
var settingRefused = map[string]string{
	"xdsAddress":      "configuration from an xDS control plane",
	"xdsAuthToken":    "configuration from an xDS control plane",
	"localXdsPath":    "configuration from a local xDS file",
	"customFunctions": "custom CEL functions",
}

// settingIgnored are the config settings refproxy accepts and does not act
// on, and why: none changes which requests are served or what they get.
var settingIgnored = map[string]string{
	"metrics":                          "refproxy serves no Prometheus metrics",
	"histograms":                       "refproxy serves no Prometheus metrics",
	"statsAddr":                        "refproxy serves no Prometheus metrics",
	"enableIpv6":                       "refproxy's binds listen on --bind-host",
	"dns":                              "refproxy uses the system resolver",
	"workerThreads":                    "Go schedules refproxy's goroutines",
	"connectionTerminationDeadline":    "refproxy drains connections for up to 30s on shutdown",
	"connectionMinTerminationDeadline": "refproxy drains connections for up to 30s on shutdown",
	"backend":                          "refproxy's backend connection pool is its own",
	"hbone":                            "refproxy implements no HBONE tunnels",
	"caAddress":                        "refproxy implements no TLS",
	"caAuthToken":                      "refproxy implements no TLS",
	"spiffe":                           "refproxy implements no TLS",
	"trustDomain":                      "refproxy implements no mesh identity",
	"additionalTrustDomains":           "refproxy implements no mesh identity",
	"skipValidateTrustDomain":          "refproxy implements no mesh identity",
	"serviceAccount":                   "refproxy implements no mesh identity",
	"clusterId":                        "refproxy implements no mesh identity",
	"network":                          "refproxy implements no mesh identity",
	"namespace":                        "refproxy names standalone gateways in namespace default",
	"gateway":                          "refproxy names standalone gateways bind/<port>",
	"database":                         "refproxy has no UI or budgets to store",
	"storage":                          "refproxy has no UI to store",
	"session":                          "refproxy keeps no sessions (MCP is not implemented)",
	"mcp":                              "MCP is not implemented by refproxy",
	"modelCatalog":                     "refproxy computes no LLM costs",
	"standardAttributes":               "refproxy writes no request logs to a database",
}

// decodeField takes the settings refproxy does not act on: refused or
// ignored by the tables above.
func (*Settings) decodeField(d *decoder, key, val *yaml.Node, path string, _ []string) (bool, error) {
	if why, ok := settingRefused[key.Value]; ok {
		if !unset(val) && !(val.Kind == yaml.ScalarNode && strings.TrimSpace(val.Value) == "") {
			d.refuse(path, why)
		}
		return true, nil
	}
	if why, ok := settingIgnored[key.Value]; ok {
		if !unset(val) {
			d.ignore(path, why)
		}
		return true, nil
	}
	return false, nil
}

// decodeField ignores the logging settings refproxy does not act on.
func (*Logging) decodeField(d *decoder, key, val *yaml.Node, path string, _ []string) (bool, error) {
	switch key.Value {
	case "fields", "database":
		if !unset(val) {
			d.ignore(path, "refproxy's logs have fields of their own")
		}
		return true, nil
	}
	return false, nil
}

func (l *LogLevel) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode {
		if n.Tag != "!!null" {
			*l = LogLevel{n.Value}
		}
		return nil
	}
	var s []string
	if err := d.decode(n, refValue(&s), path, segs); err != nil {
		return err
	}
	*l = s
	return nil
}
