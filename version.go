package eventstore

import "fmt"

// VersionCheck is an optional expectation on an aggregate's version, used
// for optimistic concurrency. The zero value expects nothing.
type VersionCheck struct {
	version int64
	set     bool
}

// ExpectVersion returns a VersionCheck that passes only when the aggregate's
// current version is v. ExpectVersion(0) means "the aggregate must not exist
// yet". A negative v never matches.
func ExpectVersion(v int64) VersionCheck { return VersionCheck{version: v, set: true} }

// IsSet reports whether the check expects a version.
func (c VersionCheck) IsSet() bool { return c.set }

// Version returns the expected version and whether one is set.
func (c VersionCheck) Version() (int64, bool) { return c.version, c.set }

// Allows reports whether an aggregate at version current passes the check.
func (c VersionCheck) Allows(current int64) bool { return !c.set || c.version == current }

// String returns "any" or the expected version.
func (c VersionCheck) String() string {
	if !c.set {
		return "any"
	}
	return fmt.Sprint(c.version)
}

// PlanAppend applies the rules of Storage.Append that every backend shares.
// Given the request, the aggregate's current version and the already stored
// events of that aggregate whose ids occur in req.Events, it returns:
//
//   - done == true and the stored batch's result (Duplicate set) when every
//     event is stored already: the backend writes nothing and returns it;
//   - an error wrapping ErrConflict when only some are stored, or when the
//     version check fails: the backend writes nothing and returns it;
//   - done == false and a nil error otherwise: the backend writes the batch
//     at version current+1.
//
// Backends call it inside the atomic step that then writes the batch.
func PlanAppend(req AppendRequest, current int64, stored []Event) (res AppendResult, done bool, err error) {
	if len(stored) > 0 {
		if len(stored) < len(req.Events) {
			return AppendResult{}, false, fmt.Errorf("%d of %d event ids are already stored in %s/%s: %w",
				len(stored), len(req.Events), req.AggregateType, req.AggregateID, ErrConflict)
		}
		res = AppendResult{Duplicate: true}
		for _, e := range stored {
			res.Version = max(res.Version, e.Version)
			res.Position = max(res.Position, e.Position)
		}
		return res, true, nil
	}
	if !req.ExpectedVersion.Allows(current) {
		return AppendResult{}, false, fmt.Errorf("expected version %s of %s/%s, it is at %d: %w",
			req.ExpectedVersion, req.AggregateType, req.AggregateID, current, ErrConflict)
	}
	return AppendResult{}, false, nil
}
