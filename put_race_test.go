package eventstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// Two Projectors on one storage (two processes on one database) that Put
// the same new definition at the same time both succeed: one creates it,
// the other finds it stored. Before, the one whose create came second
// answered ErrConflict ("exists"), which the server's tenants passed on
// as a 409 to the caller who made the project's definition.
func TestConcurrentPutOfANewDefinition(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	var projectors []*eventstore.Projector
	for range 4 {
		st, err := eventstore.New(mem, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		projectors = append(projectors, eventstore.NewProjector(st, nil))
	}
	for i := range 50 {
		name := fmt.Sprint("race-", i)
		results := make([]eventstore.PutResult, len(projectors))
		errs := make([]error, len(projectors))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, p := range projectors {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[j], errs[j] = p.Put(ctx, orderDef(name, false))
			}()
		}
		close(start)
		wg.Wait()
		created := 0
		for j := range projectors {
			require.NoError(t, errs[j], "Put %d of %s", j, name)
			if results[j] == eventstore.PutCreated {
				created++
			} else {
				require.Equal(t, eventstore.PutUnchanged, results[j], "Put %d of %s", j, name)
			}
		}
		require.Equal(t, 1, created, "%s created once", name)
	}
}
