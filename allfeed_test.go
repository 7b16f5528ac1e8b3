package eventstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/names"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAllFeedIsReserved: "_all", the HTTP feed of all aggregate types, is
// refused as an aggregate type by Save and SaveAll and as a projection's
// feed, with a message saying what it is; nothing is stored.
func TestAllFeedIsReserved(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	check := func(what string, err error, field string) {
		t.Helper()
		var ve *eventstore.ValidationError
		require.ErrorAs(t, err, &ve, what)
		require.NotEmpty(t, ve.Fields, what)
		assert.Equal(t, field, ve.Fields[0].Field, what)
		assert.Contains(t, ve.Fields[0].Message, "feed of all aggregate types", what)
	}
	_, err := st.Save(ctx, names.AllFeed, "a1", []eventstore.NewEvent{ev("Placed", "")}, nil)
	check("Save", err, "aggregateType")
	_, err = st.SaveAll(ctx, "_all", []eventstore.Batch{{AggregateID: "a1", Events: []eventstore.NewEvent{ev("Placed", "")}}})
	check("SaveAll", err, "aggregateType")
	head, err := st.FeedHead(ctx, "")
	require.NoError(t, err)
	assert.Zero(t, head, "nothing stored")

	def := orderDef("everything", true)
	def.Feed = "_all"
	check("a definition's feedName", p.Create(ctx, def), "feedName")
	def = orderDef("everything", true)
	def.Handlers[1].Feed = "_all"
	check("a handler's feedName", p.Create(ctx, def), "handlers[1].feedName")

	assert.True(t, errors.Is(names.CheckFeed("_all"), eventstore.ErrInvalid))
	assert.NoError(t, names.CheckFeed("_all_orders"), "only the exact name is reserved")
	_, err = st.Save(ctx, "_All", "a1", []eventstore.NewEvent{ev("Placed", "")}, nil)
	assert.NoError(t, err, "names are case-sensitive: _All is another type")
}

// TestCheckFeedMessage: the message that no aggregate type may be _all.
func TestCheckFeedMessage(t *testing.T) {
	assert.NoError(t, names.CheckFeed("order"))
	assert.EqualError(t, names.CheckFeed(names.AllFeed), `must not be "_all": _all is the feed of all aggregate types (GET /feeds/_all), not the name of one`)
}
