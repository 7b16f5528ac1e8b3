package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/httpapi"
)

// Defaults of the operational flags.
const (
	defaultMaxConns    = 1024
	defaultIdleTimeout = 30 * time.Second
)

// opsConfig is the part of the command line about running the server.
type opsConfig struct {
	maxConns          int
	idleTimeout       time.Duration
	maxResponseBuffer int
	metricsAddr       string
	logRequests       bool
	postgresSchema    string
}

func (c *opsConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.maxConns, "max-conns", defaultMaxConns, "most connections open at once; more are answered 503 with Retry-After and closed")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", defaultIdleTimeout, "how long a keep-alive connection may stay idle before it is closed")
	fs.IntVar(&c.maxResponseBuffer, "max-response-buffer", httpapi.DefaultMaxResponseBuffer, "bytes of a load or feed answer held in memory; larger answers are streamed")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve GET /metrics without credentials on this address; when empty, /metrics is served on -addr and needs the key pair")
	fs.BoolVar(&c.logRequests, "log-requests", true, "log one line per request (method, route, status, bytes, duration, request id)")
	fs.StringVar(&c.postgresSchema, "postgres-schema", "", `PostgreSQL schema of the tables (default: the first entry of a search_path parameter in the URL, else "eventstore")`)
}

// postgresSchema is the schema for a postgres:// storage: the flag, else
// the first schema of the URL's search_path parameter, else "" (the
// backend's default). The parameter is left in the URL, where the
// connection also applies it.
func postgresSchema(spec, flagValue string) (string, error) {
	isPG := strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://")
	if !isPG {
		if flagValue != "" {
			return "", errors.New("-postgres-schema needs a postgres:// -storage")
		}
		return "", nil
	}
	if flagValue != "" {
		return flagValue, nil
	}
	u, err := url.Parse(spec)
	if err != nil {
		return "", errors.New("-storage: the PostgreSQL URL does not parse") // the URL may hold a password: not quoted
	}
	first, _, _ := strings.Cut(u.Query().Get("search_path"), ",")
	return strings.Trim(strings.TrimSpace(first), `"`), nil
}

// serveMetrics serves /metrics on its own address when addr is set, and
// returns the function that stops it.
func serveMetrics(addr string, m *promMetrics, stdout io.Writer, log *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.metricsHandler(nil))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: defaultIdleTimeout}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// check refuses values that would leave the server unusable.
func (c *opsConfig) check() error {
	switch {
	case c.maxConns < 1:
		return fmt.Errorf("-max-conns must be at least 1, got %d", c.maxConns)
	case c.idleTimeout <= 0:
		return fmt.Errorf("-idle-timeout must be positive, got %s", c.idleTimeout)
	}
	return nil
}
