package postgres

import (
	"context"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
)

// RewindMargin is how far past the highest position a Storage has seen
// it numbers appends after it finds the store rewound (storage.Rewinder):
// room for the positions that other processes handed out and this one
// did not see. A process that runs a Projector reads the feed as it grows,
// so what it has seen is close to the feed's head when the failover comes;
// a million positions is hours of saves at the rates this backend reaches,
// and costs nothing but the jump in the numbers.
const RewindMargin = 1_000_000

// rewindCheckEvery bounds how often a read that finds the feed below
// what the Storage has seen asks whether the store went back.
const rewindCheckEvery = time.Second

var _ storage.Rewinder = (*store)(nil)

// see records that position p was handed out or read.
func (s *store) see(p int64) {
	if s.replica != nil {
		s = s.replica.primary // what a replica shows, the primary had
	}
	for {
		cur := s.seen.Load()
		if p <= cur || s.seen.CompareAndSwap(cur, p) {
			return
		}
	}
}

// sawHead records the head of a feed read and, when it is below what the
// Storage has seen, asks (at most once per rewindCheckEvery) whether the
// store went back. A head a little behind is usual (an append committed
// while an older one is in flight holds readers back): the check reads the
// positions sequence, which only a rewind puts below what was seen.
func (s *store) sawHead(ctx context.Context, head int64) {
	if s.replica != nil {
		s.see(head) // a replica behind is no rewind: it lags
		return
	}
	seen := s.seen.Load()
	if head >= seen {
		s.see(head)
		return
	}
	now := time.Now().UnixNano()
	last := s.rewindChecked.Load()
	if now-last < int64(rewindCheckEvery) || !s.rewindChecked.CompareAndSwap(last, now) {
		return
	}
	_, _ = s.checkRewind(ctx) // an error leaves it to the next read or append
}

// readReserve reads the results of the first n statements of an append's
// pipeline, the last of them reserve (see queueLock), and reports a rewind
// that reserve found.
func (s *store) readReserve(br pgx.BatchResults, n int) error {
	if err := execN(br, n-1); err != nil {
		return err
	}
	// seen is what the statement was given: s.seen may have moved since
	// (the pipeline commits before its results are read, and a reader
	// of the feed may see the append's position first).
	var was, seen int64
	if err := br.QueryRow().Scan(nil, nil, nil, &was, &seen); err != nil {
		return err
	}
	if was <= seen {
		// reserve took the block after seen + RewindMargin instead.
		s.rewound(storage.Rewind{Seen: seen, Found: was - 1, Resumed: seen + RewindMargin})
	}
	return nil
}

// rewound reports a rewind to the handler set with OnRewind.
func (s *store) rewound(r storage.Rewind) {
	s.rewinds.Add(1)
	if f := s.onRewind.Load(); f != nil {
		(*f)(r)
	}
}

// OnRewind implements storage.Rewinder.
func (s *store) OnRewind(f func(storage.Rewind)) {
	if f == nil {
		s.onRewind.Store(nil)
		return
	}
	s.onRewind.Store(&f)
}

// LastPosition implements storage.Rewinder: the highest position stored
// or deleted, ignoring the watermark.
func (s *store) LastPosition(ctx context.Context) (int64, error) {
	if err := s.check(ctx, "last position"); err != nil {
		return 0, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	last, err := s.checkRewind(ctx)
	if err != nil {
		return 0, s.fail(ctx, "last position", err)
	}
	return last, nil
}

// checkRewind reads the highest position stored or deleted and the
// positions sequence. When the sequence is below what the Storage has
// seen, the store went back: it moves the sequence past seen +
// RewindMargin (under the append lock, so that no append of this tenant
// takes a number meanwhile) and reports the rewind. It returns the highest
// position stored or deleted.
func (s *store) checkRewind(ctx context.Context) (int64, error) {
	// seen before the sequence: every position seen by then was below
	// the sequence, unless it went back.
	seen := s.seen.Load()
	var last, sequence int64
	if err := s.queryRowWM(ctx, []any{&last, &sequence}, s.sql.lastPosition); err != nil {
		return 0, err
	}
	if sequence >= seen {
		return last, nil
	}
	var moved bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.appendKey); err != nil {
			return err
		}
		return tx.QueryRow(ctx, s.sql.advance, seen+RewindMargin).Scan(&moved)
	})
	if err != nil {
		return 0, err
	}
	if moved {
		s.rewound(storage.Rewind{Seen: seen, Found: sequence, Resumed: seen + RewindMargin})
	}
	return last, nil
}

// Rewinds returns how many rewinds s, a Storage of this package, has
// found since it was opened (storage.Rewinder); 0 when s is not one.
func Rewinds(s storage.Storage) int64 {
	pg, ok := asStore(s)
	if !ok {
		return 0
	}
	return pg.rewinds.Load()
}

// rewindStatements are the statements of rewind detection.
func rewindStatements(q func(string) string) (lastPosition, advance string) {
	lastPosition = q(`SELECT greatest(
	(SELECT position FROM {{schema}}.events ORDER BY position DESC LIMIT 1),
	(SELECT mark FROM {{schema}}.deleted_marks WHERE feed = ''), 0),
	(SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM {{schema}}.positions)`)
	// advance moves the sequence to $1 unless it is there already (the
	// caller holds the append lock), and reports whether it moved it.
	advance = q(`SELECT CASE WHEN v < $1::bigint THEN setval({{positions}}, $1::bigint) IS NOT NULL ELSE false END
FROM (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END AS v FROM {{schema}}.positions) s`)
	return lastPosition, advance
}
