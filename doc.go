// Package eventstore is an event store with projections.
//
// Start at [New], which opens a [Store] on a storage backend, and
// [NewProjector], which derives views of the events (projections) from it.
// A Store saves events to aggregates, loads aggregates with their events
// and reads feeds; a Projector keeps projections defined in a small
// function language ([Definition]) and answers queries on them. The
// backends are packages of their own: storage/memory for tests and
// embedding, storage/sqlite for one process on one machine, and
// storage/postgres for several processes sharing a database; each hands
// New a value of package storage's contract, which application code never
// calls. Package httpapi serves a Store and a Projector over HTTP.
//
//	st, err := eventstore.New(memory.New(), nil)
//	...
//	_, err = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{
//		{ID: eventstore.NewEventID(), Type: "OrderPlaced", Data: []byte(`{"total": 12.50}`)},
//	}, nil)
//	agg, err := st.Load(ctx, "order", "o-1")
//
// An aggregate is identified by its type and its id. Nothing is declared
// beforehand: the first save for an aggregate creates it.
//
// # Versioning
//
// An aggregate's version counts successful saves: each Save that stores
// events raises it by one, however many events the batch holds, and every
// event of the batch carries that version ([Event.Version]). Each event also
// has a sequence number within its aggregate ([Event.Sequence]: 1, 2, 3, ...
// without gaps) and a position in the store's global feed
// ([Event.Position]), which orders every event of the store.
//
// [SaveOptions.ExpectedVersion] makes a save conditional: it fails with
// [ErrConflict], storing nothing, unless the aggregate is at that version.
// [ExpectVersion](0) means the aggregate must not exist yet. Of several
// concurrent saves expecting the same version, exactly one succeeds.
//
// Saves are idempotent per event id: an id is stored at most once per
// aggregate. A retried batch whose events are all stored already succeeds
// without storing anything ([SaveResult].Duplicate reports it); a batch
// that mixes stored and new ids fails with [ErrConflict].
//
// # Consistency
//
// A save is atomic: all events of the batch are stored, or none. Loading an
// aggregate after Save returned sees the save.
//
// Projections are applied from the global feed, in feed order, exactly once
// per event, and their state is committed together with the feed position it
// reflects. A [Projector] applies events in the background while
// [Projector.Run] runs, and on demand before every query: a query reflects
// every save made through the same Store before the query began (read your
// writes), and everything the feed shows at that moment. A definition
// created after events exist is built from its feed's whole history.
//
// Several processes may share one storage (storage/postgres). Each event is
// still applied exactly once, because a projection commit succeeds only from
// the checkpoint it started from. A save made through another process
// reaches this process's projections at once while Run is running when the
// storage reports appends (storage.AppendWatcher: storage/postgres does, with
// LISTEN/NOTIFY), and otherwise within [ProjectorOptions.PollInterval];
// without Run, every query catches up with the whole visible feed first.
//
// # Feeds and subscriptions
//
// Every saved batch is an entry of two feeds: its aggregate type's, which
// numbers the type's batches with strictly increasing FeedSequences, and
// the feed of all types, which orders every batch by global position. Both
// numbers are never reused but may have gaps (1, 2, 3 on memory and
// SQLite; on PostgreSQL a refused or rolled-back save leaves numbers
// unused), so a reader continues from a cursor it was given, never from a
// number it computed. [Store.ReadFeed] pages through a
// feed from a cursor (optionally waiting for new entries: a long poll);
// [Store.Subscribe] catches up from a cursor and then follows new entries as
// they are saved, with the cursor in every delivery so that the caller can
// store its checkpoint and resume. Readers see every batch exactly once, in
// order, also under concurrent writers. One goroutine per Store watches the
// storage for appends by other processes, when the storage can report them;
// subscriptions, long polls and projectors all wake from it, or from saves
// through the Store, and poll ([Options.PollInterval]) only as a fallback.
// Close stops them all.
//
// # Deletion
//
// [Store.DeleteAggregate] and [Store.DeleteAggregateType] remove events
// from loads and feeds, then reset every projection of that feed so that it
// is rebuilt without them. A deleted aggregate's id can be used again.
//
// # Numbers
//
// add and inc compute with exact decimals of up to 1,000 digits, never
// float64: 0.1 + 0.2 is 0.3, and integers above 2^53 stay exact. The result
// of add has as many fraction digits as the more precise operand (1.50 + 1 is
// 2.50). Values produced from numbers (set from an event number, add, inc)
// are stored in the projection as JSON strings holding the decimal, such as
// "0.3"; set from an event number keeps its digits (12.50 stays "12.50"; an
// exponent is expanded: 1e3 becomes "1000").
//
// An event whose function cannot be applied, such as add with an input that
// is not a number, is recorded as an error of the projection
// ([Projector.Status]) and changes nothing of that projection instance;
// later events are applied as usual.
//
// # Errors
//
// Errors wrap one of the sentinel errors [ErrNotFound], [ErrConflict],
// [ErrInvalid], [ErrClosed], [ErrUnavailable] and [ErrFull]; test them with errors.Is.
// Invalid input is reported as a [*ValidationError] that names every bad
// field, such as "events[2].eventId" or
// "handlers[0].functions[1].targetSelector", and nothing is written.
package eventstore
