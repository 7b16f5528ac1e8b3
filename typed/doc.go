// Package typed is the Go-native layer of eventstore: events saved and
// loaded as Go values, aggregates folded into Go state with optimistic
// concurrency and retries, and snapshots of that state. It is a package of
// its own so that the root package's API stays the one the HTTP service
// mirrors (JSON in, JSON out), and this layer sits beside it, built only
// on that API.
//
// # Registry
//
// A [Registry] maps event type names, the strings stored with each event,
// to Go types. Names are given explicitly ([Register]), never taken from
// Go type names, so renaming a struct does not change what is stored. A
// Registry is a value: make one per set of event types (two stores, or two
// aggregate types with an event name in common, use two). A [Codec] turns
// values into the stored data; [JSONCodec] is the default.
//
//	reg := typed.NewRegistry(nil)
//	err := errors.Join(
//		typed.Register[OrderPlaced](reg, "OrderPlaced"),
//		typed.Register[OrderShipped](reg, "OrderShipped"),
//	)
//
// # Events
//
// A [Store] wraps an eventstore.Store with a Registry: [Store.Save] takes
// Go values, [Store.Load], [Store.Feed] and [Store.Subscribe] yield
// decoded [Event]s (the stored event stays reachable in each) as
// iterators: for ev, err := range ts.Load(ctx, "order", "o-1") { ... }.
//
// # Aggregates
//
// A [Repository] folds an aggregate's events into a state value of the
// caller's type S with the caller's apply function (or method expression,
// such as (*Order).Apply). [Repository.Update] is the common case in one
// call: load, decide the new events from the state, save them at the
// version loaded, and on a conflict with a concurrent save load again and
// decide again, a bounded number of times. [Repository.Load] and
// [Repository.Save] are its parts.
//
// # Snapshots
//
// With [RepositoryOptions].SnapshotEvery set, a Repository saves a
// snapshot of an aggregate's state every that many saves, and loads start
// from it, folding only the events after it. StateVersion names the
// state's shape: a snapshot of another is ignored, and replaced at the
// next save. A snapshot that fails to save or load is logged, never an
// error of the save or the load.
//
// # Projections
//
// [NewProjection] builds a projection whose handlers are Go functions over
// a typed state, one per event Go type ([On]), run by the root package's
// Projector with the same guarantees as a JSON definition.
//
// # Errors
//
// A value this package cannot encode or decode (an unregistered Go type or
// event type, data the codec refuses, a Go type other than the one
// asked for) is a *[CodecError] naming the event type and Go type; it
// wraps eventstore.ErrInvalid and one of [ErrUnregistered],
// [ErrWrongType] or the codec's own error. Errors of the Store come back
// wrapped, so errors.Is(err, eventstore.ErrConflict) and the other
// sentinels work as in the root package.
package typed
