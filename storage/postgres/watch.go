package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
)

var _ storage.AppendWatcher = (*store)(nil)

// WatchAppends implements storage.AppendWatcher with PostgreSQL's
// LISTEN/NOTIFY: every transaction that appends notifies the schema's
// channel once when it commits, whichever process wrote it. WatchAppends
// opens a connection of its own (with the pool's configuration, outside the
// pool; or shares Options.Listener's), LISTENs on the channel and calls
// notify once as soon as it listens (appends committed before are not
// reported otherwise), then once
// per notification, until ctx is done (it returns nil) or the Storage is
// closed (an error wrapping ErrClosed). A connection that cannot be opened
// or is lost returns an error wrapping ErrUnavailable.
func (s *store) WatchAppends(ctx context.Context, notify func()) error {
	if s.closed.Load() {
		return fmt.Errorf("postgres: watch appends: %w", storage.ErrClosed)
	}
	// Connecting again after a failover: before anything is reported,
	// find out whether the store went back (rewind.go).
	if _, err := s.LastPosition(ctx); err != nil && ctx.Err() == nil {
		return fmt.Errorf("postgres: watch appends: %w", err)
	}
	if s.listener != nil {
		return s.listener.watch(ctx, s.channel, s.tenant, notify, s.done, s.appendsInFlight)
	}
	parent := ctx
	ctx, cancel := s.untilClosed(ctx)
	defer cancel()
	stopped := func(err error) error {
		switch {
		case parent.Err() != nil:
			return nil
		case s.closed.Load():
			return fmt.Errorf("postgres: watch appends: %w", storage.ErrClosed)
		}
		return fmt.Errorf("postgres: watch appends: %v: %w", err, storage.ErrUnavailable)
	}
	cfg := s.pool.Config().ConnConfig.Copy()
	if s.listenConfig != nil {
		cfg = s.listenConfig.Copy()
	}
	// Named, so that an operator can tell the watcher from the pool's
	// connections in pg_stat_activity.
	cfg.RuntimeParams["application_name"] = watcherName(s.channel)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return stopped(err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return stopped(err)
	}
	notify()
	// While appends may be in flight, a reader may be held back by one of
	// them (see statements.watermark), and one that rolls back, or whose
	// process dies, notifies nobody. So after notifications, once none
	// has come for inFlightRecheck, look whether appends are in flight, and
	// go on looking while some are; when none is, notify once more. Under
	// a steady load notifications keep coming and nothing is looked up;
	// idle, a ping every livenessIdle (ha.go).
	pending := false
	for {
		wait := livenessIdle
		if pending {
			wait = inFlightRecheck
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil && n.Payload != s.tenant:
			// another tenant's append
		case err == nil:
			pending = true
			notify()
		case err != nil && !pending && ctx.Err() == nil && wctx.Err() != nil && !conn.IsClosed():
			// Quiet for livenessIdle: is the server still there? A
			// frozen primary answers nothing, and nothing else would
			// find out for minutes (ha.go).
			if err := pingConn(ctx, conn); err != nil {
				if ctx.Err() == nil {
					s.hung()
				}
				return stopped(fmt.Errorf("the server did not answer a ping within %v, appends and reads "+
					"waiting on it were ended and the pool's connections dropped (%w)", livenessTimeout, err))
			}
		case pending && ctx.Err() == nil && wctx.Err() != nil && !conn.IsClosed():
			// Quiet for inFlightRecheck: once none is in flight any more,
			// notify once (an append that rolled back since the last
			// notification, seen here or not, notified nobody).
			// Bounded like a ping: a frozen primary would hold this
			// query, and so the whole watch, for good.
			qctx, cancelQuery := context.WithTimeout(ctx, livenessTimeout)
			err := conn.QueryRow(qctx, s.sql.inFlight).Scan(&pending)
			timedOut := qctx.Err() != nil
			cancelQuery()
			if err != nil {
				if timedOut && ctx.Err() == nil {
					s.hung()
					return stopped(fmt.Errorf("the server did not answer within %v, appends and reads "+
						"waiting on it were ended and the pool's connections dropped (%w)", livenessTimeout, err))
				}
				return stopped(err)
			}
			if !pending {
				notify()
			}
		default:
			return stopped(err)
		}
	}
}

// inFlightRecheck is how often WatchAppends looks again while appends are
// in flight.
const inFlightRecheck = 20 * time.Millisecond

// watcherName is the application_name of the connection of WatchAppends
// for the channel: "eventstore watch <channel>", cut to the 63 bytes
// PostgreSQL keeps.
func watcherName(channel string) string {
	name := "eventstore watch " + channel
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}
