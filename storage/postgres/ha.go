package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var _ storage.WriteProber = (*store)(nil)

// ProbeWrite implements storage.WriteProber: it updates a row of the
// schema's schema_migrations table to the value it holds, in a transaction
// committed like an append (the session's synchronous_commit), so that it
// fails on a read-only standby (SQLSTATE 25006) and waits as an append
// would for the synchronous standbys, for at most probeTimeout (the
// transaction's statement_timeout, which also ends the COMMIT's wait:
// PostgreSQL then warns that the wait was cancelled, which ProbeWrite
// reports as ErrUnavailable, as it does a probe that took that long). The
// row is the oldest migration's; the update changes nothing but the row's
// version on disk. The caller's ctx bounds it too.
func (s *store) ProbeWrite(ctx context.Context) error {
	if err := s.check(ctx, "probe write"); err != nil {
		return err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	unavailable := func(err error) error {
		err = s.fail(ctx, "probe write", err)
		if !errors.Is(err, storage.ErrUnavailable) && !errors.Is(err, storage.ErrClosed) {
			err = fmt.Errorf("%w: %w", err, storage.ErrUnavailable)
		}
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return unavailable(err)
	}
	defer conn.Release()
	takeSyncWarning(conn.Conn().PgConn())
	start := time.Now()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(fmt.Sprintf("SET LOCAL statement_timeout = %d", probeTimeout.Milliseconds()))
	b.Queue(s.sql.probe)
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	err = execN(br, 4)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback(conn)
		return unavailable(err)
	}
	if msg := takeSyncWarning(conn.Conn().PgConn()); msg != "" {
		return fmt.Errorf("postgres: probe write: the synchronous standbys did not confirm the commit (PostgreSQL: %s): %w",
			msg, storage.ErrUnavailable)
	}
	if took := time.Since(start); took >= probeTimeout {
		return fmt.Errorf("postgres: probe write: the commit took %v (the synchronous standbys do not answer?): %w",
			took.Round(time.Millisecond), storage.ErrUnavailable)
	}
	return nil
}

// probeTimeout bounds the transaction of ProbeWrite on the server.
const probeTimeout = 700 * time.Millisecond

// probeSQL is the statement of ProbeWrite.
const probeSQL = `UPDATE {{schema}}.schema_migrations SET applied_at = applied_at
WHERE version = (SELECT min(version) FROM {{schema}}.schema_migrations)`

// readOnlyHelp says what to do when the URL leads to a read-only server.
const readOnlyHelp = "the server is a read-only standby (or in a read-only transaction by default); " +
	"point the URL at the primary, or list every host of the cluster with target_session_attrs=read-write " +
	"(postgres://user@host1,host2/db?target_session_attrs=read-write) so that connections find the primary"

// DefaultConnectTimeout is how long a connection attempt waits for each
// host when the connection string sets no connect_timeout (Configure). A
// frozen primary (a hung VM, a partition that drops packets) accepts no
// connection and refuses none: without a bound each attempt waits for the
// kernel's TCP timeouts, minutes; with a multi-host URL and
// target_session_attrs=read-write the next attempt goes on to the next host
// after this. Two seconds is ample for a handshake on a local network and
// keeps the first save after a promotion within seconds.
const DefaultConnectTimeout = 2 * time.Second

// Keepalive defaults of Configure: an idle connection to a host that
// vanished is found dead after KeepAliveIdle + KeepAliveCount ×
// KeepAliveInterval (11 s), and one whose sent data is not acknowledged
// after TCPUserTimeout (Linux only): the pool then drops it instead of
// waiting for the kernel's default of about two hours (keepalive) or
// fifteen minutes (retransmissions).
const (
	KeepAliveIdle     = 5 * time.Second
	KeepAliveInterval = 2 * time.Second
	KeepAliveCount    = 3
	TCPUserTimeout    = 10 * time.Second
)

// Configure sets on cfg what OpenURL sets on the pools it creates, for a
// pool that the caller creates and hands to Open:
//
//   - when the connection string set no connect_timeout,
//     DefaultConnectTimeout per host, and a dialer with TCP keepalives
//     (KeepAliveIdle, KeepAliveInterval, KeepAliveCount) and, on Linux,
//     TCP_USER_TIMEOUT (TCPUserTimeout);
//   - a notice handler (chained before any set already) that records the
//     warning PostgreSQL gives when a commit's wait for synchronous
//     replication is cancelled ("canceling wait for synchronous
//     replication ... committed locally"), so that such an append is
//     reported as an unknown outcome (ErrUnavailable) instead of stored.
//
// A connection string that sets connect_timeout keeps its own dialer.
func Configure(cfg *pgxpool.Config) {
	configureConn(cfg.ConnConfig)
}

// configureConn is Configure on the configuration of one connection.
func configureConn(cc *pgx.ConnConfig) {
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = DefaultConnectTimeout
		d := &net.Dialer{
			Timeout: DefaultConnectTimeout,
			KeepAliveConfig: net.KeepAliveConfig{
				Enable: true, Idle: KeepAliveIdle, Interval: KeepAliveInterval, Count: KeepAliveCount,
			},
			Control: setUserTimeout,
		}
		cc.DialFunc = d.DialContext
	}
	next := cc.OnNotice
	cc.OnNotice = func(c *pgconn.PgConn, n *pgconn.Notice) {
		noteSyncWarning(c, n)
		if next != nil {
			next(c, n)
		}
	}
}

// syncWarningKey is the key of pgconn.PgConn.CustomData under which
// noteSyncWarning records a cancelled wait for synchronous replication.
const syncWarningKey = "eventstore.syncWarning"

// noteSyncWarning records on c a warning that a commit's wait for
// synchronous replication was cancelled: SQLSTATE 01000 (a plain
// warning: pg_cancel_backend, statement_timeout) or 57P01 (the session
// being terminated), whose text PostgreSQL translates, so the codes are
// what is matched. No other warning comes from the statements of an
// append's transaction.
func noteSyncWarning(c *pgconn.PgConn, n *pgconn.Notice) {
	if !strings.EqualFold(n.Severity, "WARNING") || (n.Code != "01000" && n.Code != "57P01") {
		return
	}
	msg := n.Message
	if n.Detail != "" {
		msg += " (" + n.Detail + ")"
	}
	c.CustomData()[syncWarningKey] = msg
}

// takeSyncWarning returns and clears the warning noteSyncWarning recorded
// on c, or "".
func takeSyncWarning(c *pgconn.PgConn) string {
	data := c.CustomData()
	msg, _ := data[syncWarningKey].(string)
	if msg != "" {
		delete(data, syncWarningKey)
	}
	return msg
}

// errNotReplicated is the error of the requests of an append whose
// commit's wait for synchronous replication was cancelled.
var errNotReplicated = errors.New("the commit was cancelled while it waited for the synchronous standbys: " +
	"it may be stored on the primary alone, and lost if it fails over; retry with the same event ids")

// checkReplicated turns the results of an append transaction on conn that
// committed with a cancelled wait for synchronous replication into an
// unknown outcome (ErrUnavailable): the events are committed locally but
// not acknowledged by the standbys, so they are not reported as stored.
// Requests refused on their own keep their errors.
func (s *store) checkReplicated(conn *pgxpool.Conn, results []appendResult) {
	msg := takeSyncWarning(conn.Conn().PgConn())
	if msg == "" {
		return
	}
	err := fmt.Errorf("postgres: append: %w (PostgreSQL: %s): %w", errNotReplicated, msg, storage.ErrUnavailable)
	for i := range results {
		if results[i].Err == nil {
			results[i] = appendResult{Err: err}
		}
	}
}

// Liveness of the server: WatchAppends's connection, idle for
// livenessIdle, pings the server; one that does not answer within
// livenessTimeout is taken as hung (a frozen primary: a stopped VM, a
// partition that drops packets), and the Storage gives up what waits on it
// (hung).
const (
	livenessIdle    = 2 * time.Second
	livenessTimeout = time.Second
)

// errHung is the cause of the contexts hung cancels.
var errHung = fmt.Errorf("%w: the server stopped answering (a liveness ping timed out)", errOwnDeadline)

// liveCtx returns the context that hung cancels.
func (s *store) liveCtx() context.Context {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live == nil {
		s.live, s.killLive = context.WithCancelCause(context.Background())
	}
	return s.live
}

// withLive returns ctx, also cancelled (cause errHung) when hung is
// called, and the function that releases it.
func (s *store) withLive(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.liveCtx(), func() { cancel(errHung) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// hung is called when the server stopped answering: every append and read
// waiting on it fails at once with ErrUnavailable (an append's outcome is
// then unknown, as after WriteTimeout), and the pool drops its
// connections, so that the next ones are made again, to the new primary
// with a multi-host URL and target_session_attrs=read-write.
func (s *store) hung() {
	s.liveMu.Lock()
	if s.killLive != nil {
		s.killLive(errHung)
	}
	s.live, s.killLive = context.WithCancelCause(context.Background())
	s.liveMu.Unlock()
	s.pool.Reset()
}

// pingConn pings conn within livenessTimeout.
func pingConn(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, livenessTimeout)
	defer cancel()
	return conn.Ping(ctx)
}

// poolerHint says what to change when err is a pooler's refusal of a
// startup parameter the driver sends (PgBouncer answers 08P01
// "unsupported startup parameter"), else "".
func poolerHint(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "08P01" || !strings.Contains(pgErr.Message, "unsupported startup parameter") {
		return ""
	}
	return "a connection pooler (PgBouncer) refused a startup parameter that the store sends; set " +
		"ignore_startup_parameters = extra_float_digits,default_transaction_isolation in its configuration " +
		"(see docs/high-availability.md)"
}
