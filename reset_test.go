package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResetPassesOnThroughPut: a Projector's resets are counted in its
// definition (hooks.DefinitionResets), and Put of that definition into another
// store, as package tenancy does for every tenant, resets the projection
// there once per reset counted, whatever else reset it meanwhile.
func TestResetPassesOnThroughPut(t *testing.T) {
	ctx := context.Background()
	_, p := newProjector(t)    // a project
	tst, tp := newProjector(t) // one of its tenants
	require.NoError(t, p.Create(ctx, countDef("n", eventstore.Function{Name: "inc", TargetSelector: "$.projection.count"})))
	d, err := p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Zero(t, *hooks.DefinitionResets(&d))
	res, err := tp.Put(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutCreated, res)
	save(t, tst, "order", "o1", pev(1, "Placed", `{}`))
	require.NoError(t, tp.CatchUp(ctx, "n"))
	built := func() bool {
		t.Helper()
		s, err := tp.Status(ctx, "n")
		require.NoError(t, err)
		return s.Checkpoint > 0 && s.Instances == 1
	}
	require.True(t, built())

	// The project's reset reaches the tenant through Put, once.
	require.NoError(t, p.Reset(ctx, "n"))
	d, err = p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, int64(1), *hooks.DefinitionResets(&d))
	res, err = tp.Put(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutUnchanged, res, "the definition itself is the same")
	assert.False(t, built(), "reset: no checkpoint, no instance until it catches up again")
	require.NoError(t, tp.CatchUp(ctx, "n"))
	require.True(t, built())
	_, err = tp.Put(ctx, d)
	require.NoError(t, err)
	assert.True(t, built(), "a reset is applied once")

	// The tenant's own reset is not the project's.
	require.NoError(t, tp.Reset(ctx, "n"))
	require.NoError(t, tp.CatchUp(ctx, "n"))
	_, err = tp.Put(ctx, d)
	require.NoError(t, err)
	assert.True(t, built(), "the tenant's own reset does not use up the project's next one")
	require.NoError(t, p.Reset(ctx, "n"))
	d, err = p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, int64(2), *hooks.DefinitionResets(&d))
	_, err = tp.Put(ctx, d)
	require.NoError(t, err)
	assert.False(t, built(), "the project's second reset reaches the tenant")
	require.NoError(t, tp.CatchUp(ctx, "n"))

	// A user's Put (Resets 0) keeps the counts, in place and through a
	// replacement that takes over.
	desc := d
	*hooks.DefinitionResets(&desc) = 0
	desc.Description = "counts orders"
	res, err = p.Put(ctx, desc)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutUpdated, res)
	d, err = p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, int64(2), *hooks.DefinitionResets(&d))
	res, err = p.Put(ctx, countDef("n", eventstore.Function{Name: "add", TargetSelector: "$.projection.sum", EventSelector: "$.event.total"}))
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutReplacing, res)
	require.NoError(t, p.Reset(ctx, "n"), "a reset while a replacement is built counts in both")
	require.NoError(t, p.CatchUp(ctx, "n"))
	d, err = p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, "add", d.Handlers[0].Functions[0].Name)
	assert.Equal(t, int64(3), *hooks.DefinitionResets(&d))
	defs, err := p.Definitions(ctx)
	require.NoError(t, err)
	require.Len(t, defs, 1)
	assert.Equal(t, int64(3), *hooks.DefinitionResets(&defs[0]))

	// A projection first created from a definition with resets is built
	// from the start: they are behind it.
	nst, np := newProjector(t)
	_, err = np.Put(ctx, d)
	require.NoError(t, err)
	save(t, nst, "order", "o1", pev(1, "Placed", `{"total":3}`))
	require.NoError(t, np.CatchUp(ctx, "n"))
	_, err = np.Put(ctx, d)
	require.NoError(t, err)
	s, err := np.Status(ctx, "n")
	require.NoError(t, err)
	assert.Positive(t, s.Checkpoint, "no reset for resets made before it existed")

	// Resets are not part of the JSON form.
	b, err := json.Marshal(d)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "resets")
}

// TestResetCountedBeforeDrop: a reset whose drop of the instances fails
// returns the error with the reset already counted, so that the stores
// the definition is passed on to reset rather than miss it; tried again,
// it resets here too and counts once more.
func TestResetCountedBeforeDrop(t *testing.T) {
	ctx := context.Background()
	fs := &failingResetStorage{Storage: memory.New()}
	st, err := eventstore.New(fs, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	require.NoError(t, p.Create(ctx, countDef("n", eventstore.Function{Name: "inc", TargetSelector: "$.projection.count"})))
	save(t, st, "order", "o1", pev(1, "Placed", `{}`))
	require.NoError(t, p.CatchUp(ctx, "n"))

	fs.fail.Store(true)
	err = p.Reset(ctx, "n")
	require.ErrorIs(t, err, errDropFailed)
	d, err := p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, int64(1), *hooks.DefinitionResets(&d), "counted although the drop failed")
	s, err := p.Status(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, int64(1), s.Instances, "not reset here")

	fs.fail.Store(false)
	require.NoError(t, p.Reset(ctx, "n"))
	d, err = p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, int64(2), *hooks.DefinitionResets(&d))
	s, err = p.Status(ctx, "n")
	require.NoError(t, err)
	assert.Zero(t, s.Instances, "reset here on the second try")
}

var errDropFailed = errors.New("drop failed")

// failingResetStorage fails ResetProjection while fail is set.
type failingResetStorage struct {
	storage.Storage
	fail atomic.Bool
}

func (s *failingResetStorage) ResetProjection(ctx context.Context, name string) error {
	if s.fail.Load() {
		return errDropFailed
	}
	return s.Storage.ResetProjection(ctx, name)
}
