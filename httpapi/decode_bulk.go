package httpapi

import (
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
)

// decodeBulk decodes the body of POST /aggregates/{type}/events: either
// {"batches": [{"aggregateId", "events", "expectedVersion"}, ...]} or the
// older single form {"aggregateId", "events", "expectedVersion"}. Each
// batch is decoded as a save body; its field errors are prefixed with
// "batches[i].". Mixing the forms, an empty batches array or a batch
// without aggregateId is a *eventstore.ValidationError (422).
func decodeBulk(body []byte) ([]eventstore.Batch, error) {
	fe := &fieldErrors{op: "save"}
	root, err := parseBody(body, fe)
	if err != nil {
		return nil, err
	}
	f := fields(root, "", "a save request", fe, "batches", "events", "aggregateId", "expectedVersion")
	if err := fe.err(); err != nil {
		return nil, err
	}
	if !present(f[0]) {
		req, err := decodeSave(body)
		if err != nil {
			return nil, err
		}
		if req.AggregateID == nil {
			fe.add("aggregateId", "is required (or use the batches form)")
			return nil, fe.err()
		}
		return []eventstore.Batch{toBatch(req)}, nil
	}
	for i, name := range []string{"events", "aggregateId", "expectedVersion"} {
		if present(f[i+1]) {
			fe.add(name, "cannot be combined with batches: use one form")
		}
	}
	items := array(f[0], "batches", fe, limits.MaxSaveAllBatches, "batches")
	switch {
	case items == nil:
	case len(items) == 0:
		fe.add("batches", "at least one batch is required")
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	batches := make([]eventstore.Batch, 0, len(items))
	for i, item := range items {
		prefix := fmt.Sprintf("batches[%d]", i)
		if !item.IsObject() {
			fe.add(prefix, "must be an object")
			continue
		}
		req, err := decodeSave([]byte(item.Raw))
		var ve *eventstore.ValidationError
		switch {
		case errors.As(err, &ve):
			for _, fl := range ve.Fields {
				if fl.Field == "" {
					fl.Field = prefix
				} else {
					fl.Field = prefix + "." + fl.Field
				}
				fe.fields = append(fe.fields, fl)
			}
			continue
		case err != nil:
			return nil, err
		case req.AggregateID == nil:
			fe.add(prefix+".aggregateId", "is required")
			continue
		}
		batches = append(batches, toBatch(req))
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	return batches, nil
}

func toBatch(req saveRequest) eventstore.Batch {
	b := eventstore.Batch{AggregateID: *req.AggregateID, Events: req.Events}
	if req.ExpectedVersion != nil {
		b.ExpectedVersion = eventstore.ExpectVersion(*req.ExpectedVersion)
	}
	return b
}
