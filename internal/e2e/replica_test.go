package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/storagetest"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replicaApp is the application_name of the replica connections in these
// tests, by which the standby's pg_stat_activity shows them.
const replicaApp = "eventstore-replica-test"

func (n *pgNode) replicaURL() string { return n.url + "&application_name=" + replicaApp }

// openReplicated opens schema on primary with standby as its read replica.
func openReplicated(t *testing.T, primary, standby *pgNode, schema string, opts *postgres.Options) (storage.Storage, *eventstore.Store) {
	t.Helper()
	o := postgres.Options{}
	if opts != nil {
		o = *opts
	}
	o.Schema = schema
	o.Replicas = []string{standby.replicaURL()}
	s, err := postgres.OpenURL(context.Background(), primary.url, &o)
	require.NoError(t, err)
	st, err := eventstore.New(s, &eventstore.Options{PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return s, st
}

// openPlain opens schema on primary alone: another process, as far as the
// replicated Storage knows.
func openPlain(t *testing.T, primary *pgNode, schema string) *eventstore.Store {
	t.Helper()
	s, err := postgres.OpenURL(context.Background(), primary.url, &postgres.Options{Schema: schema})
	require.NoError(t, err)
	st, err := eventstore.New(s, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func replicaReads(s storage.Storage) int64 {
	rs, _ := postgres.ReplicaStatus(s)
	var n int64
	for _, r := range rs {
		n += r.Reads
	}
	return n
}

func placeOrderOn(t *testing.T, st *eventstore.Store, id string) eventstore.SaveResult {
	t.Helper()
	res, err := st.Save(context.Background(), "order", id, []eventstore.NewEvent{{ID: uuid.NewString(), Type: "Placed", Data: json.RawMessage(`{}`)}}, nil)
	require.NoError(t, err)
	return res
}

// setStandby appends a setting to the standby's configuration and reloads it.
func (n *pgNode) setStandby(setting string) {
	appendFile(n.t, filepath.Join(n.data(), "postgresql.conf"), "\n"+setting+"\n")
	n.exec("SELECT pg_reload_conf()")
}

// waitCaughtUp waits until standby has replayed all the WAL primary has
// inserted, also what was committed without waiting for its flush (a
// projector's commits, synchronous_commit off) and what servers write in
// the background, which waitReplayed (the write position) may leave out.
// (A transaction that only takes an id, pg_current_xact_id(), does not
// flush either: it wrote no WAL before its commit record, so it commits
// asynchronously; waiting on the write position after one let this return
// before a projector's commit was replayed, 6 of 10 runs with a
// pg_basebackup standby.) The standby receives what the WAL writer
// flushes, within wal_writer_delay.
func waitCaughtUp(t *testing.T, primary, standby *pgNode) {
	t.Helper()
	waitReplayedTo(t, primary, standby, "pg_current_wal_insert_lsn()")
}

// pauseReplay pauses the standby's replay and waits until it has paused
// (pg_wal_replay_pause only asks for it: a record may still be replayed).
func (n *pgNode) pauseReplay() {
	n.t.Helper()
	n.exec("SELECT pg_wal_replay_pause()")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, n.url)
	require.NoError(n.t, err)
	defer c.Close(ctx)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var state string
		require.NoError(n.t, c.QueryRow(ctx, "SELECT pg_get_wal_replay_pause_state()").Scan(&state))
		if state == "paused" {
			return
		}
		require.True(n.t, time.Now().Before(deadline), "the standby's replay did not pause: %s", state)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicaServesReadsAndReadsYourWrites: with the standby's replay
// paused, what another process saved is not seen (the replica answered),
// while what this process saved, and what follows a cursor it was given,
// is (the primary answered); projection queries likewise.
func TestReplicaServesReadsAndReadsYourWrites(t *testing.T) {
	primary, standby := newPair(t, false)
	ctx := context.Background()
	s, sr := openReplicated(t, primary, standby, "rr", nil)
	sw := openPlain(t, primary, "rr")
	p := eventstore.NewProjector(sr, nil)
	require.NoError(t, p.Create(ctx, eventstore.Definition{
		Name: "count", Feed: "order", Aggregated: true,
		Handlers: []eventstore.Handler{{EventType: "Placed", Functions: []eventstore.Function{
			{Name: eventstore.FuncInc, TargetSelector: "$.projection.orders"},
		}}},
	}))

	first := placeOrderOn(t, sw, "a")
	waitCaughtUp(t, primary, standby)
	agg, err := sr.Load(ctx, "order", "a")
	require.NoError(t, err)
	assert.Equal(t, int64(1), agg.Version)
	reads := replicaReads(s)
	require.Positive(t, reads, "the load was served by the replica")
	var conns int
	c, err := pgx.Connect(ctx, standby.url)
	require.NoError(t, err)
	defer c.Close(ctx)
	require.NoError(t, c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", replicaApp).Scan(&conns))
	assert.Positive(t, conns, "the standby shows the replica's connections")

	// The projection query, replica caught up: served by it.
	_, err = p.Aggregated(ctx, "count") // catches up on the primary
	require.NoError(t, err)
	waitCaughtUp(t, primary, standby)
	reads = replicaReads(s)
	rs, primaryReads := postgres.ReplicaStatus(s)
	pj, err := p.Aggregated(ctx, "count")
	require.NoError(t, err)
	assert.JSONEq(t, `{"orders":"1"}`, string(pj.Data))
	assert.Greater(t, replicaReads(s), reads, "the projection query was served by the replica")
	// The projector's feed read at its checkpoint (the head): the replica,
	// replayed as far as this process knows, is asked once and its answer
	// declined (it cannot show an event after the head), then the primary;
	// no second try on the replica, whose head waiting would not move.
	rs2, primaryReads2 := postgres.ReplicaStatus(s)
	assert.Equal(t, int64(1), rs2[0].Declined-rs[0].Declined, "replica answers declined by the caught-up query")
	assert.Equal(t, int64(1), primaryReads2-primaryReads, "reads the primary served in the caught-up query")

	waitCaughtUp(t, primary, standby)
	standby.pauseReplay()
	second := placeOrderOn(t, sw, "a")
	third := placeOrderOn(t, sw, "b")
	reads = replicaReads(s)
	agg, err = sr.Load(ctx, "order", "a")
	require.NoError(t, err)
	assert.Equal(t, int64(1), agg.Version, "another process's save is not seen on the paused replica")
	assert.Greater(t, replicaReads(s), reads)

	// A cursor this process was given (by the other process): the
	// replica's head is below it, so the primary answers.
	res, err := sr.ReadFeed(ctx, "", second.Position, nil)
	require.NoError(t, err)
	require.Len(t, res.Entries, 1, "the event after the cursor")
	assert.Equal(t, third.Position, res.Entries[0].Cursor)
	// A cursor the replica has reached: it answers, behind the primary
	// (nothing told this process of the other's saves).
	reads = replicaReads(s)
	res, err = sr.ReadFeed(ctx, "", first.Position, nil)
	require.NoError(t, err)
	assert.Empty(t, res.Entries)
	assert.Greater(t, replicaReads(s), reads)

	// This process's own save: seen at once by loads, feeds and projections.
	own := placeOrderOn(t, sr, "a")
	agg, err = sr.Load(ctx, "order", "a")
	require.NoError(t, err)
	assert.Equal(t, own.Version, agg.Version)
	assert.Equal(t, int64(3), agg.Version)
	res, err = sr.ReadFeed(ctx, "order", 0, nil)
	require.NoError(t, err)
	require.Len(t, res.Entries, 4)
	assert.Equal(t, own.Position, res.Entries[3].Events[0].Position)
	pj, err = p.Aggregated(ctx, "count")
	require.NoError(t, err)
	assert.JSONEq(t, `{"orders":"4"}`, string(pj.Data))
	list, err := sr.Aggregates(ctx, "order", nil)
	require.NoError(t, err)
	assert.Len(t, list.Aggregates, 2)

	standby.exec("SELECT pg_wal_replay_resume()")
	waitCaughtUp(t, primary, standby)
	reads = replicaReads(s)
	agg, err = sr.Load(ctx, "order", "a")
	require.NoError(t, err)
	assert.Equal(t, int64(3), agg.Version)
	assert.Greater(t, replicaReads(s), reads, "the replica serves again once it has replayed the save")
}

// TestReplicaReadYourWritesConcurrent: writers save and at once load,
// read the feed after their last cursor and query a projection, through a
// Storage whose replica replays commits late (recovery_min_apply_delay);
// every read shows the writer's own save.
func TestReplicaReadYourWritesConcurrent(t *testing.T) {
	primary, standby := newPair(t, false)
	for _, delay := range []string{"0", "3ms", "150ms"} {
		t.Run("delay="+delay, func(t *testing.T) {
			standby.setStandby("recovery_min_apply_delay = '" + delay + "'")
			ctx := context.Background()
			schema := "rc_" + fmt.Sprint(time.Now().UnixNano())
			s, st := openReplicated(t, primary, standby, schema, nil)
			p := eventstore.NewProjector(st, nil)
			require.NoError(t, p.Create(ctx, eventstore.Definition{
				Name: "per", Feed: "order",
				Handlers: []eventstore.Handler{{EventType: "Placed", Functions: []eventstore.Function{
					{Name: eventstore.FuncInc, TargetSelector: "$.projection.n"},
				}}},
			}))
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = p.Run(runCtx) }()
			defer func() { stop(); <-done }()
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("w%d", w)
					var cursor int64
					for i := 1; i <= 15; i++ {
						res, err := st.Save(ctx, "order", id, []eventstore.NewEvent{{ID: uuid.NewString(), Type: "Placed", Data: json.RawMessage(`{}`)}}, nil)
						if err != nil {
							errs <- err
							return
						}
						agg, err := st.Load(ctx, "order", id)
						if err != nil || agg.Version != res.Version {
							errs <- fmt.Errorf("%s: load after save %d: version %d, %v", id, res.Version, agg.Version, err)
							return
						}
						feed, err := st.ReadFeed(ctx, "", cursor, &eventstore.FeedOptions{Limit: 1000})
						if err != nil {
							errs <- err
							return
						}
						found := false
						for _, e := range feed.Entries {
							found = found || e.Cursor == res.Position
						}
						if !found {
							errs <- fmt.Errorf("%s: the feed after %d lacks its save at %d (%d entries)", id, cursor, res.Position, len(feed.Entries))
							return
						}
						cursor = res.Position
						pj, err := p.Single(ctx, "per", id)
						if err != nil {
							errs <- fmt.Errorf("%s: projection: %w", id, err)
							return
						}
						var v struct{ N string }
						if err := json.Unmarshal(pj.Data, &v); err != nil || v.N != fmt.Sprint(i) {
							errs <- fmt.Errorf("%s: projection after save %d: %s", id, i, pj.Data)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			rs, primaryReads := postgres.ReplicaStatus(s)
			t.Logf("delay %s: replica reads %d, primary reads %d", delay, rs[0].Reads, primaryReads)
		})
	}
}

// TestReplicaStoppedOrLaggingSkipped: a stopped replica costs no failed
// reads (they go to the primary) and serves again once back; one held
// behind (replay paused) past ReplicaMaxLag is skipped, so that reads show
// what another process saved.
func TestReplicaStoppedOrLaggingSkipped(t *testing.T) {
	primary, standby := newPair(t, false)
	ctx := context.Background()
	s, sr := openReplicated(t, primary, standby, "rs", &postgres.Options{ReplicaMaxLag: time.Second})
	sw := openPlain(t, primary, "rs")
	placeOrderOn(t, sw, "a")
	waitCaughtUp(t, primary, standby)
	eventually(t, 60*time.Second, "the replica serves", func() bool {
		_, err := sr.Load(ctx, "order", "a")
		require.NoError(t, err)
		return replicaReads(s) > 0
	})

	standby.stop("fast")
	for i := 0; i < 20; i++ {
		start := time.Now()
		agg, err := sr.Load(ctx, "order", "a")
		require.NoError(t, err, "a load with the replica down")
		assert.Equal(t, int64(1), agg.Version)
		assert.Less(t, time.Since(start), 10*time.Second)
	}
	rs, _ := postgres.ReplicaStatus(s)
	assert.False(t, rs[0].Healthy, "the stopped replica is out of service")
	assert.NotEmpty(t, rs[0].LastError)

	standby.start()
	eventually(t, 60*time.Second, "the replica serves again", func() bool {
		before := replicaReads(s)
		_, err := sr.Load(ctx, "order", "a")
		require.NoError(t, err)
		return replicaReads(s) > before
	})

	waitCaughtUp(t, primary, standby)
	standby.pauseReplay()
	defer standby.exec("SELECT pg_wal_replay_resume()")
	placeOrderOn(t, sw, "a") // another process: version 2, not replayed
	eventually(t, 60*time.Second, "the paused replica is found lagging", func() bool {
		_, err := sr.Load(ctx, "order", "a")
		require.NoError(t, err)
		rs, _ := postgres.ReplicaStatus(s)
		return rs[0].Lagging
	})
	agg, err := sr.Load(ctx, "order", "a")
	require.NoError(t, err)
	assert.Equal(t, int64(2), agg.Version, "the lagging replica is skipped")

	standby.exec("SELECT pg_wal_replay_resume()")
	eventually(t, 60*time.Second, "the replica serves again once caught up", func() bool {
		before := replicaReads(s)
		_, err := sr.Load(ctx, "order", "a")
		require.NoError(t, err)
		return replicaReads(s) > before
	})
}

// eventually polls cond every 100 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReplicaConformance runs the storage contract's suite on a Storage
// that reads from a real standby.
func TestReplicaConformance(t *testing.T) {
	primary, standby := newPair(t, false)
	storagetest.Run(t, func(tb testing.TB) storage.Storage {
		schema := "c_" + fmt.Sprint(time.Now().UnixNano())
		s, err := postgres.OpenURL(context.Background(), primary.url,
			&postgres.Options{Schema: schema, Replicas: []string{standby.replicaURL()}})
		require.NoError(tb, err)
		return s
	})
}

// TestServerReadReplica: a server process started with -postgres-replica
// answers loads from the standby (with replay paused, another process's
// save is not seen yet) and its own saves at once.
func TestServerReadReplica(t *testing.T) {
	primary, standby := newPair(t, false)
	a := startServer(t, primary.url, "-postgres-replica", standby.replicaURL())
	b := startServer(t, primary.url)
	deposit := func(s *server, agg string) {
		t.Helper()
		s.mustDo("POST", "/aggregates/account/"+agg+"/events",
			saveBody(&batch{agg: agg, ids: []string{uuid.NewString()}, cents: []int64{100}}), http.StatusOK)
	}
	version := func(s *server, agg string) int64 {
		t.Helper()
		got, ok := s.loadAccount(agg)
		require.True(t, ok)
		return got.AggregateVersion
	}
	deposit(b, "x")
	waitCaughtUp(t, primary, standby)
	assert.Equal(t, int64(1), version(a, "x")) // a learns where the primary's WAL is
	waitCaughtUp(t, primary, standby)
	standby.pauseReplay()
	defer standby.exec("SELECT pg_wal_replay_resume()")
	deposit(b, "x")
	assert.Equal(t, int64(2), version(b, "x"))
	assert.Equal(t, int64(1), version(a, "x"), "the load was answered by the paused standby")
	deposit(a, "x")
	assert.Equal(t, int64(3), version(a, "x"), "the server's own save is read at once")

	ctx := context.Background()
	c, err := pgx.Connect(ctx, standby.url)
	require.NoError(t, err)
	defer c.Close(ctx)
	var conns int
	require.NoError(t, c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", replicaApp).Scan(&conns))
	assert.Positive(t, conns)
}
