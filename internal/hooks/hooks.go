// Package hooks reaches the parts of package eventstore that are this
// module's plumbing rather than its users' API: package tenancy passes a
// project's resets and definitions on to its tenants, httpapi and the
// server report whether a Projector runs, package archive reads the feed
// in ranges. Package eventstore sets the functions in its init, before
// any other package can call them; each takes a pointer to the eventstore
// type its comment names, and panics on another.
package hooks

import (
	"context"
	"time"
)

var (
	// DefinitionResets returns the reset count of d, an
	// *eventstore.Definition: the resets (Projector.Reset) of the
	// projection in the store it was read from, set by
	// Projector.Definition and Definitions, never in the JSON form. Put
	// of a definition counting more resets than every one it applied
	// before resets the projection: that is how package tenancy passes a
	// project's reset on to every tenant, open or not, in any process. A
	// user's definition counts 0, and Put keeps the stored counts.
	DefinitionResets func(d any) *int64

	// DefinitionsPoll returns the setting of o, an
	// *eventstore.ProjectorOptions, of how often Run reads the list of
	// stored definitions again when it wakes, to learn of definitions
	// that other processes created, replaced or deleted (one second when
	// 0). Package tenancy, which passes definition changes on by itself,
	// makes it longer, saving a read of the definitions per wake-up.
	DefinitionsPoll func(o any) *time.Duration

	// FeedPoll returns the setting of o, an *eventstore.FeedOptions, of
	// how often, while it waits, ReadFeed reads the feed again to find
	// saves of other processes that nothing reported (the Store's
	// Options.PollInterval when 0). Package reactions polls at its own
	// interval.
	FeedPoll func(o any) *time.Duration

	// ProjectorRunning reports whether Run is running for p, an
	// *eventstore.Projector, in some goroutine.
	ProjectorRunning func(p any) bool

	// ReadFeedRange returns, as a []eventstore.FeedEntry, the entries of
	// the feed of all types of st, an *eventstore.Store, whose cursor is in
	// (after, upTo], where upTo is at most a head FeedHead(ctx, "")
	// returned: package archive's Export reads the feed up to the head it
	// started at in such ranges, with fewer storage calls than ReadFeed's
	// pages (see Store.readFeedRange).
	ReadFeedRange func(ctx context.Context, st any, after, upTo int64) (any, error)
)
