// Package eventstore is an event store with projections.
//
// Start at [New], which opens a [Store] on a storage backend, and
// [NewProjector], which keeps projections of the Store's events: JSON
// documents defined in a small function language ([Definition]).
//
//	st, err := eventstore.New(memory.New(), nil) // or sqlite.Open, postgres.OpenURL
//	defer st.Close()
//	p := eventstore.NewProjector(st, nil)
//	_, err = p.Put(ctx, eventstore.Definition{
//		Name: "order-totals", Feed: "order", Aggregated: true,
//		Handlers: []eventstore.Handler{{EventType: "OrderPlaced", Functions: []eventstore.Function{
//			{Name: eventstore.FuncAdd, TargetSelector: "$.projection.revenue", EventSelector: "$.event.total"},
//		}}},
//	})
//	_, err = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{
//		{ID: eventstore.NewEventID(), Type: "OrderPlaced", Data: []byte(`{"total": 0.1}`)},
//	}, nil)
//	agg, err := st.Load(ctx, "order", "o-1")         // the aggregate and its events
//	proj, err := p.Aggregated(ctx, "order-totals") // {"revenue":"0.1"}
//
// The backends are storage/memory (tests, embedding), storage/sqlite (one
// process) and storage/postgres (processes sharing a database); package
// httpapi serves a Store and a Projector over HTTP.
//
// # Aggregates and versions
//
// An aggregate is identified by its type and its id; its first save
// creates it. Its version counts the saves that stored events; each event
// also has a sequence number in its aggregate and a position in the
// store's feed (see Event).
//
// # Names
//
// Aggregate types and ids, projection and feed names are 1 to 256 bytes of
// UTF-8 without '/' or control characters, and not "." or ".."; "_all",
// the HTTP name of the feed of all types, is no aggregate type or feed.
// Event types may contain '/'.
//
// # Consistency
//
// Projections are applied from the feed, in order, exactly once per
// event, and committed with the feed position they reflect. A Projector
// applies events while [Projector.Run] runs and before every query, so a
// query reflects every save made through the same Store before it (read
// your writes); other processes' saves are seen when the storage reports
// them, else within Options.PollInterval.
//
// # Feeds
//
// Every save is an entry of its aggregate type's feed, numbered by
// FeedSequence, and of the feed of all types, by Position. Both are
// strictly increasing but may have gaps, so a reader goes on from a
// cursor it was given, never one it computed; readers ([Store.ReadFeed],
// [Store.Subscribe]) see every entry once, in order.
//
// # Numbers
//
// add and inc compute with exact decimals (up to 1,000 digits): 0.1 + 0.2
// is 0.3. Numbers that functions produce are JSON strings, such as "12.50";
// decode them with [Decimal]. An event that cannot be applied, such as add
// given a text, changes nothing and is recorded ([Status].Errors).
//
// # Errors
//
// Errors wrap one of the sentinel errors [ErrNotFound], [ErrConflict],
// [ErrInvalid], [ErrClosed], [ErrUnavailable] and [ErrFull]; test them with
// errors.Is. Invalid input is a [*ValidationError] that names every bad
// field, such as "events[2].eventId", and nothing is written.
package eventstore
