package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// groupArgs are the array arguments of one appendGroup statement: one
// round of requests, on distinct aggregates.
type groupArgs struct {
	types, aggIDs []string
	expected      []*int64
	doomed        []bool  // per request: refuse it without a check
	counts        []int64 // per request: its number of events
	index         []int64 // per event: its request's index in the round, from 1
	ord           []int64 // per event: its place in its request, from 1
	ids, evTypes  []string
	data          [][]byte
	times         []time.Time
	enc           []string // nil when no event has EncryptedData
	meta          []string // nil when no event has Metadata
}

// rounds splits the requests of a batch into rounds, keeping their order
// on each aggregate: a request's outcome depends on the requests before it
// on its aggregate, which an earlier round decides. The rounds of a batch
// run in order, one statement each, in one transaction.
//
// A request that expects the same version as the last request before it on
// its aggregate that may write (its leader) cannot pass its version check:
// either the leader wrote, or the aggregate is not at that version. Such a
// request is doomed (refused, unless it repeats a stored save, which
// appendGroup looks up): it goes into the round after its leader's with
// every other request doomed by that leader, so that a batch of writers
// contending for one aggregate takes two statements, not one per writer.
// Every other request goes into the round after the last one its aggregate
// is in. A round holds at most one request per aggregate that may write.
func rounds(reqs []storage.AppendRequest) (out [][]int, doomed []bool) {
	doomed = make([]bool, len(reqs))
	if len(reqs) == 1 {
		return [][]int{{0}}, doomed
	}
	type key struct{ typ, id string }
	type agg struct {
		leader    int // the round of the last request that may write
		expected  int64
		explicit  bool // whether that request expects a version
		lastRound int  // the last round holding a request of the aggregate
	}
	seen := make(map[key]*agg, len(reqs))
	for i, r := range reqs {
		k := key{r.AggregateType, r.AggregateID}
		v, explicit := r.ExpectedVersion.Version()
		a := seen[k]
		round := 0
		switch {
		case a == nil:
			seen[k] = &agg{expected: v, explicit: explicit}
		case explicit && a.explicit && v == a.expected:
			round = a.leader + 1
			doomed[i] = true
			a.lastRound = max(a.lastRound, round)
		default:
			round = a.lastRound + 1
			*a = agg{leader: round, expected: v, explicit: explicit, lastRound: round}
		}
		if round == len(out) {
			out = append(out, make([]int, 0, len(reqs)-i))
		}
		out[round] = append(out[round], i)
	}
	return out, doomed
}

// orderedRounds splits the requests of an AppendAll into rounds that keep
// their order: each round is the longest run of requests, from where the
// round before it ends, on distinct aggregates. A request for an aggregate
// of the round is the start of the next one, so that it sees the writes of
// the requests before it, and positions rise with the request index. No
// request is doomed: each is checked against its aggregate as the rounds
// before it left it.
func orderedRounds(reqs []storage.AppendRequest) (out [][]int, doomed []bool) {
	doomed = make([]bool, len(reqs))
	type key struct{ typ, id string }
	in := make(map[key]bool, len(reqs)) // the aggregates of the round
	start := 0
	for i, r := range reqs {
		k := key{r.AggregateType, r.AggregateID}
		if in[k] {
			out = append(out, seq(start, i))
			start = i
			clear(in)
		}
		in[k] = true
	}
	return append(out, seq(start, len(reqs))), doomed
}

// seq returns the indexes from start up to end, end excluded.
func seq(start, end int) []int {
	s := make([]int, end-start)
	for i := range s {
		s[i] = start + i
	}
	return s
}

// newGroupArgs returns the arguments of appendGroup for the requests of
// reqs listed in round (see rounds).
func newGroupArgs(reqs []storage.AppendRequest, args []appendArgs, round []int, doomed []bool) groupArgs {
	total := 0
	hasEnc, hasMeta := false, false
	for _, i := range round {
		hasEnc = hasEnc || args[i].enc != nil
		hasMeta = hasMeta || args[i].meta != nil
		total += len(reqs[i].Events)
	}
	g := groupArgs{
		types:    make([]string, len(round)),
		aggIDs:   make([]string, len(round)),
		expected: make([]*int64, len(round)),
		doomed:   make([]bool, len(round)),
		counts:   make([]int64, len(round)),
		index:    make([]int64, 0, total),
		ord:      make([]int64, 0, total),
		ids:      make([]string, 0, total),
		evTypes:  make([]string, 0, total),
		data:     make([][]byte, 0, total),
		times:    make([]time.Time, 0, total),
	}
	if hasEnc {
		g.enc = make([]string, 0, total)
	}
	if hasMeta {
		g.meta = make([]string, 0, total)
	}
	for j, i := range round {
		r, a := &reqs[i], &args[i]
		g.types[j], g.aggIDs[j], g.expected[j] = r.AggregateType, r.AggregateID, a.expected
		g.counts[j], g.doomed[j] = int64(len(a.ids)), doomed[i]
		for k := range a.ids {
			g.index = append(g.index, int64(j+1))
			g.ord = append(g.ord, int64(k+1))
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
			if hasMeta {
				meta := ""
				if a.meta != nil {
					meta = a.meta[k]
				}
				g.meta = append(g.meta, meta)
			}
		}
	}
	return g
}

// runGroup appends reqs with one appendGroup statement per round (see
// rounds, and orderedRounds under strict; appendOne for a round of one request, appendSingle for one of
// one event), sent after reserve as one pipeline in one transaction, with
// its COMMIT and the notification (queueCommit). appendGroup
// decides every request itself, conflicts included, without failing, so
// that a contended aggregate costs no error, no savepoint and no extra
// round trip. With strict set (AppendAll: all or nothing), a request
// refused for its version fails the statement instead.
//
// It returns done == false, having written nothing, when the server
// refused the pipeline (an event id already stored in a request that
// passed its version check, bad input, or a refusal under strict): the
// caller then decides the requests one by one. An error means the outcome
// is unknown.
func (s *store) runGroup(ctx context.Context, conn *pgxpool.Conn, reqs []storage.AppendRequest,
	args []appendArgs, results []appendResult, strict bool) (done bool, err error) {
	rs, doomed := rounds(reqs)
	if strict {
		rs, doomed = orderedRounds(reqs) // AppendAll: in request order
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	n := 1 + s.queueLock(b, reqs)
	// A round's positions follow those reserved for the rounds before it.
	var off int64
	for _, round := range rs {
		roundOff := off
		for _, i := range round {
			off += int64(len(reqs[i].Events))
		}
		if len(round) == 1 && len(reqs[round[0]].Events) == 1 {
			i := round[0]
			r, a := &reqs[i], &args[i]
			var enc *string
			if a.enc != nil {
				enc = &a.enc[0]
			}
			b.Queue(s.sql.appendSingle, r.AggregateType, r.AggregateID, a.expected, a.ids[0], a.types[0], a.data[0], a.times[0], enc,
				strict, doomed[i], roundOff, a.meta0())
			continue
		}
		if len(round) == 1 {
			i := round[0]
			r, a := &reqs[i], &args[i]
			b.Queue(s.sql.appendOne, r.AggregateType, r.AggregateID, a.expected, a.ids, a.types, a.data, a.times, a.enc,
				strict, doomed[i], roundOff, a.meta)
			continue
		}
		g := newGroupArgs(reqs, args, round, doomed)
		b.Queue(s.sql.appendGroup, g.types, g.aggIDs, g.expected, g.counts,
			g.index, g.ids, g.evTypes, g.data, g.times, g.enc, g.ord, roundOff, strict, g.doomed, g.meta)
	}
	s.queueCommit(b)
	br := conn.SendBatch(ctx, b)
	err = s.readReserve(br, n)
	for _, round := range rs {
		if err != nil {
			break
		}
		err = s.readGroup(br, reqs, round, results)
	}
	if err == nil {
		err = s.readCommit(br)
	} else {
		br.Close()
	}
	if err == nil {
		return true, nil
	}
	clear(results)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || classify(err) == storage.ErrUnavailable {
		return false, err
	}
	// Rolled back, the append lock still held: release it, then decide
	// one by one.
	return false, release(ctx, conn)
}

// readGroup reads the rows of one appendGroup statement into the results
// of the requests listed in round. The rows come in request order: for a
// written request one row of kind 0, for a refused one a row of kind 1
// followed by a row of kind 2 per event id of the request already stored.
func (s *store) readGroup(br pgx.BatchResults, reqs []storage.AppendRequest, round []int, results []appendResult) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		written int64 // events written by the requests read so far
		j       = -1  // the request read last, in round
		refused bool  // whether it was refused
		current int64 // its aggregate's version
		stored  []storage.Event
	)
	// decide settles a refused request with storage.PlanAppend.
	decide := func() error {
		if !refused {
			return nil
		}
		req := reqs[round[j]]
		res, done, err := storage.PlanAppend(req, current, stored)
		if err == nil && !done {
			return fmt.Errorf("%w: appendGroup refused %s/%s that PlanAppend would write", errBug, req.AggregateType, req.AggregateID)
		}
		results[round[j]] = appendResult{Value: res, Err: err}
		refused, stored = false, nil
		return nil
	}
	for rows.Next() {
		var (
			kind, ri, version, position int64
			e                           storage.Event // a stored event's type, data, ...
			meta                        string
			data                        []byte
		)
		if err := rows.Scan(&kind, &ri, &version, &position, &e.ID, &e.Type, &data, &e.EncryptedData, &meta); err != nil {
			return err
		}
		e.Data = data
		if kind == 2 {
			if !refused || ri != int64(j+1) {
				return fmt.Errorf("%w: appendGroup returned a stored event out of place", errBug)
			}
			if e.Metadata, err = storage.ParseMetadataString(meta); err != nil {
				return err
			}
			e.Version, e.Position = version, position
			stored = append(stored, e)
			continue
		}
		if err := decide(); err != nil {
			return err
		}
		j++
		if j >= len(round) || ri != int64(j+1) {
			return fmt.Errorf("%w: appendGroup returned request %d in place %d of %d", errBug, ri, j+1, len(round))
		}
		if kind == 1 {
			refused, current = true, version
			continue
		}
		written += int64(len(reqs[round[j]].Events))
		results[round[j]] = appendResult{Value: storage.AppendResult{Version: version + 1, Position: position + written}}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := decide(); err != nil {
		return err
	}
	if j != len(round)-1 {
		return fmt.Errorf("%w: appendGroup returned %d of %d requests", errBug, j+1, len(round))
	}
	return nil
}
