package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// transactionPoolerHelp is the refusal of Open when the pool goes through
// a pooler in transaction (or statement) mode and notifications would go
// through it too.
const transactionPoolerHelp = "the connections go through a connection pooler in transaction mode " +
	"(PgBouncer's pool_mode = transaction or statement: the pool's connections do not keep a server session of their own), " +
	"through which LISTEN cannot work: notifications between processes would be lost and saves of other processes seen only " +
	"at the poll; give a direct connection string to the primary for the notifications (postgres.Options.ListenURL, " +
	"the server's -postgres-listen-url flag), or use pool_mode = session"

// execModeHint is added to errTransactionPooler when the pool prepares
// named statements.
const execModeHint = "; also set default_query_exec_mode=exec in the URL: named prepared statements do not survive " +
	"a change of server session (unless the pooler keeps them, as PgBouncer 1.21+ does with max_prepared_statements)"

// poolerPattern is the order in which detectTransactionPooler asks its
// two connections for their server sessions: alternating, and each twice
// in a row, so that a pooler handing out its server connections last
// used first (PgBouncer's default) and one handing them out in turn
// (server_round_robin) both show.
var poolerPattern = []int{0, 1, 0, 0, 1, 1}

// detectTransactionPooler reports whether the connections of pool reach
// server sessions that they do not own, as through PgBouncer in
// transaction or statement mode: it holds two connections of the pool
// and asks them in turn (poolerPattern) for their server process ids
// (one simple-protocol round trip each, which every pooler mode and exec
// mode passes). Connected to PostgreSQL (or through a pooler in session
// mode) each connection is one session: its id never changes and the two
// differ. Through a transaction pooler the server session goes back to
// the pooler after each round trip, and the next round trip of either
// connection usually gets the same one (PgBouncer hands out the most
// recently used server connection first) or, with round-robin, another:
// either shows (poolerPattern). The test can only miss (other clients of the pooler taking
// the freed session every time), never accuse a direct connection. With
// a pool of one connection, or none free within a second, it asks one
// connection alone, which sees only a change of session.
func detectTransactionPooler(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	a, err := pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer a.Release()
	conns := []*pgxpool.Conn{a}
	if pool.Config().MaxConns >= 2 {
		bctx, cancel := context.WithTimeout(ctx, time.Second)
		b, err := pool.Acquire(bctx)
		cancel()
		if err == nil {
			defer b.Release()
			conns = append(conns, b)
		} else if ctx.Err() != nil {
			return false, err
		}
	}
	pids := make([]string, len(conns))
	for _, i := range poolerPattern {
		if i >= len(conns) {
			i = 0
		}
		pid, err := backendPID(ctx, conns[i])
		if err != nil {
			return false, err
		}
		switch {
		case pids[i] != "" && pid != pids[i]:
			return true, nil // one connection, another session
		case len(conns) == 2 && pids[1-i] == pid:
			return true, nil // two connections, one session
		}
		pids[i] = pid
	}
	return false, nil
}

// backendPID returns the server process id of the session that answers
// the next round trip of c.
func backendPID(ctx context.Context, c *pgxpool.Conn) (string, error) {
	rs, err := c.Conn().PgConn().Exec(ctx, "SELECT pg_backend_pid()").ReadAll()
	if err != nil {
		return "", err
	}
	if len(rs) != 1 || len(rs[0].Rows) != 1 || len(rs[0].Rows[0]) != 1 {
		return "", errors.New("SELECT pg_backend_pid() answered no row")
	}
	return string(rs[0].Rows[0][0]), nil
}

// checkPooler refuses pool when it goes through a transaction pooler and
// the Storage would listen for notifications through it: no ListenURL,
// and no Listener of another server's connections.
func checkPooler(ctx context.Context, pool *pgxpool.Pool, opts *Options) error {
	var listener *Listener
	if opts != nil {
		if opts.ListenURL != "" && opts.Listener == nil {
			return nil
		}
		listener = opts.Listener
	}
	if listener != nil && !sameServer(listener.pool.Config().ConnConfig, pool.Config().ConnConfig) {
		return nil
	}
	pooled, err := detectTransactionPooler(ctx, pool)
	if err != nil {
		return fmt.Errorf("postgres: open: %v: %w", err, storage.ErrUnavailable)
	}
	if !pooled {
		return nil
	}
	msg := transactionPoolerHelp
	if pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		msg += execModeHint
	}
	return fmt.Errorf("postgres: open: %s: %w", msg, storage.ErrInvalid)
}

// sameServer reports whether a and b connect to the same host, port and
// database.
func sameServer(a, b *pgx.ConnConfig) bool {
	return a.Host == b.Host && a.Port == b.Port && a.Database == b.Database
}
