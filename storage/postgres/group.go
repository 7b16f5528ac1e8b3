package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// groupArgs are the array arguments of the appendGroup statement.
type groupArgs struct {
	types, aggIDs []string
	expected      []*int64
	offsets       []int64  // events of the requests before each request
	nth           []int64  // per request: 1 + the requests of its type before it
	feeds         []string // the distinct aggregate types
	index         []int64  // per event: its request's index, from 1
	ids, evTypes  []string
	data          [][]byte
	times         []time.Time
	enc           []string // nil when no event has EncryptedData
}

// newGroupArgs returns the arguments of appendGroup for reqs, or false when
// appendGroup cannot take them: when two requests append to the same
// aggregate (the second's version depends on the first's outcome).
func newGroupArgs(reqs []eventstore.AppendRequest, args []appendArgs) (groupArgs, bool) {
	type key struct{ typ, id string }
	seen := make(map[key]struct{}, len(reqs))
	total := 0
	hasEnc := false
	for i, r := range reqs {
		hasEnc = hasEnc || args[i].enc != nil
		k := key{r.AggregateType, r.AggregateID}
		if _, dup := seen[k]; dup {
			return groupArgs{}, false
		}
		seen[k] = struct{}{}
		total += len(r.Events)
	}
	g := groupArgs{
		types:    make([]string, len(reqs)),
		aggIDs:   make([]string, len(reqs)),
		expected: make([]*int64, len(reqs)),
		offsets:  make([]int64, len(reqs)),
		nth:      make([]int64, len(reqs)),
		index:    make([]int64, 0, total),
		ids:      make([]string, 0, total),
		evTypes:  make([]string, 0, total),
		data:     make([][]byte, 0, total),
		times:    make([]time.Time, 0, total),
	}
	if hasEnc {
		g.enc = make([]string, 0, total)
	}
	perType := make(map[string]int64, 1)
	for i, r := range reqs {
		a := &args[i]
		g.types[i], g.aggIDs[i], g.expected[i] = r.AggregateType, r.AggregateID, a.expected
		n, seen := perType[r.AggregateType]
		if !seen {
			g.feeds = append(g.feeds, r.AggregateType)
		}
		perType[r.AggregateType] = n + 1
		g.nth[i] = n + 1
		g.offsets[i] = int64(len(g.ids))
		for k := range a.ids {
			g.index = append(g.index, int64(i+1))
			g.ids = append(g.ids, a.ids[k])
			g.evTypes = append(g.evTypes, a.types[k])
			g.data = append(g.data, a.data[k])
			g.times = append(g.times, a.times[k])
			if hasEnc {
				enc := ""
				if a.enc != nil {
					enc = a.enc[k]
				}
				g.enc = append(g.enc, enc)
			}
		}
	}
	return g, true
}

// runGroup tries to append every request of reqs with one appendGroup
// statement: the append lock and the statement are sent as one pipeline,
// which the server runs as one implicit transaction, committed at its end.
// It returns done == false, having written nothing, when appendGroup cannot
// take the group or the server refused it (an id already stored, a version
// that does not match, bad input): the caller then runs the requests one
// by one, which decides each. An error means the outcome is unknown.
func (s *Storage) runGroup(ctx context.Context, conn *pgxpool.Conn, reqs []eventstore.AppendRequest,
	args []appendArgs, results []appendResult) (done bool, err error) {
	g, ok := newGroupArgs(reqs, args)
	if !ok {
		return false, nil
	}
	b := &pgx.Batch{}
	b.Queue("SELECT pg_advisory_xact_lock($1)", s.appendKey)
	b.Queue(s.sql.appendGroup, g.types, g.aggIDs, g.expected, g.offsets,
		g.index, g.ids, g.evTypes, g.data, g.times, g.enc, g.nth, g.feeds)
	br := conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return false, err
	}
	err = s.readGroup(br, reqs, g.offsets, results)
	// Close reads the end of the pipeline: only then is the transaction
	// known to be committed.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return true, nil
	}
	clear(results)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || classify(err) == eventstore.ErrUnavailable {
		return false, err
	}
	return false, nil // rolled back; decide one by one
}

// readGroup reads the rows of appendGroup into results.
func (s *Storage) readGroup(br pgx.BatchResults, reqs []eventstore.AppendRequest, offsets []int64, results []appendResult) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var current, head int64
		if err := rows.Scan(&current, &head); err != nil {
			return err
		}
		if i >= len(reqs) {
			return errors.Join(errBug, errors.New("appendGroup returned too many rows"))
		}
		results[i] = appendResult{Value: eventstore.AppendResult{
			Version:  current + 1,
			Position: head + offsets[i] + int64(len(reqs[i].Events)),
		}}
		i++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != len(reqs) {
		return errors.Join(errBug, errors.New("appendGroup returned too few rows"))
	}
	return nil
}
