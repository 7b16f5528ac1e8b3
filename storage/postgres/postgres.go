// Package postgres is an storage.Storage backed by PostgreSQL, for when
// several server processes must share one store.
//
// Open it on a pgxpool.Pool the caller owns, or with OpenURL, which creates
// and owns the pool. Open creates or migrates the tables in Options.Schema
// (recording the version in its schema_migrations table); several processes
// may open the same schema at once. The pool may use any query exec mode of
// pgx but the simple protocol ("exec" suits PgBouncer in transaction mode).
//
//	s, err := postgres.OpenURL(ctx, "postgres://user@host:5432/db", &postgres.Options{Schema: "orders"})
//	...
//	store, err := eventstore.New(s, nil)
//
// # Several processes, one store
//
// Every process that opens the same database and schema sees one store: an
// event id is stored at most once per aggregate, versions and sequences of an
// aggregate grow without gaps, and the global feed is the same for everyone.
// An append takes its positions (strictly increasing, never reused, with
// gaps where an append rolled back) under an advisory lock held for
// microseconds, and commits side by side with the appends of every other
// process; a reader of the feed reads only below a watermark of the
// appends in flight, so it never sees position p while a lower position is
// still in flight, whichever process wrote it (docs/appends-side-by-side.md
// gives the argument). Within one
// process, concurrent Appends are coalesced into one transaction (group
// commit), usually written by one statement per round of requests on
// distinct aggregates, which decides each request's checks itself (a
// conflict is a result, not an error); when the server refuses that
// statement (an event id stored again, bad input) the requests run each in
// its own savepoint. Either way a request that fails its checks never
// affects the others. The leader of a group waits up to Options.Linger for
// the callers of the previous group to come back, so that writers saving in
// a loop share commits.
//
// A save acknowledged by one process is committed: from then on Load and
// ReadFeed on every process return it. Read-your-writes for projections holds
// within the process that saved (its Store waits for its projectors to reach
// the save); a Store in another process does not know about that save, so a
// projection read there shows it once that process's projector has caught up
// with the feed.
//
// A batch's FeedSequence is its first position. DeleteAggregate and
// DeleteAggregateType hold the writers back while they run.
// Deletion records the highest position and FeedSequence it removed in a
// deleted_marks table, and writers continue after the higher of what is
// stored and those marks, so no number is ever given twice; the append
// statements read the marks themselves, without another round trip. AppendAll
// writes all its batches in one transaction, usually with one statement.
//
// Every transaction that appends notifies the channel "<schema>.appends" (a
// name derived from a hash for long schema names) once when it commits,
// with its tenant as the payload; WatchAppends listens on it with a
// connection of its own, or a Listener shared by many Storages, so that
// Stores in every process learn of appends at once (see
// storage.AppendWatcher).
//
// # Tenants
//
// A schema holds any number of tenants, each a separate store: open one
// with Options.Tenant (a UUID), delete its data with DeleteTenant. They
// share the schema's tables, whose every key and index leads with the
// tenant, and every statement goes through views that show one tenant's
// rows, the one set for its transaction; a statement run without a tenant
// set fails instead of reading any. So a server holding many tenants
// prepares and plans each statement once for all of them, and a Storage
// cannot read or write another tenant's rows. ImportTenant moves a store
// kept in a schema of its own into a tenant (docs/tenants-postgres.md).
//
// ListProjections is served by indexes on (name, sort key, instance_id) for
// each order, and the definitions table keeps each projection's count of
// instances, so a page and an unfiltered total cost about the same for ten
// instances or a million; a filtered total counts the matching index range.
// Feeds counts every event of the store and is meant for occasional use.
//
// Projection checkpoints move with a compare-and-set in the same transaction
// that stores the states, so when projectors in several processes race, each
// range of the feed is applied exactly once and the losers get ErrConflict.
//
// # Errors
//
// Unique violations become storage.ErrConflict; input PostgreSQL refuses
// (a data exception, such as a NUL byte in a text) storage.ErrInvalid;
// disk_full storage.ErrFull; lost connections, a server shutting down or unreachable, a closed pool and
// running out of Options.WriteTimeout storage.ErrUnavailable; context
// errors are returned as they are.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore/internal/groupcommit"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
)

// DefaultSchema is the schema used when Options.Schema is empty.
const DefaultSchema = "eventstore"

// DefaultMaxBatch is the MaxBatch used when Options.MaxBatch is zero. It
// keeps a group transaction within the 64 subtransactions PostgreSQL caches
// per backend; beyond that every snapshot in the database gets slower.
const DefaultMaxBatch = 64

// DefaultLinger is the Linger used when Options.Linger is zero: about a
// third of a commit on a local disk, enough for writers that save in a
// loop to come back.
const DefaultLinger = 300 * time.Microsecond

// DefaultWriteTimeout is the WriteTimeout used when Options.WriteTimeout is
// zero.
const DefaultWriteTimeout = 30 * time.Second

// DefaultReadTimeout is the ReadTimeout used when Options.ReadTimeout is
// zero.
const DefaultReadTimeout = 30 * time.Second

// DefaultPoolConns is the size of the pool OpenURL creates when the
// connection string sets no pool_max_conns: room for the work of a Store
// with a running Projector at once, which is a Projector's catch-up
// workers (4), the group commit's writer (1) and reads serving requests
// side by side (5). The connection of WatchAppends is outside the pool.
const DefaultPoolConns = 10

// MinPoolConns is the smallest pool with which saves and reads never queue
// behind a running Projector: its 4 catch-up workers, the group commit's
// writer and one read. A smaller pool still works, since no operation holds
// a pooled connection while it waits for another, but saves and reads then
// wait for the catch-up workers' queries.
const MinPoolConns = 6

// Options configures a Storage. A nil *Options means all defaults.
type Options struct {
	// Schema is the PostgreSQL schema that holds the tables. It is created
	// when missing. The default is DefaultSchema. Stores that must not see
	// each other use different schemas.
	Schema string

	// Tenant selects the data space within Schema that the Storage reads
	// and writes: a UUID, or empty for the schema's own data
	// (DefaultTenant). The tenants of a schema share its tables, with the
	// tenant leading every key and index, so that a server holding many
	// tenants prepares and plans each statement once for all of them; a
	// Storage never reads or writes another tenant's rows, and every
	// statement it runs fails rather than do so should the tenant not be
	// set. DeleteTenant removes a tenant's data.
	Tenant string

	// MaxBatch caps how many concurrent Append calls are committed in one
	// transaction (group commit). The default is DefaultMaxBatch; 1
	// disables coalescing. Values above 64 make PostgreSQL's subtransaction
	// cache overflow and are not advised.
	MaxBatch int

	// Linger is how long the leader of a group waits for the callers of
	// the previous group to come back when fewer are queued; it goes as
	// soon as as many are. Writers that save in a loop all return from one
	// group at once and come back one by one: without lingering the first
	// to come back commits alone and the others form the next group, so
	// every other group holds one request and costs a commit of its own. A
	// lone writer never waits. The default is DefaultLinger; a negative
	// value disables lingering.
	Linger time.Duration

	// WriteTimeout bounds one group transaction of Append, which does not
	// run under any caller's context (several callers share it), and
	// also how long an Append waits in the queue for the transactions
	// before it: one that waited longer fails with ErrUnavailable and
	// nothing of it is stored. A group transaction that runs out of it may
	// still have committed (the commit and the deadline can cross), so a
	// caller that gets ErrUnavailable from Append knows nothing of the
	// outcome and retries with the same event ids, which stores nothing
	// twice. The default is DefaultWriteTimeout.
	WriteTimeout time.Duration

	// ReadTimeout bounds every read (Load, ReadFeed, FeedHead, Feeds, the
	// definitions and projection reads) on top of the caller's context,
	// so that reads fail with ErrUnavailable instead of hanging while the
	// database stalls. The default is DefaultReadTimeout.
	ReadTimeout time.Duration

	// ListenURL, when set, is the connection string WatchAppends connects
	// with instead of the pool's configuration: a direct connection to the
	// primary when the pool goes through a pooler in transaction mode
	// (PgBouncer's pool_mode = transaction), through which LISTEN does
	// not work. It gets the connect and keepalive defaults of Configure.
	// Ignored with Listener.
	//
	// Open detects a pooler in transaction mode when ListenURL is empty
	// (two connections of the pool reaching one server session, or one
	// connection moving between sessions) and refuses it with ErrInvalid
	// and a message saying what to set, unless Listener connects to
	// another server than the pool.
	ListenURL string

	// Listener, when set, is the connection WatchAppends listens on,
	// shared with the other Storages opened with it; nil gives the
	// Storage's WatchAppends a connection of its own. Storages of many
	// schemas in one database (a schema per tenant) share one Listener
	// and one pool, so that they hold a bounded number of connections
	// however many are open. The Listener must stay open until the
	// Storage is closed.
	Listener *Listener

	// NoMigrate makes Open refuse a schema older than this package's (or
	// none) with storage.ErrSchemaVersion instead of migrating it: for
	// processes started after a deploy step that ran Migrate (the
	// server's -no-migrate and -migrate-only), so that only that step
	// changes the schema.
	NoMigrate bool

	// Replicas are connection strings of hot standbys of the primary that
	// serve reads: Load, ReadFeed, ListAggregates, LoadSnapshot,
	// LoadProjection and ListProjections go to one of them (in turn) when it
	// has replayed what this Storage wrote, and to the primary otherwise.
	// Writes, projector work (checkpoints, commits, the instances a
	// projector loads), reactions, feed heads, LISTEN and migrations stay
	// on the primary. A replica that fails, is not a standby, or lags more
	// than ReplicaMaxLag is skipped until a later check finds it well
	// (docs/high-availability.md, "Read replicas"). OpenURL creates and owns
	// a pool for each; Open too.
	Replicas []string

	// ReplicaMaxLag is how far behind the primary a replica may be and
	// still serve reads; the default is DefaultReplicaMaxLag.
	ReplicaMaxLag time.Duration

	// ReplicaWait is how long a read waits for a replica to replay this
	// Storage's last write before it reads from the primary instead; the
	// default is DefaultReplicaWait, a negative value does not wait.
	ReplicaWait time.Duration

	// TracerProvider, used by OpenURL only, receives a span per statement
	// run within a traced call (see NewTracer); nil follows
	// OpenTelemetry's global provider.
	TracerProvider trace.TracerProvider

	// testMigrations, when set, replaces the migrations this package
	// knows: tests play an older or a newer program with it.
	testMigrations []migration
}

func (o *Options) migrations() []migration {
	if o == nil || o.testMigrations == nil {
		return migrations
	}
	return o.testMigrations
}

func (o *Options) schema() string {
	if o == nil || o.Schema == "" {
		return DefaultSchema
	}
	return o.Schema
}

func (o *Options) maxBatch() int {
	if o == nil || o.MaxBatch <= 0 {
		return DefaultMaxBatch
	}
	return o.MaxBatch
}

func (o *Options) linger() time.Duration {
	switch {
	case o == nil || o.Linger == 0:
		return DefaultLinger
	case o.Linger < 0:
		return 0
	}
	return o.Linger
}

func (o *Options) readTimeout() time.Duration {
	if o == nil || o.ReadTimeout <= 0 {
		return DefaultReadTimeout
	}
	return o.ReadTimeout
}

func (o *Options) writeTimeout() time.Duration {
	if o == nil || o.WriteTimeout <= 0 {
		return DefaultWriteTimeout
	}
	return o.WriteTimeout
}

// Storage is the PostgreSQL backend. It is safe for concurrent use. Create
// it with Open or OpenURL.
type store struct {
	tracer  *tracing.Tracer // spans of storage calls (trace.go)
	pool    *pgxpool.Pool
	ownPool bool
	sql     statements
	// schema is the quoted name of the schema.
	schema string
	// tenant is the canonical text of the tenant's UUID (Options.Tenant),
	// the value of the setting eventstore.tenant in every transaction.
	tenant string
	// appendKey is the advisory lock key that serialises writers of this
	// tenant of the schema.
	appendKey int64
	// drainKey is the advisory lock key that every append in flight holds
	// shared, and a deletion exclusively (see delete).
	drainKey int64
	// channel is the channel of LISTEN/NOTIFY that appends notify.
	channel      string
	writeTimeout time.Duration
	readTimeout  time.Duration
	batcher      *groupcommit.Batcher[storage.AppendRequest, storage.AppendResult]

	closed    atomic.Bool
	closeOnce sync.Once
	// done is closed by Close, which ends WatchAppends.
	done chan struct{}
	// listener is Options.Listener: nil when WatchAppends connects itself.
	listener *Listener
	// appended counts the events this Storage appended, and analyzed how
	// many stages of analyzeAfter it has reached (see noteAppended).
	appended atomic.Int64
	analyzed atomic.Int32
	// committed counts the projection states this Storage committed, and
	// statesAnalyzed how many stages of analyzeStatesAfter it has reached
	// (see noteCommitted).
	committed      atomic.Int64
	statesAnalyzed atomic.Int32
	// seen is the highest position this Storage has handed out or read;
	// rewindChecked when a read last asked whether the store went back
	// (Unix nanoseconds), rewinds how many times it did, onRewind the
	// handler of storage.Rewinder (rewind.go).
	seen          atomic.Int64
	rewindChecked atomic.Int64
	rewinds       atomic.Int64
	onRewind      atomic.Pointer[func(storage.Rewind)]
	// listenConfig is Options.ListenURL's configuration, or nil for the
	// pool's.
	listenConfig *pgx.ConnConfig
	// live is cancelled when the server stops answering (hung, ha.go),
	// which then replaces it.
	liveMu   sync.Mutex
	live     context.Context
	killLive context.CancelCauseFunc
	// heartbeat is the row that says this process has the schema open
	// (heartbeat.go).
	heartbeat *heartbeat

	// trackLSN is set when the Storage has read replicas: every append's
	// pipeline then ends with reading where the primary's log is, kept in
	// lsn; lsnGen counts the writes whose position in the log is not
	// known that way (replica.go). replica is set on the Storage that reads
	// from a replica's pool.
	trackLSN bool
	lsn      atomic.Int64
	lsnGen   atomic.Int64
	replica  *replica
}

var _ storage.Storage = (*store)(nil)

// Open returns a Storage using pool, after creating or migrating its tables
// in opts.Schema. The caller keeps ownership of pool: Close does not close
// it, and the pool must stay open until the Storage is closed. The pool may
// use any query exec mode of pgx but the simple protocol, which Open refuses
// with ErrInvalid. Hand the result to eventstore.New, whose Store closes it.
func Open(ctx context.Context, pool *pgxpool.Pool, opts *Options) (storage.Storage, error) {
	s, err := open(ctx, pool, opts)
	if err != nil {
		return nil, err
	}
	return withReplicas(ctx, s, opts)
}

// open is Open returning the concrete store.
func open(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*store, error) {
	if pool == nil {
		return nil, fmt.Errorf("postgres: open: nil pool: %w", storage.ErrInvalid)
	}
	if pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeSimpleProtocol {
		// With the simple protocol a batch is one query string: a NUL byte
		// in one request's input would break the whole group.
		return nil, fmt.Errorf("postgres: open: the pool uses the simple protocol; use another "+
			"default_query_exec_mode (\"exec\" suits PgBouncer in transaction mode): %w", storage.ErrInvalid)
	}
	schema := opts.schema()
	tenant, err := tenantOf(opts)
	if err != nil {
		return nil, err
	}
	channel := channelName(schema)
	// The watermark needs each feed read's statements to take their own
	// snapshots, which only READ COMMITTED does.
	var isolation, readOnly string
	var db uint32
	if err := pool.QueryRow(ctx, `SELECT current_setting('transaction_isolation'),
	(SELECT oid FROM pg_database WHERE datname = current_database()), current_setting('transaction_read_only')`).Scan(&isolation, &db, &readOnly); err != nil {
		if hint := poolerHint(err); hint != "" {
			return nil, fmt.Errorf("postgres: open: %v: %s: %w", err, hint, storage.ErrUnavailable)
		}
		if sentinel := classify(err); sentinel != nil {
			return nil, fmt.Errorf("postgres: open: %v: %w", err, sentinel)
		}
		return nil, fmt.Errorf("postgres: open: %v: %w", err, storage.ErrUnavailable)
	}
	if readOnly == "on" {
		// Migrating would fail with "CREATE SCHEMA in a read-only
		// transaction"; appends with SQLSTATE 25006.
		return nil, fmt.Errorf("postgres: open: %s: %w", readOnlyHelp, storage.ErrUnavailable)
	}
	if isolation != "read committed" {
		return nil, fmt.Errorf("postgres: open: the pool's connections default to isolation level %q; "+
			"the store needs \"read committed\" (the server's default; set default_transaction_isolation in "+
			"the pool's RuntimeParams): %w", isolation, storage.ErrInvalid)
	}
	if err := checkPooler(ctx, pool, opts); err != nil {
		return nil, err
	}
	s := &store{
		pool: pool,
		sql: newStatements(pgx.Identifier{schema}.Sanitize(), quoteLiteral(channel),
			int32(lockKey("register", schema)&0x7fffffff), db),
		schema:       pgx.Identifier{schema}.Sanitize(),
		tenant:       tenant,
		appendKey:    tenantLockKey("append", schema, tenant),
		drainKey:     tenantLockKey("drain", schema, tenant),
		channel:      channel,
		writeTimeout: opts.writeTimeout(),
		readTimeout:  opts.readTimeout(),
		done:         make(chan struct{}),
	}
	s.sql.lastPosition, s.sql.advance = rewindStatements(func(sql string) string { return qualify(s.schema, sql) })
	s.sql.probe = qualify(s.schema, probeSQL)
	if opts != nil {
		s.listener = opts.Listener
		if opts.ListenURL != "" {
			cfg, err := pgx.ParseConfig(opts.ListenURL)
			if err != nil {
				return nil, fmt.Errorf("postgres: open: ListenURL: %v: %w", err, storage.ErrInvalid)
			}
			configureConn(cfg)
			s.listenConfig = cfg
		}
	}
	s.tracer = registerTracer(pool.Config().ConnConfig, &s.sql)
	s.heartbeat = acquireHeartbeat(pool, schema)
	if _, _, err := migrate(ctx, pool, schema, migrateOptions{list: opts.migrations(), noMigrate: opts != nil && opts.NoMigrate, record: s.heartbeat}); err != nil {
		releaseHeartbeat(s.heartbeat, pool)
		if errors.Is(err, storage.ErrSchemaVersion) {
			return nil, fmt.Errorf("postgres: open: %w", err)
		}
		return nil, s.fail(ctx, "open", err)
	}
	s.batcher = groupcommit.New(s.runBatch, groupcommit.Options{MaxBatch: opts.maxBatch(), Linger: opts.linger()})
	return s, nil
}

// OpenURL connects to the database at url (a PostgreSQL connection string
// or URL, as accepted by pgxpool.ParseConfig) and opens a Storage on a new
// pool, which Close closes. The pool holds DefaultPoolConns connections
// unless url sets pool_max_conns. Hand the result to eventstore.New, whose
// Store closes it.
func OpenURL(ctx context.Context, url string, opts *Options) (storage.Storage, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %v: %w", err, storage.ErrInvalid)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultPoolConns
	}
	Configure(cfg)
	// Feed reads need READ COMMITTED whatever the server's default (see
	// statements.watermark).
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	if cfg.ConnConfig.Tracer == nil {
		var tp trace.TracerProvider
		if opts != nil {
			tp = opts.TracerProvider
		}
		cfg.ConnConfig.Tracer = NewTracer(tp)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %v: %w", err, storage.ErrUnavailable)
	}
	s, err := open(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return withReplicas(ctx, s, opts)
}

// PoolConns returns the most connections the pool of s, a storage of this
// package, opens (pgxpool's MaxConns), to compare with MinPoolConns; 0
// when s is not one.
func PoolConns(s storage.Storage) int {
	pg, ok := asStore(s)
	if !ok {
		return 0
	}
	return int(pg.pool.Config().MaxConns)
}

// Close implements storage.Storage. It waits for Appends already queued,
// then closes the pool if OpenURL created it. Close is idempotent.
func (s *store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.done)
		s.batcher.Close()
		releaseHeartbeat(s.heartbeat, s.pool)
		if s.ownPool {
			s.pool.Close()
		}
	})
	return nil
}

// untilClosed returns ctx, also cancelled when the Storage is closed, for
// work that must not outlive it.
func (s *store) untilClosed(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// check returns an error when the Storage is closed or ctx is done.
func (s *store) check(ctx context.Context, op string) error {
	if s.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, storage.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// lockKey derives an advisory lock key from a purpose and a schema name, so
// that stores in different schemas do not serialise each other.
func lockKey(purpose, schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("eventkit-go/eventstore:" + purpose + ":" + schema))
	return int64(h.Sum64())
}

// tenantLockKey is lockKey for the data of tenant in schema: that of the
// schema for DefaultTenant, so that stores without tenants keep their keys.
// Tenants do not order or hold back one another's appends and deletions.
func tenantLockKey(purpose, schema, tenant string) int64 {
	if tenant == DefaultTenant {
		return lockKey(purpose, schema)
	}
	return lockKey(purpose, schema+"\x00"+tenant)
}

// channelName returns the LISTEN/NOTIFY channel of the appends to schema:
// the schema's name followed by ".appends" when that fits in a PostgreSQL
// identifier (63 bytes), else a name derived from a hash of it.
func channelName(schema string) string {
	if name := schema + ".appends"; len(name) <= 63 {
		return name
	}
	return fmt.Sprintf("eventstore.appends.%016x", uint64(lockKey("channel", schema)))
}

// quoteLiteral returns s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// qualify replaces {{schema}} in a statement with the quoted schema name,
// and {{positions}} with the name of its sequence of positions as a string
// literal (for nextval and setval), and {{tenant}} with tenantSQL.
func qualify(schema, sql string) string {
	sql = strings.ReplaceAll(sql, "{{tenant}}", tenantSQL)
	sql = strings.ReplaceAll(sql, "{{positions}}", quoteLiteral(schema+".positions"))
	return strings.ReplaceAll(sql, "{{schema}}", schema)
}

// errBug reports a state the backend's own logic should have made
// impossible.
var errBug = errors.New("postgres: internal error")
