package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

// This file is the pool's dial policy: Register dials a worker's address
// only when Config.AllowAddr allows every IP it stands for, and then dials
// that IP (a name is resolved once, here: what was checked is what is
// dialled, not a second answer of the resolver).

// resolveTimeout bounds the lookup of a worker address that is a name.
const resolveTimeout = 2 * time.Second

// allowedAddr checks worker id's address against the dial policy and
// returns what to dial: host:port with an IP. Nothing is dialled here.
func (p *Pool) allowedAddr(ctx context.Context, id, addr string) (string, error) {
	refused := func(format string, a ...any) error {
		return errs.New(errs.WorkerAddressRefused, "register %s: address %q: %s", id, addr, fmt.Sprintf(format, a...))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", refused("want host:port (%v)", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", refused("the port must be a number in 1..65535")
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		if host == "" || len(host) > 253 {
			return "", refused("want an IP or a host name")
		}
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		defer cancel()
		ips, err = net.DefaultResolver.LookupNetIP(rctx, "ip", host)
		if err != nil || len(ips) == 0 {
			return "", refused("it does not resolve (%v)", err)
		}
	}
	allow := p.cfg.AllowAddr
	if allow == nil {
		allow = LoopbackOnly
	}
	for _, ip := range ips {
		if err := allow(id, ip.Unmap()); err != nil {
			return "", refused("%v", err)
		}
	}
	return net.JoinHostPort(ips[0].Unmap().String(), port), nil
}

// LoopbackOnly is the dial policy that allows loopback addresses only.
func LoopbackOnly(_ string, ip netip.Addr) error {
	if !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address: the gateway dials only loopback workers unless sluice serve --worker-cidrs lists their network", ip)
	}
	return nil
}

// AllowCIDRs is the dial policy of sluice serve --worker-cidrs: an IP
// inside one of prefixes.
func AllowCIDRs(prefixes []netip.Prefix) func(string, netip.Addr) error {
	return func(_ string, ip netip.Addr) error {
		for _, pf := range prefixes {
			if pf.Contains(ip) {
				return nil
			}
		}
		return fmt.Errorf("%s is outside sluice serve --worker-cidrs %s: add the workers' network to it", ip, formatPrefixes(prefixes))
	}
}

func formatPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strconv.Quote(strings.Join(s, ","))
}

// ParseCIDRs parses a comma-separated --worker-cidrs list (a bare IP is
// its own /32 or /128).
func ParseCIDRs(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if pf, err := netip.ParsePrefix(f); err == nil {
			out = append(out, pf.Masked())
			continue
		}
		ip, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("--worker-cidrs: %q is neither a CIDR like 10.0.0.0/8 nor an IP", f)
		}
		out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--worker-cidrs: empty: list the workers' networks, e.g. 127.0.0.0/8,::1/128")
	}
	return out, nil
}
