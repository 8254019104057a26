package container

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// NetworkGateway returns the gateway of the Docker network name (or id)
// when it is an address of this machine: where containers on that network
// (a kind cluster's nodes, and so their pods) reach services listening
// here. It returns "" when the daemon runs elsewhere, so no address of
// this machine is on the network.
func NetworkGateway(ctx context.Context, name string) (string, error) {
	p, err := DockerProvider()
	if err != nil {
		return "", err
	}
	defer p.Close()
	in, err := p.Client().NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("docker network %s: %w", name, err)
	}
	gw, _ := localGateway(in.Network.IPAM.Config)
	return gw, nil
}

// localGateway is the first gateway of cfgs, IPv4 ones first, that is an
// address of this machine: the daemon's end of the network, when the
// daemon shares this network namespace. A config with a subnet and no
// gateway (Docker's default bridge shows none) has Docker's default one,
// the subnet's first address.
func localGateway(cfgs []network.IPAMConfig) (string, bool) {
	local, _ := net.InterfaceAddrs()
	for _, v4 := range []bool{true, false} {
		for _, c := range cfgs {
			gw := c.Gateway
			if !gw.IsValid() && c.Subnet.IsValid() {
				gw = c.Subnet.Masked().Addr().Next()
			}
			if !gw.IsValid() || gw.Unmap().Is4() != v4 {
				continue
			}
			for _, a := range local {
				if pfx, ok := a.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(pfx.IP); ok && ip.Unmap() == gw.Unmap() {
						return gw.String(), true
					}
				}
			}
		}
	}
	return "", false
}
