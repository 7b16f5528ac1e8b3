// Package reactions calls out when events are stored: when an event of a
// chosen type is saved, a reaction is scheduled for the event's time plus
// an offset (or a time read from the event's data), and when it is due it
// POSTs the event, signed, to an HTTP endpoint or calls a Go function,
// unless an event of a cancelling type on the same aggregate came first.
//
// # Durable and once
//
// Reactions are not timers: they are stored (storage.ReactionStorage,
// implemented by the memory, SQLite and PostgreSQL backends) and survive a
// restart; one that fell due while no process ran is attempted when one
// runs again. The Engine follows each definition's feed from the feed's
// head at the time the definition was created (earlier events never
// fire), and schedules each page of events with a compare-and-set of the
// definition's checkpoint, so that with several processes on one database
// each event schedules exactly once. A due reaction is claimed with a
// lease (twice Options.Timeout plus a minute) before it is attempted, so
// one process at a time attempts it; a process that dies loses its claim
// when the lease ends and another takes over. A receiver that answers 2xx every
// time therefore sees every reaction once, unless an attempt outlives its
// lease or the process dies after the call and before recording it: the
// header Serialized-Reaction-Id lets a receiver drop such a repeat.
//
// # Batches
//
// The Engine shares the storage with the Store's saves (on SQLite its one
// write connection), so it writes in batches: scheduling rounds woken by
// saves come at most every 50 ms, and events that schedule nothing are
// passed without a write (the checkpoint follows within a second); due
// reactions are claimed at most every 50 ms, up to twice
// Options.Concurrency at once, and outcomes recorded together every
// 50 ms. A reaction is thus attempted up to about 50 ms after it fell due.
//
// # Retries
//
// A failed attempt (a non-2xx answer, a redirect, a timeout, a refused
// connection, a Func's error) is retried after Options.Backoff, doubling
// each time (at most a day), until Options.Attempts attempts have been
// made; the reaction is then FAILED. Engine.Execute runs a reaction again.
//
// # Tenants
//
// A program with tenants (package tenancy) keeps one Engine for its
// project's definitions and one per open tenant (Engine.ForTenant), whose
// definitions are the project's (Engine.SyncDefinitions) and whose
// reactions are kept in the tenant's storage, each delivery carrying the
// tenant's id in its metadata.
//
// # Outbound calls
//
// Deliveries leave the server: see Outbound for the addresses refused by
// default and how to allow some. Calls have a connect timeout of 5 s and
// a whole-call timeout of Options.Timeout, follow no redirect and read at
// most Options.MaxResponseBytes of an answer.
package reactions
