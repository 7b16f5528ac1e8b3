// Command server runs the event store as a standalone HTTP service.
//
//	go run ./examples/server [-addr 127.0.0.1:8080] [-storage sqlite:PATH|memory|postgres://...]
//
// The default storage is the SQLite file eventstore.db in the working
// directory, so events survive restarts; -storage memory keeps nothing.
//
// The accepted key pair comes from EVENTSTORE_ACCESS_KEY and
// EVENTSTORE_SECRET_ACCESS_KEY, trimmed of surrounding whitespace; a key
// holding whitespace or control characters inside is refused at start.
// When both are unset, a random pair is generated and printed once at
// start-up.
//
// With -keys FILE the server serves several projects instead, each a
// separate data space with its own key pair and storage: the file holds
// one project a line, "NAME ACCESS_KEY SECRET_KEY" separated by spaces or
// tabs, '#' starts a comment and blank lines are ignored. SIGHUP reloads
// it: new projects are opened, changed keys replace the old ones at once,
// and removed projects are closed once their requests in flight are done;
// a file that does not parse is logged and leaves everything as it was.
// Each project has its own storage: with -storage memory a memory store,
// with sqlite:PATH the file PATH with ".NAME" before its extension
// (eventstore.db → eventstore.NAME.db), with postgres:// the schema
// SCHEMA_NAME, where SCHEMA is -postgres-schema (default "eventstore").
//
// Inside every project, the Serialized-Tenant-Id header selects a tenant
// added with POST /tenants, whose data lives in a storage of its own
// (package tenancy): a memory store, the SQLite file PATH+t-ID.EXT next to
// the project's, or the PostgreSQL schema SCHEMA+tID; the registry of the
// project's tenants is PATH+tenants.EXT or the schema SCHEMA+tenants.
//
// The server logs with log/slog to
// stderr and shuts down gracefully on SIGINT or SIGTERM: it stops accepting
// connections, finishes the requests in flight, stops the projector and
// closes the storage.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/extfunc"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) { // -h: the usage is printed
		fmt.Fprintln(os.Stderr, "server:", err)
		stop()
		os.Exit(1)
	}
}

// config is the parsed command line and environment.
type config struct {
	addr            string
	storage         string
	shutdownTimeout time.Duration
	maxBody         int64
	key             httpapi.KeyPair
	generatedKey    bool
	keysFile        string       // -keys: the key file, else "" (one project from the environment)
	projects        []projectKey // the key file's projects, when keysFile is set
	ops             opsConfig
	projector       eventstore.ProjectorOptions
	reactions       reactionConfig
	console         bool // serve the console at /console/
	upgrade         upgradeConfig
	replicas        replicaConfig
	listen          listenURLConfig
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageWithSubcommands(fs)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.storage, "storage", "sqlite:eventstore.db", `storage backend: "sqlite:PATH" (durable, embedded), "memory" (lost at exit) or a "postgres://..." URL`)
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to wait for requests in flight at shutdown")
	fs.Int64Var(&c.maxBody, "max-body", httpapi.DefaultMaxBodyBytes, "request body limit in bytes")
	fs.IntVar(&c.projector.MaxInstanceBytes, "max-instance-bytes", limits.DefaultMaxInstanceBytes, "largest JSON size of one projection instance; an event that would grow one past it is a recorded error")
	fs.IntVar(&c.projector.MaxDefinitions, "max-definitions", limits.DefaultMaxDefinitions, "most projection definitions the store accepts")
	fs.StringVar(&c.keysFile, "keys", "", "key file of several projects, each a separate data space: one \"NAME ACCESS_KEY SECRET_KEY\" a line, '#' starts a comment; "+
		"SIGHUP reloads it; each project gets its own memory store, SQLite file PATH.NAME.EXT or PostgreSQL schema SCHEMA_NAME "+
		"(default: one project with the key pair of EVENTSTORE_ACCESS_KEY and EVENTSTORE_SECRET_ACCESS_KEY)")
	fs.BoolVar(&c.console, "console", true, "serve the console, a page for browsers, at /console/ (-console=false serves the API alone)")
	c.ops.flags(fs)
	c.reactions.flags(fs)
	c.upgrade.flags(fs)
	c.replicas.flags(fs)
	c.listen.flags(fs)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if c.projector.MaxInstanceBytes < 1 || c.projector.MaxDefinitions < 1 {
		return config{}, errors.New("-max-instance-bytes and -max-definitions must be at least 1")
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := c.ops.check(); err != nil {
		return config{}, err
	}
	if err := c.reactions.check(); err != nil {
		return config{}, err
	}
	if err := c.upgrade.check(); err != nil {
		return config{}, err
	}
	if err := c.replicas.check(c.storage); err != nil {
		return config{}, err
	}
	if err := c.listen.check(c.storage); err != nil {
		return config{}, err
	}
	// External projection functions keep to the reactions' outbound policy.
	c.projector.Functions = extfunc.New(&extfunc.Options{Outbound: c.reactions.outbound,
		MaxResponseBytes: int64(c.projector.MaxInstanceBytes) + 64<<10})
	if c.keysFile != "" {
		if getenv("EVENTSTORE_ACCESS_KEY") != "" || getenv("EVENTSTORE_SECRET_ACCESS_KEY") != "" {
			return config{}, errors.New("-keys and EVENTSTORE_ACCESS_KEY/EVENTSTORE_SECRET_ACCESS_KEY: use one of them, not both")
		}
		schema, err := postgresSchema(c.storage, c.ops.postgresSchema)
		if err != nil {
			return config{}, err
		}
		c.projects, err = readKeyFile(c.keysFile, func(name string) error {
			_, _, err := projectStorage(c.storage, schema, name)
			return err
		})
		if err != nil {
			return config{}, err
		}
		return c, nil
	}
	c.key = httpapi.KeyPair{
		AccessKey:       strings.TrimSpace(getenv("EVENTSTORE_ACCESS_KEY")),
		SecretAccessKey: strings.TrimSpace(getenv("EVENTSTORE_SECRET_ACCESS_KEY")),
	}
	for name, v := range map[string]string{"EVENTSTORE_ACCESS_KEY": c.key.AccessKey, "EVENTSTORE_SECRET_ACCESS_KEY": c.key.SecretAccessKey} {
		if i := strings.IndexFunc(v, badKeyRune); i >= 0 {
			return config{}, fmt.Errorf("%s holds %U at byte %d: a key may not contain whitespace or control characters, "+
				"which no client can send in a header (surrounding whitespace is trimmed)", name, []rune(v[i:])[0], i)
		}
	}
	switch {
	case c.key.AccessKey == "" && c.key.SecretAccessKey == "":
		c.key = httpapi.KeyPair{AccessKey: "ak_" + randomHex(8), SecretAccessKey: "sk_" + randomHex(24)}
		c.generatedKey = true
	case c.key.AccessKey == "" || c.key.SecretAccessKey == "":
		return config{}, errors.New("set both EVENTSTORE_ACCESS_KEY and EVENTSTORE_SECRET_ACCESS_KEY, or neither")
	}
	return c, nil
}

// badKeyRune reports a rune that a key may not hold: whitespace and
// control characters would make every request 401.
func badKeyRune(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// storageName names the backend of a -storage value for GET /status.
func storageName(spec string) string {
	switch {
	case spec == "memory":
		return "memory"
	case strings.HasPrefix(spec, "sqlite:"):
		return "sqlite"
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		return "postgres"
	}
	return ""
}

// openStorage opens the backend named by the -storage flag; noMigrate
// refuses an older schema instead of migrating it (-no-migrate);
// PostgreSQL reads from replicas when it names some (nil: none);
// listenURL is -postgres-listen-url.
func openStorage(ctx context.Context, spec, schema string, noMigrate bool, replicas *replicaConfig, listenURL string) (storage.Storage, error) {
	switch {
	case spec == "memory":
		return memory.New(), nil
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		if strings.HasPrefix(path, "//") {
			return nil, fmt.Errorf(`-storage %q: write "sqlite:" and the file path, as in "sqlite:eventstore.db" or "sqlite:/var/lib/eventstore.db", without "//"`, spec)
		}
		if path == "" {
			return nil, errors.New(`-storage sqlite: needs a path, as in "sqlite:events.db"`)
		}
		return sqlite.Open(path, &sqlite.Options{NoMigrate: noMigrate})
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		return postgres.OpenURL(ctx, spec, replicas.apply(&postgres.Options{Schema: schema, NoMigrate: noMigrate, ListenURL: listenURL}))
	}
	return nil, fmt.Errorf(`unknown -storage %q: use "memory", "sqlite:PATH" or "postgres://..."`, spec)
}

// warnSmallPool logs a warning when storage is PostgreSQL on a pool too
// small for a server's work at once (postgres.MinPoolConns): saves and reads
// then queue behind the projector's catch-up.
func warnSmallPool(log *slog.Logger, s storage.Storage) {
	conns := postgres.PoolConns(s)
	if conns == 0 || conns >= postgres.MinPoolConns {
		return
	}
	log.Warn("the PostgreSQL pool is small for a server: saves and reads will wait for the projector's catch-up queries; "+
		"raise pool_max_conns in the URL or drop it for the default",
		"pool_max_conns", conns, "advised_at_least", postgres.MinPoolConns, "default", postgres.DefaultPoolConns)
}

// run starts the server and blocks until ctx is done or the server fails.
// It prints the address it listens on ("listening on http://ADDR") and, for
// a generated key pair, the pair and a sample curl line to stdout.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if sc := findSubcommand(args); sc != nil {
		return sc.run(ctx, args[1:], stdout, stderr)
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	if _, err := postgresSchema(cfg.storage, cfg.ops.postgresSchema); err != nil {
		return err
	}
	if cfg.upgrade.migrateOnly {
		return migrateOnly(ctx, &cfg, stdout)
	}
	stopTracing, err := setupTracing(ctx, getenv, log)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		stopTracing(sctx)
	}()
	keys := cfg.projects
	named := cfg.keysFile != ""
	metrics := newPromMetrics(named)
	if !named {
		keys = []projectKey{{key: cfg.key}}
	}
	router, err := newProjectRouter(ctx, &cfg, log, metrics, keys, named)
	if err != nil {
		return err
	}
	defer router.close()
	var handler http.Handler = router
	metrics.watchProjections(router.projects, named, log)

	rawLn, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	ln := newLimitListener(rawLn, cfg.ops.maxConns)
	metrics.watchConnections(ln)
	stopMetrics, err := serveMetrics(cfg.ops.metricsAddr, metrics, stdout, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer stopMetrics()
	if cfg.ops.metricsAddr == "" {
		handler = withMetricsPath(handler, metrics.metricsHandler(router.authorized))
	}
	// net/http's own error responses (a request that does not parse) in
	// the JSON error shape too.
	srvLn := httpapi.JSONErrorListener(ln)
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		// A feed read may long-poll for 60 s (waitTime) before it writes.
		WriteTimeout: 90 * time.Second,
		IdleTimeout:  cfg.ops.idleTimeout,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	base := "http://" + ln.Addr().String()
	if cfg.generatedKey {
		fmt.Fprintf(stdout, "No EVENTSTORE_ACCESS_KEY/EVENTSTORE_SECRET_ACCESS_KEY set; generated a key pair for this run:\n"+
			"  export EVENTSTORE_ACCESS_KEY=%s\n  export EVENTSTORE_SECRET_ACCESS_KEY=%s\n"+
			"Try:\n  curl -i -H 'Service-Access-Key: %s' -H 'Service-Secret-Access-Key: %s' %s/aggregates/order/o-1\n",
			cfg.key.AccessKey, cfg.key.SecretAccessKey, cfg.key.AccessKey, cfg.key.SecretAccessKey, base)
	}
	fmt.Fprintf(stdout, "listening on %s\n", base)
	log.Info("eventstore server started", "addr", ln.Addr().String(), "storage", storageKind(cfg.storage))

	if named {
		log.Info("projects open", "projects", len(cfg.projects), "keys", cfg.keysFile)
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		hupCtx, stopHUP := context.WithCancel(ctx)
		defer stopHUP()
		go func() {
			for {
				select {
				case <-hupCtx.Done():
					return
				case <-hup:
					if err := router.reload(hupCtx, cfg.keysFile); err != nil {
						log.Error("key file not reloaded: the keys stay as they were", "err", err)
					}
				}
			}
		}()
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(srvLn) }()

	select {
	case err = <-serveErr:
		// Serve failed on its own: nothing to drain.
	case <-ctx.Done():
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdownTimeout)
		err = srv.Shutdown(sctx)
		cancel()
		if err != nil {
			_ = srv.Close()
			err = fmt.Errorf("shutdown: %w", err)
		} else if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) {
			err = serr
		}
	}
	router.close()
	if err == nil {
		log.Info("stopped")
	}
	return err
}

// storageKind names the backend without the credentials a URL may hold.
func storageKind(spec string) string {
	if kind, _, ok := strings.Cut(spec, ":"); ok {
		return kind
	}
	return spec
}
