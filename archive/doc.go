// Package archive writes an event store out as a stream of batches and
// reads it back in, into any backend: a versioned, line-delimited JSON
// format with its Writer and Reader, and the tools Export, Import and
// Verify over an eventstore.Store. It is its own package because it is a
// file format and tools beside the store's API, not part of it: a program
// that only saves and reads events does not need it.
//
// # Format (version 1)
//
// An archive is UTF-8 text, one JSON object per line, each line ended by
// "\n" and at most MaxLineBytes long. The first line is the header:
//
//	{"format":"eventstore-archive","version":1}
//
// Every other line is one batch, the events one save appended to one
// aggregate, in the order the source's feed of all types gave them:
//
//	{"aggregateType":"order","aggregateId":"o-1","version":2,
//	 "recordedAt":"2026-12-01T10:00:00.000001Z",
//	 "events":[{"id":"<uuid>","type":"Paid","data":{...},
//	            "encryptedData":"...","metadata":{"correlationId":"...","k":"v"}}]}
//
// version is the aggregate version the batch produced (1 for its first);
// data, encryptedData and metadata are left out when empty; metadata has
// the shape of eventstore.Metadata over HTTP: "correlationId",
// "causationId" and the caller's own keys, all strings. A reader of
// version 1 refuses unknown fields and other versions. Record lines,
// which start with {"kind":, hold a projection or reaction definition or
// a tenant (Record, ExportProject); a reader refuses a kind it does not
// know rather than skip it, and a later kind changes the version.
//
// # Recorded times
//
// Import saves with eventstore.Store.SaveImported, which keeps each
// batch's recordedAt (from 1970 on, at most 5 minutes after
// the target's clock); positions are given in the archive's order.
package archive
