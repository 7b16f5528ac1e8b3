package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/sqlite"
)

// BenchmarkCommitProjection: one projection commit of one state, as a
// projector commits after applying one event (what every save costs a
// tenant's projector when saves go round-robin across tenants). Reported
// besides ns/op: the process CPU per commit.
//
//	go test ./storage/sqlite -run '^$' -bench CommitProjection -benchtime 5000x
func BenchmarkCommitProjection(b *testing.B) {
	ctx := context.Background()
	st, spec := projectionStorage(b)
	now := time.Now()
	cpu0 := processCPU()
	b.ResetTimer()
	for i := range b.N {
		err := st.CommitProjection(ctx, storage.ProjectionCommit{
			Name: "n", From: int64(i), To: int64(i + 1), Spec: spec,
			States: []storage.ProjectionState{{Name: "n", InstanceID: fmt.Sprint("i", i%10), Data: []byte(`{"count":1}`),
				Position: int64(i + 1), CreatedAt: now, UpdatedAt: now}},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/commit")
}

// BenchmarkLoadProjectionState: loading one instance's state, as a
// projector does before applying an event to it. Reported besides ns/op:
// the process CPU per load.
//
//	go test ./storage/sqlite -run '^$' -bench LoadProjectionState -benchtime 5000x
func BenchmarkLoadProjectionState(b *testing.B) {
	ctx := context.Background()
	st, spec := projectionStorage(b)
	now := time.Now()
	err := st.CommitProjection(ctx, storage.ProjectionCommit{Name: "n", From: 0, To: 1, Spec: spec,
		States: []storage.ProjectionState{{Name: "n", InstanceID: "i", Data: []byte(`{"count":1}`), Position: 1, CreatedAt: now, UpdatedAt: now}}})
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		states, err := st.LoadProjections(ctx, "n", []string{"i"})
		if err != nil || len(states) != 1 {
			b.Fatalf("load: %d states, %v", len(states), err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/load")
}

// projectionStorage returns a SQLite storage in a temporary file, closed
// at the end of the benchmark, with one definition "n", and its spec.
func projectionStorage(b *testing.B) (storage.Storage, []byte) {
	b.Helper()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "projection.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	spec := []byte(`{"projectionName":"n"}`)
	if err := st.CreateDefinition(context.Background(), storage.DefinitionRecord{Name: "n", Spec: spec, CreatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	return st, spec
}

// processCPU returns the CPU time the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
