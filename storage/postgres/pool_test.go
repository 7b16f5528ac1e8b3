package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/storagetest"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// onePooledConnection opens a Storage in a fresh schema on a pool of its
// own that holds one connection. Any code path that holds a pooled
// connection while it waits for another from the same pool waits forever
// on it.
func onePooledConnection(tb testing.TB) storage.Storage {
	tb.Helper()
	schema := newSchema(tb)
	cfg, err := pgxpool.ParseConfig(databaseURL())
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = 1
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := postgres.Open(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		pool.Close()
		tb.Fatal(err)
	}
	// Cleanups run last-in first-out: the pool closes after the Storage.
	tb.Cleanup(pool.Close)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformanceOnePooledConnection runs the whole conformance suite on a
// pool of one connection: every operation of the contract, the Store's and
// the Projector's included, must work with one connection at a time.
func TestConformanceOnePooledConnection(t *testing.T) {
	storagetest.Run(t, onePooledConnection)
}

// TestTwoStoresSmallPoolsKeepAnswering runs two Stores, each with its own
// pool of 4 connections (pgxpool's default on a 2-CPU host), on one schema,
// as two server processes would, with eight projections kept current by a
// running Projector in each. The projectors' commits keep refusing each
// other. Saves through both stores must go on being answered, and both
// Projectors must end up with every event applied.
func TestTwoStoresSmallPoolsKeepAnswering(t *testing.T) {
	schema := newSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func() (*eventstore.Store, *eventstore.Projector) {
		cfg, err := pgxpool.ParseConfig(databaseURL())
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 4
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s, err := postgres.Open(ctx, pool, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		st, err := eventstore.New(s, &eventstore.Options{PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st, eventstore.NewProjector(st, &eventstore.ProjectorOptions{BatchSize: 7})
	}
	storeA, projA := open()
	storeB, projB := open()
	const definitions = 8
	for i := range definitions {
		err := projA.Create(ctx, eventstore.Definition{
			Name: fmt.Sprintf("count-%d", i), Feed: "order", Aggregated: true,
			Handlers: []eventstore.Handler{{EventType: "OrderPlaced", Functions: []eventstore.Function{
				{Name: eventstore.FuncInc, TargetSelector: "$.projection.orders"},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stopRun := context.WithCancel(ctx)
	var runs sync.WaitGroup
	for _, p := range []*eventstore.Projector{projA, projB} {
		runs.Go(func() { _ = p.Run(runCtx) })
	}
	defer func() { stopRun(); runs.Wait() }()

	const writers, saves = 4, 60
	errs := make(chan error, 2*writers)
	var wg sync.WaitGroup
	for _, st := range []*eventstore.Store{storeA, storeB} {
		for w := range writers {
			wg.Go(func() {
				for i := range saves {
					saveCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
					_, err := st.Save(saveCtx, "order", fmt.Sprintf("o-%p-%d-%d", st, w, i),
						[]eventstore.NewEvent{{ID: uuid.NewString(), Type: "OrderPlaced", Data: json.RawMessage(`{}`)}}, nil)
					cancel()
					if err != nil {
						errs <- fmt.Errorf("save %d of writer %d: %w", i, w, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A query reflects its own process's saves at once and the other
	// process's once its running projector has caught up: wait for that.
	want := fmt.Sprintf(`"orders":"%d"`, 2*writers*saves)
	for _, p := range []*eventstore.Projector{projA, projB} {
		for i := range definitions {
			var data string
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				pj, err := p.Aggregated(qctx, fmt.Sprintf("count-%d", i))
				cancel()
				if err != nil {
					t.Fatalf("count-%d: %v", i, err)
				}
				if data = string(pj.Data); strings.Contains(data, want) {
					break
				}
			}
			if !strings.Contains(data, want) {
				t.Fatalf("count-%d = %s, want %s", i, data, want)
			}
		}
	}
}

// TestOpenURLPoolSize checks the pool OpenURL creates: DefaultPoolConns
// unless the URL sets pool_max_conns.
func TestOpenURLPoolSize(t *testing.T) {
	schema := newSchema(t)
	for _, c := range []struct {
		url  string
		want int
	}{
		{databaseURL(), postgres.DefaultPoolConns},
		{urlWith(t, "pool_max_conns", "3"), 3},
	} {
		s, err := postgres.OpenURL(context.Background(), c.url, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		if got := postgres.PoolConns(s); got != c.want {
			t.Errorf("OpenURL(%s): pool of %d, want %d", c.url, got, c.want)
		}
		_ = s.Close()
	}
}

// TestOpenRefusesOtherIsolationLevels: feed reads need READ COMMITTED (each
// statement its own snapshot, the watermark's before the read's); Open
// refuses a pool whose connections default to another level, and OpenURL
// sets it whatever the URL asks.
func TestOpenRefusesOtherIsolationLevels(t *testing.T) {
	testPool(t)
	cfg, err := pgxpool.ParseConfig(databaseURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := postgres.Open(context.Background(), pool, &postgres.Options{Schema: newSchema(t)}); !errors.Is(err, storage.ErrInvalid) ||
		!strings.Contains(err.Error(), "read committed") {
		t.Errorf("Open on a REPEATABLE READ pool = %v, want ErrInvalid naming read committed", err)
	}
	s, err := postgres.OpenURL(context.Background(), urlWith(t, "default_transaction_isolation", "repeatable read"),
		&postgres.Options{Schema: newSchema(t)})
	if err != nil {
		t.Fatalf("OpenURL with default_transaction_isolation in the URL: %v", err)
	}
	_ = s.Close()
}
