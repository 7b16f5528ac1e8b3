package reactions

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrRefusedAddress reports an outbound call to an address the Outbound
// policy refuses.
var ErrRefusedAddress = errors.New("reactions: address refused by the outbound policy")

// Outbound is the policy for the addresses reactions may call. Calls go
// out from the server, so a target chosen by a client could otherwise
// reach what only the server can: its own admin ports, the cloud's
// metadata service, other hosts on its network (server-side request
// forgery). By default an Outbound refuses loopback, link-local (which
// includes 169.254.169.254, the usual metadata address), unspecified and
// multicast addresses and the addresses in Own; Allow lets chosen ones
// through. The check applies to the address of every connection after DNS
// resolution, so a name cannot be pointed at a refused address later.
// Private ranges (10/8, 192.168/16, ...) are not refused by default: an
// operator whose server sits in such a network and must not reach it lists
// what is allowed and refuses the rest by running behind an egress proxy or
// firewall.
type Outbound struct {
	// Allow lists prefixes that are allowed even when refused by
	// default (127.0.0.1/32 for a receiver on the same host).
	Allow []netip.Prefix
	// AllowHosts lists host names (compared ignoring case) whose
	// addresses, whatever they resolve to, are allowed.
	AllowHosts []string
	// Own are the server's own addresses, refused unless allowed.
	Own []netip.Addr
	// AllowAll turns the policy off (for tests and trusted setups).
	AllowAll bool
}

// ParseAllow parses a comma-separated list of CIDR prefixes, addresses and
// host names into an Outbound's Allow and AllowHosts.
func ParseAllow(list string) (prefixes []netip.Prefix, hosts []string, err error) {
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case strings.Contains(item, "/"):
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, nil, fmt.Errorf("outbound allow list: %q is not a CIDR prefix", item)
			}
			prefixes = append(prefixes, p.Masked())
		default:
			if a, err := netip.ParseAddr(item); err == nil {
				prefixes = append(prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			} else if len(item) > 253 || strings.ContainsAny(item, " :@") {
				return nil, nil, fmt.Errorf("outbound allow list: %q is not an address or host name", item)
			} else {
				hosts = append(hosts, strings.ToLower(item))
			}
		}
	}
	return prefixes, hosts, nil
}

// hostAllowed reports whether host is listed in AllowHosts.
func (o *Outbound) hostAllowed(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range o.AllowHosts {
		if h == host {
			return true
		}
	}
	return false
}

// CheckAddr returns an error wrapping ErrRefusedAddress when a connection
// to a may not be made for host.
func (o *Outbound) CheckAddr(host string, a netip.Addr) error {
	if o == nil || o.AllowAll || o.hostAllowed(host) {
		return nil
	}
	a = a.Unmap()
	for _, p := range o.Allow {
		if p.Contains(a) {
			return nil
		}
	}
	why := ""
	switch {
	case a.IsLoopback():
		why = "a loopback address"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		why = "a link-local address (such as a cloud metadata service)"
	case a.IsUnspecified():
		why = "the unspecified address"
	case a.IsMulticast():
		why = "a multicast address"
	}
	for _, own := range o.Own {
		if own.Unmap() == a {
			why = "an address of this server"
		}
	}
	if why != "" {
		return fmt.Errorf("%s is %s, which the server's outbound policy refuses: %w", a, why, ErrRefusedAddress)
	}
	return nil
}

// CheckURL checks the host of u: an address directly, a name by resolving
// it (within 2 s; a name that does not resolve now passes, as it is checked
// again at every connection).
func (o *Outbound) CheckURL(ctx context.Context, u *url.URL) error {
	if o == nil || o.AllowAll {
		return nil
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		return o.CheckAddr(host, a)
	}
	if o.hostAllowed(host) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := o.CheckAddr(host, a); err != nil {
			return err
		}
	}
	return nil
}

// client returns an HTTP client for deliveries: no proxy from the
// environment (the check must see the target's address), connections
// checked by o, connect timeout of 5 s, the whole call bounded by timeout,
// and no redirect followed (a 3xx answer counts as a failure).
func (o *Outbound) client(timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			d := *dialer
			d.Control = func(_, address string, _ syscall.RawConn) error {
				ap, err := netip.ParseAddrPort(address)
				if err != nil {
					return fmt.Errorf("%q is not an address: %w", address, ErrRefusedAddress)
				}
				return o.CheckAddr(host, ap.Addr())
			}
			return d.DialContext(ctx, network, addr)
		},
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  timeout,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
