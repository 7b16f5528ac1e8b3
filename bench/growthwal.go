package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/postgres"
)

// With -growth-wal, the growth benchmark also says, on PostgreSQL, what a
// 1-event save costs the server at each size, in phases: right after the
// fill; after an explicit CHECKPOINT; to the same aggregates again right
// after, as many saves per writer (their pages now in shared_buffers and
// written since the checkpoint, so the difference is what a first touch
// of a page costs); and, with -growth-wal-compression, after another
// CHECKPOINT with wal_compression set for the session (a superuser's
// setting; the server's configuration is not changed). Each phase runs the
// saves of the saves figure for -append-for and prints, per save, the time
// a writer waited, the WAL written (pg_current_wal_lsn), its records and
// full-page images (pg_stat_wal), the blocks of the store's schema read
// from outside shared_buffers and found in them (pg_statio_user_tables,
// with the indexes of the events table that read at least 0.05 a save;
// the store's own ANALYZE counts too), and the checkpoints that ended and
// the buffers the checkpointer wrote meanwhile (pg_stat_bgwriter). The
// WAL figures are cluster-wide; where the server has pg_walinspect (a
// contrib extension, which -growth-wal creates in the database if it can),
// a second line per phase attributes the phase's WAL records to the
// events table and each of its indexes (bytes and full-page images a
// save), the rest of the store's schema and the rest of the cluster
// (other databases, commits), so that the figures hold while other
// clients write. Backends report their counts when idle for 10 s, so each
// phase waits 11 s before and after.

// walStats is one snapshot of the server's counters.
type walStats struct {
	lsn                         int64
	records, fpi, bytes         int64
	heapRead, heapHit           int64
	idxRead, idxHit             int64
	ckptTimed, ckptReq, ckptBuf int64
	lsnText                     string
	idx                         map[string]int64 // blocks read per index of the events table
}

// walIdle is how long a phase waits before and after for the backends'
// counts (a variable for the tests).
var walIdle = 11 * time.Second

// growthWAL are the options of -growth-wal.
type growthWAL struct {
	compression string // a wal_compression method also measured, or ""
	out         io.Writer
}

func pgWALStats(ctx context.Context, env *pgEnv, schema string) (walStats, error) {
	var s walStats
	err := env.admin.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0', pg_current_wal_lsn()::text,
  w.wal_records, w.wal_fpi, w.wal_bytes::bigint,
  b.checkpoints_timed, b.checkpoints_req, b.buffers_checkpoint,
  coalesce(sum(t.heap_blks_read + coalesce(t.toast_blks_read, 0)), 0)::bigint,
  coalesce(sum(t.heap_blks_hit + coalesce(t.toast_blks_hit, 0)), 0)::bigint,
  coalesce(sum(t.idx_blks_read), 0)::bigint, coalesce(sum(t.idx_blks_hit), 0)::bigint
FROM pg_stat_wal w, pg_stat_bgwriter b LEFT JOIN pg_statio_user_tables t ON t.schemaname = $1
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8`, schema).Scan(&s.lsn, &s.lsnText, &s.records, &s.fpi, &s.bytes,
		&s.ckptTimed, &s.ckptReq, &s.ckptBuf, &s.heapRead, &s.heapHit, &s.idxRead, &s.idxHit)
	if err != nil {
		return s, err
	}
	rows, err := env.admin.Query(ctx, `SELECT indexrelname, idx_blks_read FROM pg_statio_user_indexes
WHERE schemaname = $1 AND relname = 'events_rows'`, schema)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	s.idx = map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return s, err
		}
		s.idx[strings.TrimPrefix(name, "events_")] = n
	}
	return s, rows.Err()
}

// walPhases runs the phases of -growth-wal at the store's current size
// and prints a line per phase.
func (g *growthStore) walPhases(ctx context.Context, size int, d time.Duration, out io.Writer) error {
	// Connections opened and statements prepared (the first size
	// measures a new store).
	if _, err := g.saveRate(ctx, d/4); err != nil {
		return err
	}
	if err := g.walPhase(ctx, size, g.store, d, "after the fill", out); err != nil {
		return err
	}
	if _, err := g.env.admin.Exec(ctx, "CHECKPOINT"); err != nil {
		return err
	}
	next := slices.Clone(g.next)
	if err := g.walPhase(ctx, size, g.store, d, "after CHECKPOINT", out); err != nil {
		return err
	}
	// The same aggregates again, as many saves per writer: their pages
	// are in shared_buffers and were written since the checkpoint, so
	// what the saves cost more after CHECKPOINT is what a first touch of
	// a page costs.
	g.most = make([]int, growthWriters)
	for w := range g.most {
		g.most[w] = g.next[w] - next[w]
	}
	copy(g.next, next)
	err := g.walPhase(ctx, size, g.store, d, "to the same aggregates again", out)
	g.most = nil
	if err != nil {
		return err
	}
	if g.walCompression == "" {
		return nil
	}
	s, err := postgres.OpenURL(ctx, g.env.withParams(fmt.Sprintf("pool_max_conns=%d", g.env.conns),
		"wal_compression="+g.walCompression), &postgres.Options{Schema: g.schema})
	if err != nil {
		return err
	}
	st, err := eventstore.New(s, nil)
	if err != nil {
		s.Close()
		return err
	}
	defer st.Close()
	// Connections opened and statements prepared before the phase.
	saved := g.store
	g.store = st
	defer func() { g.store = saved }()
	if _, err := g.saveRate(ctx, d/4); err != nil {
		return err
	}
	if _, err := g.env.admin.Exec(ctx, "CHECKPOINT"); err != nil {
		return err
	}
	return g.walPhase(ctx, size, st, d, "after CHECKPOINT, wal_compression="+g.walCompression, out)
}

func (g *growthStore) walPhase(ctx context.Context, size int, st *eventstore.Store, d time.Duration, what string, out io.Writer) error {
	time.Sleep(walIdle)
	before, err := pgWALStats(ctx, g.env, g.schema)
	if err != nil {
		return err
	}
	saved := g.store
	g.store = st
	n0 := g.events
	rate, err := g.saveRate(ctx, d)
	g.store = saved
	if err != nil {
		return err
	}
	saves := float64(g.events - n0)
	// The WAL position right after the saves: the counters after the
	// wait would add what the cluster wrote meanwhile.
	var afterLSN string
	var lsn int64
	if err := g.env.admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text, pg_current_wal_lsn() - '0/0'`).Scan(&afterLSN, &lsn); err != nil {
		return err
	}
	// Read at once, before a checkpoint could remove the range's WAL.
	byRelation, err := g.walByRelation(ctx, before.lsnText, afterLSN, saves)
	if err != nil {
		return err
	}
	time.Sleep(walIdle)
	after, err := pgWALStats(ctx, g.env, g.schema)
	if err != nil {
		return err
	}
	per := func(a, b int64) float64 { return float64(b-a) / saves }
	var idx []string
	for name, n := range after.idx {
		if r := per(before.idx[name], n); r >= 0.05 {
			idx = append(idx, fmt.Sprintf("%s %.2f", name, r))
		}
	}
	sort.Strings(idx)
	fmt.Fprintf(out, "postgres at size %d (%d events), 1-event saves %s: %.0f saves, %.0f saves/s, %.2f ms a save per writer; per save: WAL %.0f bytes "+
		"(pg_stat_wal %.0f), %.2f records, %.2f full-page images; blocks read %.2f (heap %.2f, indexes %.2f: %s), hit %.1f; "+
		"checkpoints ended %d, buffers written by the checkpointer %d; WAL %s to %s\n",
		size, g.events, what, saves, rate, growthWriters*1000/rate, per(before.lsn, lsn), per(before.bytes, after.bytes),
		per(before.records, after.records), per(before.fpi, after.fpi),
		per(before.heapRead+before.idxRead, after.heapRead+after.idxRead), per(before.heapRead, after.heapRead),
		per(before.idxRead, after.idxRead), strings.Join(idx, ", "),
		per(before.heapHit+before.idxHit, after.heapHit+after.idxHit),
		after.ckptTimed+after.ckptReq-before.ckptTimed-before.ckptReq, after.ckptBuf-before.ckptBuf,
		before.lsnText, afterLSN)
	if byRelation != "" {
		fmt.Fprintf(out, "  WAL per save by relation (pg_walinspect): %s\n", byRelation)
	}
	return nil
}

// walByRelation returns the WAL records between two positions by relation
// of the store's schema, per save, when the server has pg_walinspect, and
// "" without it.
func (g *growthStore) walByRelation(ctx context.Context, from, to string, saves float64) (string, error) {
	if _, err := g.env.admin.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		return "", nil // not installed, or not allowed: the cluster-wide figures stand alone
	}
	rows, err := g.env.admin.Query(ctx, `
SELECT CASE WHEN c.relname IS NOT NULL THEN c.relname
            WHEN n.nspname IS NOT NULL THEN 'the rest of the schema'
            ELSE 'the rest of the cluster' END AS rel,
       sum(w.record_length)::bigint, count(*) FILTER (WHERE w.block_ref LIKE '%(FPW)%')
FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) w
LEFT JOIN pg_class c ON c.relfilenode = nullif(substring(w.block_ref FROM 'rel \d+/\d+/(\d+)'), '')::oid
	AND c.relnamespace = $3::regnamespace AND (c.relname = 'events_rows' OR c.relname LIKE 'events\_%')
LEFT JOIN pg_class r ON c.relname IS NULL AND r.relfilenode = nullif(substring(w.block_ref FROM 'rel \d+/\d+/(\d+)'), '')::oid
	AND r.relnamespace = $3::regnamespace
LEFT JOIN pg_namespace n ON n.oid = r.relnamespace
GROUP BY 1 ORDER BY 2 DESC`, from, to, g.schema)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var rel string
		var bytes, fpi int64
		if err := rows.Scan(&rel, &bytes, &fpi); err != nil {
			return "", err
		}
		if rel == "events_rows" {
			rel = "table"
		}
		if b, f := float64(bytes)/saves, float64(fpi)/saves; b >= 50 || f >= 0.01 {
			parts = append(parts, fmt.Sprintf("%s %.0f bytes, %.2f images", strings.TrimPrefix(rel, "events_"), b, f))
		}
	}
	return strings.Join(parts, "; "), rows.Err()
}
