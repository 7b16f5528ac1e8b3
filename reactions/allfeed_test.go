package reactions_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/names"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// TestAllFeedIsNotAReactionFeed: a definition reacting to feed _all is
// refused, naming feedName and saying what _all is.
func TestAllFeedIsNotAReactionFeed(t *testing.T) {
	_, e := setup(t, memory.New(), nil)
	d := def("http://127.0.0.1:1/x")
	d.FeedName = names.AllFeed
	err := e.Create(t.Context(), d)
	var ve *eventstore.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) == 0 || ve.Fields[0].Field != "feedName" ||
		!strings.Contains(ve.Fields[0].Message, "feed of all aggregate types") {
		t.Fatalf("a reaction on feed _all must be refused naming feedName: %v", err)
	}
}
