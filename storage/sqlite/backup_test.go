package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/google/uuid"
)

// TestBackupUnderSaves backs a store up twice while four writers save to it
// and its projector applies a projection, then opens each copy: its feed is
// a prefix of the store's final feed (the same events in the same order,
// each aggregate's versions without a gap), and every instance of the
// projection counts exactly the events of its aggregate up to the copy's
// checkpoint. A copy then takes saves of its own.
func TestBackupUnderSaves(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	s, err := sqlite.Open(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventstore.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := eventstore.NewProjector(st, nil)
	if err := p.Create(ctx, eventstore.Definition{Name: "counts", Feed: "item", Handlers: []eventstore.Handler{{
		EventType: "Added", Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.n"}},
	}}}); err != nil {
		t.Fatal(err)
	}
	pctx, stopProjector := context.WithCancel(ctx)
	projectorDone := make(chan error, 1)
	go func() { projectorDone <- p.Run(pctx) }()

	var saved atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("i-%d-%d", g, i%7)
				events := make([]eventstore.NewEvent, 1+i%3)
				for j := range events {
					events[j] = eventstore.NewEvent{ID: uuid.NewString(), Type: "Added", Data: []byte(`{}`)}
				}
				if _, err := st.Save(ctx, "item", id, events, nil); err != nil {
					t.Error(err)
					return
				}
				saved.Add(int64(len(events)))
			}
		})
	}
	copies := []string{filepath.Join(dir, "b1.db"), filepath.Join(dir, "b2.db")}
	for _, c := range copies {
		for start := saved.Load(); saved.Load() < start+200; {
			time.Sleep(5 * time.Millisecond)
		}
		if err := sqlite.Backup(ctx, src, c); err != nil {
			t.Fatalf("backup under saves: %v", err)
		}
	}
	if err := sqlite.Backup(ctx, src, copies[0]); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("backup onto an existing file = %v, want ErrConflict", err)
	}
	close(stop)
	wg.Wait()
	stopProjector()
	<-projectorDone
	_ = st.Close()

	final := readAll(t, src)
	for _, c := range copies {
		got := readAll(t, c)
		if len(got) == 0 || len(got) >= len(final) {
			t.Fatalf("copy %s holds %d events of %d: want some, taken during the saves", c, len(got), len(final))
		}
		versions := map[string]int64{}
		for i, e := range got {
			if e.ID != final[i].ID || e.Position != final[i].Position {
				t.Fatalf("copy %s event %d is %s at %d; the store has %s at %d", c, i, e.ID, e.Position, final[i].ID, final[i].Position)
			}
			if v := versions[e.AggregateID]; e.Version != v && e.Version != v+1 {
				t.Fatalf("copy %s: %s jumps from version %d to %d", c, e.AggregateID, v, e.Version)
			}
			versions[e.AggregateID] = e.Version
		}
		cs, err := sqlite.Open(c, nil)
		if err != nil {
			t.Fatalf("open the copy: %v", err)
		}
		def, err := cs.Definition(ctx, "counts")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("copy %s: %d events, projection checkpoint %d", c, len(got), def.Checkpoint)
		want := map[string]int{}
		for _, e := range got {
			if e.Position <= def.Checkpoint {
				want[e.AggregateID]++
			}
		}
		for id := range versions {
			var n int
			state, err := cs.LoadProjection(ctx, "counts", id)
			switch {
			case errors.Is(err, storage.ErrNotFound):
			case err != nil:
				t.Fatal(err)
			default:
				var v struct{ N json.Number }
				if err := json.Unmarshal(state.Data, &v); err != nil {
					t.Fatalf("state %s: %v", state.Data, err)
				}
				if n, err = strconv.Atoi(v.N.String()); err != nil {
					t.Fatalf("state %s: %v", state.Data, err)
				}
			}
			if n != want[id] {
				t.Errorf("copy %s: projection of %s counts %d, but %d of its events are at or before the checkpoint %d", c, id, n, want[id], def.Checkpoint)
			}
		}
		if _, err := cs.Append(ctx, storage.AppendRequest{AggregateType: "item", AggregateID: "after", Events: []storage.Event{
			{ID: uuid.NewString(), Type: "Added", RecordedAt: time.Now().UTC()}}}); err != nil {
			t.Errorf("save to the copy: %v", err)
		}
		_ = cs.Close()
	}
}

// readAll returns the feed of the file at path.
func readAll(t *testing.T, path string) []storage.Event {
	t.Helper()
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var all []storage.Event
	for after := int64(0); ; {
		page, err := s.ReadFeed(context.Background(), storage.FeedQuery{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Events...)
		if len(page.Events) == 0 {
			return all
		}
		after = page.Events[len(page.Events)-1].Position
	}
}
