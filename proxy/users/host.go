package users

import (
	"net"
	"strings"
)

// MatchHost reports whether an account's host part, pattern, admits a
// client from address host (an IP address, as the listener sees it), the
// way the server matches it: '%' and '_' are wildcards ('\' escapes them),
// "ip/netmask" matches an IPv4 network, case does not matter, and a
// loopback client is "localhost" as well as its address (the server's
// name for 127.0.0.1 and ::1). No other name is resolved: an account
// for a host name matches no client, as with skip_name_resolve.
func MatchHost(pattern, host string) bool {
	host = plainIP(host)
	if pattern == "" || pattern == "%" {
		return true
	}
	if ip, mask, ok := strings.Cut(pattern, "/"); ok {
		return matchMask(ip, mask, host)
	}
	if like(strings.ToLower(pattern), strings.ToLower(host)) {
		return true
	}
	if a := net.ParseIP(host); a != nil && a.IsLoopback() {
		return like(strings.ToLower(pattern), "localhost")
	}
	return false
}

// plainIP strips an IPv4-mapped IPv6 address to its IPv4 form.
func plainIP(host string) string {
	if a := net.ParseIP(host); a != nil && strings.Contains(host, ":") {
		if v4 := a.To4(); v4 != nil {
			return v4.String()
		}
	}
	return host
}

// matchMask matches "ip/netmask" (IPv4 only, as the server's).
func matchMask(ip, mask, host string) bool {
	n, m, a := net.ParseIP(ip).To4(), net.ParseIP(mask).To4(), net.ParseIP(host).To4()
	if n == nil || m == nil || a == nil {
		return false
	}
	for i := range 4 {
		if a[i]&m[i] != n[i] {
			return false
		}
	}
	return true
}

// like is SQL LIKE with the escape character '\'.
func like(pat, s string) bool {
	for len(pat) > 0 {
		switch c := pat[0]; {
		case c == '%':
			for len(pat) > 0 && pat[0] == '%' {
				pat = pat[1:]
			}
			if pat == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if like(pat, s[i:]) {
					return true
				}
			}
			return false
		case c == '_':
			if s == "" {
				return false
			}
			pat, s = pat[1:], s[1:]
		default:
			if c == '\\' && len(pat) > 1 {
				pat = pat[1:]
				c = pat[0]
			}
			if s == "" || s[0] != c {
				return false
			}
			pat, s = pat[1:], s[1:]
		}
	}
	return s == ""
}

// hostRank orders accounts as the server tries them: a host without
// wildcards before any with one, then the longer the text before the
// first wildcard the earlier; '%' (or no host) last.
func hostRank(pattern string) int {
	i := strings.IndexAny(pattern, "%_")
	if i < 0 {
		return 1 << 16
	}
	return i
}
