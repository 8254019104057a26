package container

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/network"
)

// TestLocalGateway: a network's gateway counts only when it is an address
// of this machine, IPv4 before IPv6 (kind's network has both).
func TestLocalGateway(t *testing.T) {
	gw := func(s ...string) []network.IPAMConfig {
		var out []network.IPAMConfig
		for _, a := range s {
			c := network.IPAMConfig{}
			if a != "" {
				c.Gateway = netip.MustParseAddr(a)
			}
			out = append(out, c)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		cfgs []network.IPAMConfig
		want string
	}{
		{"local IPv4", gw("127.0.0.1"), "127.0.0.1"},
		{"remote daemon: not an address here", gw("192.0.2.1"), ""},
		{"IPv4 before IPv6", gw("::1", "127.0.0.1"), "127.0.0.1"},
		{"the local one of several", gw("192.0.2.1", "127.0.0.1"), "127.0.0.1"},
		{"no gateway", gw(""), ""},
		{"subnet without a gateway: its first address", []network.IPAMConfig{{Subnet: netip.MustParsePrefix("127.0.0.0/8")}}, "127.0.0.1"},
		{"no config", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := localGateway(tc.cfgs)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("localGateway: got %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

// TestNetworkGateway reads the gateway of Docker's default bridge, which
// a daemon on this machine has on docker0: the address `ip addr` shows
// there.
func TestNetworkGateway(t *testing.T) {
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("no Docker daemon here: %v", err)
	}
	out, err := exec.Command("ip", "-4", "-o", "addr", "show", "docker0").Output()
	if err != nil {
		t.Skipf("no docker0 here (a remote daemon?): %v", err)
	}
	got, err := NetworkGateway(context.Background(), "bridge")
	if err != nil {
		t.Fatal(err)
	}
	if got == "" || !strings.Contains(string(out), " "+got+"/") {
		t.Errorf("NetworkGateway(bridge): got %q, want docker0's address (%s)", got, strings.TrimSpace(string(out)))
	}
	if _, err := NetworkGateway(context.Background(), "gwdiag-no-such-network"); err == nil || !strings.Contains(err.Error(), "gwdiag-no-such-network") {
		t.Errorf("NetworkGateway of a missing network: got %v, want an error naming it", err)
	}
}
