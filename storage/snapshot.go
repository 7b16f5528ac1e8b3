package storage

import "time"

// MaxSnapshotBytes bounds Snapshot.Data: a snapshot is read whole on
// every load that uses it, so it is kept to what one read may carry.
const MaxSnapshotBytes = 16 << 20

// Snapshot is the state of an aggregate folded from its events up to one
// version, kept so that a load can start from it instead of the first
// event: it reads the snapshot, then the events after Version. A Storage
// keeps at most one per aggregate, the one of the highest Version saved.
type Snapshot struct {
	// AggregateType and AggregateID identify the aggregate.
	AggregateType, AggregateID string
	// Version is the aggregate version the state includes: it was folded
	// from the events of versions 1 to Version, and a load continues with
	// the events after it. It is at least 1.
	Version int64
	// StateVersion is the version of the state's shape, chosen by the
	// user (at least 0): a reader that expects another shape ignores the
	// snapshot and folds the events again.
	StateVersion int
	// Data is the encoded state, opaque to the store: at most
	// MaxSnapshotBytes, possibly empty.
	Data []byte
	// RecordedAt is when the snapshot was saved, in UTC, with microsecond
	// precision.
	RecordedAt time.Time
}
