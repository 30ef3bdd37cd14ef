package frontend

import (
	"fmt"
	"net"
	"strings"
)

// IPFilter holds allow_ips: single addresses and CIDR networks. Empty, it
// allows every address.
type IPFilter struct {
	nets []*net.IPNet
}

// ParseAllowIPs parses a comma-separated allow_ips list.
func ParseAllowIPs(s string) (*IPFilter, error) {
	f := &IPFilter{}
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			ip := net.ParseIP(part)
			if ip == nil {
				return nil, fmt.Errorf("allow_ips: bad address %q", part)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			f.nets = append(f.nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(part)
		if err != nil {
			return nil, fmt.Errorf("allow_ips: %w", err)
		}
		f.nets = append(f.nets, n)
	}
	return f, nil
}

// Allowed reports whether a client at a may connect.
func (f *IPFilter) Allowed(a net.Addr) bool {
	if len(f.nets) == 0 {
		return true
	}
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip := ta.IP
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	for _, n := range f.nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
