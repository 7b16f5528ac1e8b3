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
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "commit.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	spec := []byte(`{"projectionName":"n"}`)
	if err := st.CreateDefinition(ctx, storage.DefinitionRecord{Name: "n", Spec: spec, CreatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
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
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/commit")
}

// BenchmarkLoadProjectionState: loading one instance's state, as a
// projector does before applying an event to it. Reported besides ns/op:
// the process CPU per load.
//
//	go test ./storage/sqlite -run '^$' -bench LoadProjectionState -benchtime 5000x
func BenchmarkLoadProjectionState(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "load.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	spec := []byte(`{"projectionName":"n"}`)
	if err := st.CreateDefinition(ctx, storage.DefinitionRecord{Name: "n", Spec: spec, CreatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	err = st.CommitProjection(ctx, storage.ProjectionCommit{Name: "n", From: 0, To: 1, Spec: spec,
		States: []storage.ProjectionState{{Name: "n", InstanceID: "i", Data: []byte(`{"count":1}`), Position: 1, CreatedAt: now, UpdatedAt: now}}})
	if err != nil {
		b.Fatal(err)
	}
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for range b.N {
		states, err := st.LoadProjections(ctx, "n", []string{"i"})
		if err != nil || len(states) != 1 {
			b.Fatalf("load: %d states, %v", len(states), err)
		}
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/load")
}
