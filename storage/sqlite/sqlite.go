// Package sqlite is a durable, embedded storage.Storage on a single
// SQLite file, through the pure-Go driver modernc.org/sqlite (no cgo).
//
// Durability: the database runs in WAL mode with synchronous=FULL, so a save
// that Append acknowledged is on disk and survives a crash of the process or
// of the machine.
//
// Concurrency: all writes go through one connection, so positions are
// assigned by a single writer in commit order and the global feed is
// gap-free without further coordination. Concurrent Append calls are
// coalesced into one transaction (group commit, one fsync for many saves);
// each request runs inside its own SAVEPOINT, so a request that fails its
// version check or any constraint is rolled back alone and never fails its
// neighbours. AppendAll joins the same group commit as one unit inside a
// savepoint of its own, so its requests are written all or none. Reads use
// a separate pool of read-only connections, which may map the file into
// memory (Options.MmapSize), and never wait for writes.
//
// Numbering: the writer assigns positions after the highest ever assigned
// (the last event's, or the mark a deletion of the last events leaves in
// the counters table) and each aggregate type's feed sequences after its
// latest batch's, or the one its row in the feeds table keeps, which also
// counts the type's aggregates, batches and events up to there (the
// batches after it are counted from the events until the writer settles
// the row); so deletions never make numbers free again. The writer keeps
// these numbers, and the versions of the aggregates it wrote, in memory
// between transactions, for as long as the file's data version shows that
// no other connection wrote to it.
//
// One file should be opened by one Storage at a time. Several processes may
// open the same file (SQLite locks it), but writers then contend for the
// lock and Append may fail with ErrUnavailable after Options.BusyTimeout.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore/internal/groupcommit"
	"github.com/eventkit-go/eventstore/storage"

	"github.com/eventkit-go/eventstore/internal/tracing"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Options configures a Storage. A nil *Options and zero fields select the
// defaults.
type Options struct {
	// MaxBatch caps how many concurrent Append calls are committed in one
	// transaction. Default 128.
	MaxBatch int

	// ReadConns is the size of the pool of read-only connections used by
	// Load, ReadFeed and the projection reads. Default 4.
	ReadConns int

	// BusyTimeout is how long a statement waits for a lock held by another
	// connection (usually another process on the same file) before failing
	// with an error wrapping storage.ErrUnavailable. Default 5s.
	BusyTimeout time.Duration

	// MmapSize is how many bytes of the database file each read-only
	// connection maps into memory (SQLite's mmap_size), so that a read
	// whose rows lie far apart in a large file, such as a rare type's
	// feed, costs no system call and copy per page (such a read of 1,000
	// events in a 1,000,000-event file: 1.1–1.5× the time it takes in a
	// file of that type alone, against 1.9–2.2× unmapped). Default 0: no
	// mapping (SQLite's own default); a negative value is 0 too. Writes
	// never go through the map. The mapped pages a read touched count as
	// the process's resident memory (RSS; each read connection maps the
	// file on its own) and as mapped file memory of its container, which
	// its working set
	// (what Kubernetes evicts and kubectl top shows by) mostly includes:
	// with 1 GiB, a full feed read of a large file showed as a process of
	// over a gigabyte. Unmapped, the same pages are in the operating
	// system's page cache, charged to the container as well, but
	// reclaimed sooner and counted in no process's RSS
	// (docs/performance.md, "SQLite's memory map").
	MmapSize int64

	// CacheKiB bounds the page cache of each connection (SQLite's
	// cache_size), in KiB. Default 2,048 (SQLite's own default). A
	// program that keeps many files open at once, such as one file per
	// tenant, may lower it: each file has ReadConns+1 connections, each
	// with its own cache, at the price of more reads from the operating
	// system's cache for a file that is busy.
	CacheKiB int

	// CheckpointPages is how many pages the write-ahead log grows by
	// before a commit copies them into the database file (SQLite's
	// wal_autocheckpoint). Default 1,000 (SQLite's own default, about
	// 4 MiB). The log is reused from its start after such a checkpoint
	// and keeps the largest size it reached, so each open file holds up
	// to this many pages of log on disk; with many files open at once
	// (one per tenant) a smaller value bounds that space and brings each
	// file sooner to the steady state where a commit overwrites the log
	// in place (cheaper to sync than a log that grows), at the price of
	// more frequent, smaller checkpoints.
	CheckpointPages int

	// NoMigrate makes Open refuse a file whose schema is older than this
	// package's (or a new file) with storage.ErrSchemaVersion instead of
	// migrating it: for processes started after a deploy step that ran
	// Migrate (the server's -no-migrate and -migrate-only), so that only
	// that step changes the schema.
	NoMigrate bool

	// testMigrations, when set, replaces the migrations this package
	// knows: tests play an older or a newer program with it.
	testMigrations []migration

	// TracerProvider receives a span per storage call (append, load,
	// feed read, projection commit) made within a traced call of the
	// Store; nil follows OpenTelemetry's global provider.
	TracerProvider trace.TracerProvider
}

// Storage is the SQLite backend. Create it with Open; it is safe for
// concurrent use.
type store struct {
	path    string
	writeDB *sql.DB // exactly one connection: every write is serialised
	readDB  *sql.DB // read-only pool
	// wc is the write connection at the driver level with the append
	// statements; used only while holding it (onWriteConn).
	wc      *writeConn
	reads   rawConns // statements of the read paths, per read connection
	commits commitStmts
	loads   loadStmts
	reacts  reactionStmts
	batcher *groupcommit.Batcher[*job, storage.AppendResult]

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	tracer *tracing.Tracer // spans of storage calls (trace.go)
	// processID is the id of this Storage's row in the processes table.
	processID string
}

var _ storage.Storage = (*store)(nil)

// Open opens the SQLite database at path, creating the file when it does
// not exist, and creates or migrates its schema. opts may be nil. Hand the
// result to eventstore.New, whose Store closes it; close it yourself only
// when it is not handed over.
func Open(path string, opts *Options) (storage.Storage, error) {
	s, err := open(path, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// open is Open returning the concrete store.
func open(path string, opts *Options) (*store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.CacheKiB <= 0 {
		o.CacheKiB = 2048
	}
	if o.CheckpointPages <= 0 {
		o.CheckpointPages = 1000
	}
	o.MmapSize = max(o.MmapSize, 0)
	if strings.HasPrefix(path, "//") {
		return nil, fmt.Errorf("sqlite: open %q: a path starting with // is read as a URI authority; "+
			"give a file path such as events.db or /var/lib/events.db: %w", path, storage.ErrInvalid)
	}
	if path == "" {
		return nil, fmt.Errorf("sqlite: open: empty path: %w", storage.ErrInvalid)
	}

	cache := "&_pragma=cache_size(-" + strconv.Itoa(o.CacheKiB) + ")"
	writeDB, err := sql.Open("sqlite", DSN(path, o.BusyTimeout)+"&_txlock=immediate&_pragma=temp_store(2)"+cache+
		"&_pragma=wal_autocheckpoint("+strconv.Itoa(o.CheckpointPages)+")")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %v: %w", path, err, storage.ErrUnavailable)
	}
	writeDB.SetMaxOpenConns(1)
	writeDB.SetMaxIdleConns(1)
	writeDB.SetConnMaxLifetime(0)
	writeDB.SetConnMaxIdleTime(0)

	s := &store{path: path, writeDB: writeDB}
	if opts != nil {
		s.tracer = tracing.New(opts.TracerProvider)
	} else {
		s.tracer = tracing.New(nil)
	}
	ctx := context.Background()
	s.processID = newProcessID()
	if _, _, err := migrate(ctx, writeDB, migrateOptions{list: o.testMigrations, noMigrate: o.NoMigrate, record: s.processID}); err != nil {
		writeDB.Close()
		if errors.Is(err, storage.ErrSchemaVersion) {
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
		return nil, s.fail(ctx, "open "+path, err)
	}

	// The read pool opens after the schema exists and WAL mode is set.
	readDB, err := sql.Open("sqlite", DSN(path, o.BusyTimeout)+"&_pragma=query_only(1)"+cache+
		"&_pragma=mmap_size("+strconv.FormatInt(o.MmapSize, 10)+")")
	if err != nil {
		_ = forget(ctx, writeDB, s.processID)
		writeDB.Close()
		return nil, fmt.Errorf("sqlite: open %s: %v: %w", path, err, storage.ErrUnavailable)
	}
	readDB.SetMaxOpenConns(o.ReadConns)
	readDB.SetMaxIdleConns(o.ReadConns)
	readDB.SetConnMaxLifetime(0)
	readDB.SetConnMaxIdleTime(0)
	s.readDB = readDB

	err = s.onWriteConn(ctx, func(c *writeConn) error { return c.prepare(ctx) })
	if err != nil {
		s.closeWriteConn()
		_ = forget(ctx, writeDB, s.processID)
		readDB.Close()
		writeDB.Close()
		return nil, s.fail(ctx, "open "+path, err)
	}
	s.batcher = groupcommit.New(s.runBatch, groupcommit.Options{MaxBatch: o.MaxBatch})
	return s, nil
}

// DSN returns the database/sql data source name this package opens path
// with (driver "sqlite"): WAL journal, synchronous=FULL, the given busy
// timeout and foreign keys on. Benchmarks use it to compare with the raw
// engine under the same settings.
func DSN(path string, busyTimeout time.Duration) string {
	// SQLite URI filenames: escape what would end the path.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc +
		"?_pragma=busy_timeout(" + strconv.FormatInt(busyTimeout.Milliseconds(), 10) + ")" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(FULL)" +
		"&_pragma=foreign_keys(1)"
}

// Close waits for the Append calls already accepted, then closes the
// database. It is idempotent; every method called afterwards returns an
// error wrapping storage.ErrClosed.
func (s *store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.batcher.Close()
		s.closeWriteConn()
		// Best effort: a row left behind is forgotten once its process is
		// gone.
		_ = forget(context.Background(), s.writeDB, s.processID)
		s.closeErr = errors.Join(s.reads.close(), s.commits.close(), s.loads.close(), s.reacts.close(), s.readDB.Close(), s.writeDB.Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("sqlite: close %s: %w", s.path, s.closeErr)
		}
	})
	return s.closeErr
}

// check returns an error when the Storage is closed or ctx is done.
func (s *store) check(ctx context.Context, op string) error {
	if s.closed.Load() {
		return fmt.Errorf("sqlite: %s: %w", op, storage.ErrClosed)
	}
	return ctx.Err()
}

// closeWriteConn finalises the append statements. Errors are ignored: the
// connection is being closed too.
func (s *store) closeWriteConn() {
	_ = s.onWriteConn(context.Background(), func(c *writeConn) error { return c.close() })
}
