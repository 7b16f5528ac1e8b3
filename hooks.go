package eventstore

import (
	"context"
	"time"

	"github.com/eventkit-go/eventstore/internal/hooks"
)

// The plumbing of this module's other packages (see package hooks).
func init() {
	hooks.DefinitionResets = func(d any) *int64 { return &d.(*Definition).resets }
	hooks.DefinitionsPoll = func(o any) *time.Duration { return &o.(*ProjectorOptions).defsPoll }
	hooks.ProjectorRunning = func(p any) bool { return p.(*Projector).isRunning() }
	hooks.FeedPoll = func(o any) *time.Duration { return &o.(*FeedOptions).poll }
	hooks.ReadFeedRange = func(ctx context.Context, st any, after, upTo int64) (any, error) {
		return st.(*Store).readFeedRange(ctx, after, upTo)
	}
}
