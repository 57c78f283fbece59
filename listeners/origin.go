package listeners

import (
	"net"
	"net/netip"
	"os"
	"strings"
)

// originPolicy decides which browser pages may open a ws or wss connection
// and which of them are the broker's own (trusted). A foreign page is let
// in, unless AllowedOrigins restricts it, but core hears of it
// (CrossOriginer), so the anonymous-on-loopback rule never serves a page
// the operator merely happens to visit.
//
// Trusted: a request without an Origin (not a browser); a same-origin page
// on a host name no other site can take over (see rebindSafe); an origin
// of TrustedOrigins (the dashboard's); an origin the operator listed in
// AllowedOrigins (except "*", which lists nobody).
type originPolicy struct {
	listed    []string // AllowedOrigins without "*": exact or "scheme://*.domain"
	anyOrigin bool     // AllowedOrigins is empty or holds "*": foreign pages may connect
	trusted   []string // TrustedOrigins
	hostname  string   // this machine's name, lower case; "" if unknown
}

func newOriginPolicy(o *Options) *originPolicy {
	p := &originPolicy{trusted: o.TrustedOrigins, anyOrigin: len(o.AllowedOrigins) == 0}
	for _, a := range o.AllowedOrigins {
		if a == "*" {
			p.anyOrigin = true
			continue
		}
		p.listed = append(p.listed, a)
	}
	if h, err := os.Hostname(); err == nil {
		p.hostname = strings.ToLower(h)
	}
	return p
}

// check classifies the Origin header of a request for Host: ok says
// whether the page may connect, cross is the Origin when the page is
// foreign and "" when it is trusted.
func (p *originPolicy) check(origin, host string) (cross string, ok bool) {
	switch {
	case origin == "":
		return "", true // not a browser: origins protect browsers' users only
	case p.sameOrigin(origin, host), containsFold(p.trusted, origin), p.isListed(origin):
		return "", true
	case p.anyOrigin:
		return origin, true
	}
	return origin, false
}

// isListed reports whether the operator named origin in AllowedOrigins,
// exactly or by a wildcard host ("https://*.example.com").
func (p *originPolicy) isListed(origin string) bool {
	if containsFold(p.listed, origin) {
		return true
	}
	scheme, host, ok := parseOrigin(origin)
	if !ok {
		return false
	}
	host = strings.ToLower(host)
	for _, a := range p.listed {
		aScheme, domain, ok := strings.Cut(a, "://*.")
		if ok && strings.EqualFold(aScheme, scheme) && strings.HasSuffix(host, "."+strings.ToLower(domain)) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether the page at origin is served from the host
// and port the request went to (Host), and that host is one no other site
// can take over. The scheme does not count: paho-mqtt for Python sends
// "https://host:port" over ws too, and behind a proxy that ends TLS the
// listener cannot tell. A Host without a port was reached on a default
// port, 80 or 443, which is all the listener knows of it behind a proxy.
func (p *originPolicy) sameOrigin(origin, host string) bool {
	scheme, hostport, ok := parseOrigin(origin)
	if !ok {
		return false
	}
	oHost, oPort := splitHost(hostport)
	if oPort == "" {
		switch strings.ToLower(scheme) {
		case "http", "ws":
			oPort = "80"
		case "https", "wss":
			oPort = "443"
		default:
			return false
		}
	}
	rHost, rPort := splitHost(host)
	if !strings.EqualFold(oHost, rHost) {
		return false
	}
	if rPort == "" {
		if oPort != "80" && oPort != "443" {
			return false
		}
	} else if oPort != rPort {
		return false
	}
	return p.rebindSafe(rHost)
}

// rebindSafe reports whether host names this machine in a way a foreign
// site cannot borrow. A page from evil.example can point evil.example at
// 127.0.0.1 (DNS rebinding) and then be same-origin with a local broker;
// it cannot do that with an IP address, localhost or the machine's own
// name. Other names are trusted when the operator lists their origin.
func (p *originPolicy) rebindSafe(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || (p.hostname != "" && host == p.hostname)
}

// parseOrigin splits an Origin header, "scheme://host[:port]", into its
// scheme and host[:port]; "null" and anything with a path, query or user
// are not origins of a page on a host.
func parseOrigin(origin string) (scheme, hostport string, ok bool) {
	scheme, hostport, ok = strings.Cut(origin, "://")
	if !ok || scheme == "" || hostport == "" || strings.ContainsAny(hostport, "/?#@ ") {
		return "", "", false
	}
	return scheme, hostport, true
}

// splitHost splits "host:port", "[v6]:port", "host", "[v6]" or a bare IPv6
// address into host (without brackets) and port ("" when there is none).
// Both sides of a same-origin check go through it, so the unbracketed
// "::1:8083" paho-mqtt sends for IPv6 compares equal to itself.
func splitHost(hostport string) (host, port string) {
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return hostport, ""
		}
		return hostport[1:end], strings.TrimPrefix(hostport[end+1:], ":")
	}
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && strings.Count(hostport, ":") > 1 && isPort(hostport[i+1:]) {
		if _, err := netip.ParseAddr(hostport); err != nil {
			return hostport[:i], hostport[i+1:]
		}
	}
	return hostport, ""
}

func isPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
