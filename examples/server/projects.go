package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/tenancy"
)

// maxSchemaLen is PostgreSQL's identifier length: a longer schema name
// would be truncated, and two projects could share one.
const maxSchemaLen = 63

// project is one data space: its own storage, Store, Projector and the
// goroutines that run them.
type project struct {
	name    string // "" for the one project of the environment keys
	log     *slog.Logger
	st      *eventstore.Store
	pg      storage.Storage // the storage, when it is PostgreSQL's (for its feed lag); else nil
	proj    *eventstore.Projector
	tenants *tenancy.Set
	release func() // closes what the tenants share, after tenants
	// reactions runs the project's reactions (its default data space,
	// not its tenants').
	reactions *reactions.Engine
	tokenKey  []byte // signs delete tokens; kept across key rotations
	stop      context.CancelFunc
	wg        sync.WaitGroup

	// inflight is held for reading by every request served; close takes
	// it for writing, so that it waits for them.
	inflight sync.RWMutex
	closed   bool
}

// projectEntry is a project reachable with one key pair.
type projectEntry struct {
	access, secret [sha256.Size]byte
	p              *project
	handler        http.Handler
}

// projectTable is the set of projects at one time; it is replaced, never
// changed, on reload.
type projectTable struct {
	entries []projectEntry
	byName  map[string]*projectEntry
}

// projectRouter serves every project: it picks the project whose key pair
// the request carries and hands the request to that project's handler.
// Unknown keys get the 401 of a handler that accepts none.
type projectRouter struct {
	cfg     *config
	log     *slog.Logger
	metrics *promMetrics
	ctx     context.Context // parent of the projectors; never cancelled by a signal
	named   bool            // projects come from a key file

	reloadMu sync.Mutex // one reload (or close) at a time
	closed   bool       // close was called; guarded by reloadMu
	table    atomic.Pointer[projectTable]
	deny     http.Handler      // answers 401 to keys of no project
	denySt   *eventstore.Store // deny's empty store
	closing  sync.WaitGroup    // removed projects being closed
}

// newProjectRouter opens the projects of keys. With named false there is
// one project, keys[0], on the storage as configured; otherwise each
// project has its own storage derived from it (projectStorage).
func newProjectRouter(ctx context.Context, cfg *config, log *slog.Logger, metrics *promMetrics, keys []projectKey, named bool) (*projectRouter, error) {
	rt := &projectRouter{cfg: cfg, log: log, metrics: metrics, ctx: context.WithoutCancel(ctx), named: named}
	denySt, err := eventstore.New(memory.New(), nil)
	if err != nil {
		return nil, err
	}
	rt.denySt = denySt
	rt.deny = httpapi.New(denySt, eventstore.NewProjector(denySt, nil), &httpapi.Options{
		Authorize:      func(*http.Request) bool { return false },
		Logger:         log,
		Observer:       rt.observer("", log),
		DisableConsole: !cfg.console,
	})
	t, _, err := rt.build(ctx, &projectTable{byName: map[string]*projectEntry{}}, keys)
	if err != nil {
		_ = denySt.Close()
		return nil, err
	}
	rt.table.Store(t)
	return rt, nil
}

// observer is the httpapi Observer of the handler of project name.
func (rt *projectRouter) observer(name string, log *slog.Logger) func(httpapi.RequestInfo) {
	var logRequests func(httpapi.RequestInfo)
	if rt.cfg.ops.logRequests {
		logRequests = requestLogger(log)
	}
	return observers(rt.metrics.observer(name), logRequests)
}

// build returns the table of keys, reusing the projects of old by name and
// opening the others. On error it closes those it opened.
func (rt *projectRouter) build(ctx context.Context, old *projectTable, keys []projectKey) (*projectTable, []*project, error) {
	t := &projectTable{byName: map[string]*projectEntry{}}
	var opened []*project
	for _, k := range keys {
		var p *project
		if e, ok := old.byName[k.name]; ok {
			p = e.p
		} else {
			var err error
			if p, err = rt.open(ctx, k.name); err != nil {
				for _, o := range opened {
					o.close()
				}
				if rt.named {
					return nil, nil, fmt.Errorf("line %d: project %s: %w", k.line, k.name, err)
				}
				return nil, nil, err
			}
			opened = append(opened, p)
		}
		t.entries = append(t.entries, projectEntry{
			access: sha256.Sum256([]byte(k.key.AccessKey)), secret: sha256.Sum256([]byte(k.key.SecretAccessKey)),
			p: p,
			handler: httpapi.New(p.st, p.proj, &httpapi.Options{
				Keys:              []httpapi.KeyPair{k.key},
				MaxBodyBytes:      rt.cfg.maxBody,
				Logger:            p.log,
				MaxResponseBuffer: rt.cfg.ops.maxResponseBuffer,
				Observer:          rt.observer(p.name, p.log),
				DeleteTokenKey:    p.tokenKey,
				Tenants:           p.tenants,
				Reactions:         p.reactions,
				DisableConsole:    !rt.cfg.console,
				StorageName:       storageName(rt.cfg.storage),
			}),
		})
	}
	for i := range t.entries {
		t.byName[t.entries[i].p.name] = &t.entries[i]
	}
	return t, opened, nil
}

// projectStorage returns the -storage value and PostgreSQL schema of the
// project name: for the unnamed project, the configured ones; for a named
// one, memory, the SQLite file PATH with ".NAME" before its extension
// (eventstore.db → eventstore.NAME.db), or the schema SCHEMA_NAME, where
// SCHEMA is the configured schema (default "eventstore").
func projectStorage(spec, schema, name string) (string, string, error) {
	if name == "" {
		return spec, schema, nil
	}
	switch {
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		if path == "" || strings.HasPrefix(path, "//") {
			return spec, schema, nil // openStorage refuses it
		}
		ext := filepath.Ext(path)
		if filepath.Base(path) == ext { // ".events": no extension
			ext = ""
		}
		return "sqlite:" + strings.TrimSuffix(path, ext) + "." + name + ext, "", nil
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		if schema == "" {
			schema = postgres.DefaultSchema
		}
		s := schema + "_" + name
		if len(s) > maxSchemaLen {
			return "", "", fmt.Errorf("its PostgreSQL schema %s is longer than %d bytes: use a shorter name or -postgres-schema", s, maxSchemaLen)
		}
		return spec, s, nil
	}
	return spec, schema, nil
}

// open opens the storage of the project name and starts its projector.
func (rt *projectRouter) open(ctx context.Context, name string) (*project, error) {
	schema, err := postgresSchema(rt.cfg.storage, rt.cfg.ops.postgresSchema)
	if err != nil {
		return nil, err
	}
	spec, schema, err := projectStorage(rt.cfg.storage, schema, name)
	if err != nil {
		return nil, err
	}
	log := rt.log
	if name != "" {
		log = log.With("project", name)
	}
	log.Info("opening storage", "storage", storageKind(spec))
	opened := time.Now()
	s, err := openStorage(ctx, spec, schema, rt.cfg.upgrade.noMigrate, &rt.cfg.replicas, rt.cfg.listen.url)
	if err != nil {
		return nil, fmt.Errorf("open storage: %w", err)
	}
	log.Info("storage open", "took", time.Since(opened).Round(time.Millisecond).String())
	warnSmallPool(log, s)
	st, err := eventstore.New(s, &eventstore.Options{Logger: log, Metrics: rt.metrics})
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	p := &project{name: name, log: log, st: st, proj: eventstore.NewProjector(st, &rt.cfg.projector), tokenKey: make([]byte, 32)}
	if postgres.PoolConns(s) > 0 {
		p.pg = s
	}
	ropts := rt.cfg.reactions.options()
	ropts.Logger = log
	if p.reactions, err = reactions.New(st, s, ropts); err != nil {
		_ = st.Close()
		return nil, err
	}
	if p.tenants, p.release, err = openTenants(ctx, spec, schema, p.proj, p.reactions, rt.cfg, log, rt.metrics, func(id string) { rt.metrics.forgetTenant(name, id) }); err != nil {
		_ = st.Close()
		return nil, err
	}
	_, _ = rand.Read(p.tokenKey) // crypto/rand.Read never fails
	pctx, stop := context.WithCancel(rt.ctx)
	p.wg.Go(func() { _ = p.reactions.Run(pctx) })
	p.stop = stop
	p.wg.Go(func() {
		if err := p.proj.Run(pctx); err != nil {
			log.Error("projector stopped", "err", err)
		}
	})
	p.wg.Go(func() { reportStartup(pctx, st, p.proj, log, progressEvery) })
	return p, nil
}

// close waits for the project's requests in flight, stops its projector
// and closes its storage. Requests that arrive afterwards get 401.
func (p *project) close() {
	p.inflight.Lock()
	p.closed = true
	p.inflight.Unlock()
	if err := p.tenants.Close(); err != nil {
		p.log.Error("close tenants", "err", err)
	}
	p.release()
	p.stop()
	p.wg.Wait()
	if err := p.st.Close(); err != nil {
		p.log.Error("close storage", "err", err)
	}
}

// reload reads the key file again and makes it the set of projects: new
// projects are opened, changed keys replace the old ones, and removed
// projects stop being reachable at once and are closed once their
// requests in flight are done. On any error the projects and keys stay
// as they were.
func (rt *projectRouter) reload(ctx context.Context, path string) error {
	keys, err := readKeyFile(path, rt.checkName)
	if err != nil {
		return err
	}
	rt.reloadMu.Lock()
	defer rt.reloadMu.Unlock()
	if rt.closed {
		return errors.New("the server is shutting down")
	}
	old := rt.table.Load()
	t, opened, err := rt.build(ctx, old, keys)
	if err != nil {
		return fmt.Errorf("-keys %s:%w", path, err)
	}
	rt.table.Store(t)
	var removed []string
	for name, e := range old.byName {
		if _, ok := t.byName[name]; !ok {
			removed = append(removed, name)
			rt.closing.Go(e.p.close)
		}
	}
	rt.log.Info("key file reloaded", "projects", len(t.entries), "opened", len(opened), "removed", len(removed))
	return nil
}

// checkName refuses a project name whose storage cannot be derived.
func (rt *projectRouter) checkName(name string) error {
	schema, err := postgresSchema(rt.cfg.storage, rt.cfg.ops.postgresSchema)
	if err != nil {
		return err
	}
	_, _, err = projectStorage(rt.cfg.storage, schema, name)
	return err
}

// close closes every project, after the requests in flight. Calls after
// the first do nothing.
func (rt *projectRouter) close() {
	rt.reloadMu.Lock()
	defer rt.reloadMu.Unlock()
	if rt.closed {
		return
	}
	rt.closed = true
	for _, e := range rt.table.Load().entries {
		e.p.close()
	}
	rt.closing.Wait()
	_ = rt.denySt.Close()
}

// projects returns the projects reachable now.
func (rt *projectRouter) projects() []*project {
	t := rt.table.Load()
	ps := make([]*project, len(t.entries))
	for i := range t.entries {
		ps[i] = t.entries[i].p
	}
	return ps
}

// requestKeys returns the key pair of r, in either spelling of the
// headers. The project's handler checks the headers strictly again.
func requestKeys(r *http.Request) (access, secret string) {
	access, secret = r.Header.Get(httpapi.HeaderAccessKey), r.Header.Get(httpapi.HeaderSecretAccessKey)
	if access == "" && secret == "" {
		access, secret = r.Header.Get(httpapi.HeaderSerializedAccessKey), r.Header.Get(httpapi.HeaderSerializedSecretAccessKey)
	}
	return access, secret
}

// match returns the entry of t whose key pair r carries, comparing with
// every entry in constant time without stopping at the first match.
func (t *projectTable) match(r *http.Request) *projectEntry {
	access, secret := requestKeys(r)
	if access == "" || secret == "" {
		return nil
	}
	a, s := sha256.Sum256([]byte(access)), sha256.Sum256([]byte(secret))
	found := -1
	for i := range t.entries {
		e := &t.entries[i]
		ok := subtle.ConstantTimeCompare(a[:], e.access[:]) & subtle.ConstantTimeCompare(s[:], e.secret[:])
		found = subtle.ConstantTimeSelect(ok, i, found)
	}
	if found < 0 {
		return nil
	}
	return &t.entries[found]
}

// authorized reports whether r carries the key pair of a project.
func (rt *projectRouter) authorized(r *http.Request) bool {
	return rt.table.Load().match(r) != nil
}

// ServeHTTP serves /healthz and /readyz (ready when every project is) and
// hands every other request to the project of its key pair.
func (rt *projectRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := rt.table.Load()
	switch r.URL.Path {
	case "/healthz":
		t.entries[0].handler.ServeHTTP(w, r)
		return
	case "/readyz":
		// Answer with the handler of the first project that is not
		// ready, which then says so, else with the first one's; all of
		// it within readyBudget, so that /readyz answers within a second
		// also when the database hangs.
		ctx, cancel := context.WithTimeout(r.Context(), readyBudget)
		defer cancel()
		r = r.WithContext(ctx)
		e := &t.entries[0]
		for i := range t.entries {
			if !t.entries[i].p.ready(r.Context()) {
				e = &t.entries[i]
				break
			}
		}
		e.handler.ServeHTTP(w, r)
		return
	}
	e := t.match(r)
	if e == nil {
		rt.deny.ServeHTTP(w, r)
		return
	}
	p := e.p
	p.inflight.RLock()
	defer p.inflight.RUnlock()
	if p.closed {
		rt.deny.ServeHTTP(w, r)
		return
	}
	e.handler.ServeHTTP(w, r)
}

// ready reports whether the project's storage answers within ctx (the
// /readyz budget), accepts writes (Store.ProbeWrite), has space and its
// projector runs, as httpapi's /readyz checks.
func (p *project) ready(ctx context.Context) bool {
	if !hooks.ProjectorRunning(p.proj) || p.st.OutOfSpace() {
		return false
	}
	if _, err := p.st.FeedHead(ctx, ""); err != nil {
		return false
	}
	return p.st.ProbeWrite(ctx) == nil
}

// readyBudget bounds the whole of GET /readyz.
const readyBudget = 900 * time.Millisecond
