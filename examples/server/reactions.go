package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/eventkit-go/eventstore/reactions"
)

// reactionConfig holds the flags of reactions.
type reactionConfig struct {
	backoff  time.Duration
	attempts int
	allow    string
	outbound *reactions.Outbound
}

func (c *reactionConfig) flags(fs *flag.FlagSet) {
	fs.DurationVar(&c.backoff, "reaction-backoff", reactions.DefaultBackoff,
		"delay before the first retry of a failed reaction; each later retry waits twice as long (at most a day)")
	fs.IntVar(&c.attempts, "reaction-attempts", reactions.DefaultAttempts,
		"attempts of a reaction before it is FAILED")
	fs.StringVar(&c.allow, "outbound-allow", "",
		"comma-separated CIDR prefixes, addresses and host names that reactions and external projection functions may call although refused by default "+
			"(loopback, link-local such as 169.254.169.254, and this server's own addresses), e.g. 127.0.0.1/32,hooks.internal")
}

// check validates the flags and builds the outbound policy, refusing the
// addresses of this host's interfaces as its own.
func (c *reactionConfig) check() error {
	if c.backoff < time.Millisecond || c.backoff > 24*time.Hour {
		return errors.New("-reaction-backoff must be between 1ms and 24h")
	}
	if c.attempts < 1 || c.attempts > 100 {
		return errors.New("-reaction-attempts must be between 1 and 100")
	}
	prefixes, hosts, err := reactions.ParseAllow(c.allow)
	if err != nil {
		return fmt.Errorf("-outbound-allow: %w", err)
	}
	c.outbound = &reactions.Outbound{Allow: prefixes, AllowHosts: hosts}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				c.outbound.Own = append(c.outbound.Own, p.Addr())
			}
		}
	}
	return nil
}

// options returns the Engine options of a project.
func (c *reactionConfig) options() *reactions.Options {
	return &reactions.Options{Backoff: c.backoff, Attempts: c.attempts, Outbound: c.outbound}
}
