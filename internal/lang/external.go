package lang

// External functions: a handler with a functionUri hands each event and
// the instance's state to a function that answers with the new state.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/eventkit-go/eventstore/internal/jsonscan"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/tidwall/gjson"
)

// Answer is an external function's answer, the fields of
// eventstore.FunctionResult (which converts to it): the instance's new
// State, a JSON object; a Reference (a JSON string or number, null to
// clear, nil to keep); or Delete.
type Answer struct {
	State, Reference json.RawMessage
	Delete           bool
}

// CallFunction applies event e to in through an external function, whole
// or not at all: call receives the JSON the function is sent
// ({"metadata","currentState","event"}) and returns its answer. projection
// is the projection's name, aggregated whether it is aggregated. A state
// over limit bytes is refused with an error wrapping ErrTooLarge.
func (in *Instance) CallFunction(e *storage.Event, projection string, aggregated bool, limit int, call func(body []byte) (Answer, error)) error {
	saved := *in
	if in.Deleted { // deleted earlier in the page: the event starts afresh
		in.root, in.Deleted, in.size = &object{}, false, 2
		in.State.CreatedAt, in.State.Reference = e.RecordedAt, storage.Reference{}
	}
	res, err := call(functionBody(projection, aggregated, e, in))
	if err == nil && !res.Delete {
		err = applyAnswer(in, res, limit)
	}
	if err != nil {
		*in = saved
		return err
	}
	if res.Delete {
		in.Deleted, in.root, in.size = true, &object{}, 2
	}
	if in.State.CreatedAt.IsZero() {
		in.State.CreatedAt = e.RecordedAt
	}
	in.Changed = true
	in.State.Position = e.Position
	in.State.UpdatedAt = e.RecordedAt
	return nil
}

// applyAnswer checks res and replaces in's state with it.
func applyAnswer(in *Instance, res Answer, limit int) error {
	if len(res.State) > limit {
		return fmt.Errorf("the updated state is %d bytes, over the limit of %d: %w", len(res.State), limit, ErrTooLarge)
	}
	if err := jsonscan.Check(res.State, limits.MaxDataDepth); err != nil {
		return fmt.Errorf("the updated state is not JSON: %v", err)
	}
	r := gjson.ParseBytes(res.State)
	if !r.IsObject() {
		return errors.New("the updated state is not a JSON object")
	}
	ref := in.State.Reference
	if res.Reference != nil {
		switch r := gjson.ParseBytes(res.Reference); r.Type {
		case gjson.Null:
			ref = storage.Reference{}
		case gjson.String:
			ref = textOrNumberRef(r.Str)
		case gjson.Number:
			ref = numberRef(r.Raw)
		default:
			return errors.New("the reference must be a string, a number or null")
		}
	}
	root, ok := fromJSON(r).(*object)
	if !ok {
		return errors.New("the updated state is not a JSON object")
	}
	in.root, in.size, in.State.Reference = root, len(res.State), ref
	return nil
}

// functionBody encodes the JSON an external function receives.
func functionBody(projection string, aggregated bool, e *storage.Event, in *Instance) []byte {
	b := make([]byte, 0, 256+len(e.Data)+in.size)
	b = append(b, `{"metadata":{"aggregateId":`...)
	b = appendString(b, e.AggregateID)
	b = append(b, `,"aggregateType":`...)
	b = appendString(b, e.AggregateType)
	b = append(b, `,"feedName":`...)
	b = appendString(b, e.AggregateType)
	b = append(b, `,"projectionName":`...)
	b = appendString(b, projection)
	b = append(b, `,"projectionId":`...)
	if aggregated {
		b = appendString(b, projection)
	} else {
		b = appendString(b, in.ID)
	}
	created, updated := in.State.CreatedAt, in.State.UpdatedAt
	if created.IsZero() {
		created = e.RecordedAt
	}
	if updated.IsZero() {
		updated = e.RecordedAt
	}
	b = append(b, `,"sequenceNumber":`...)
	b = strconv.AppendInt(b, e.Position, 10)
	b = append(b, `,"aggregateVersion":`...)
	b = strconv.AppendInt(b, e.Version, 10)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, e.RecordedAt.UnixMilli(), 10)
	b = append(b, `,"createdAt":`...)
	b = strconv.AppendInt(b, created.UnixMilli(), 10)
	b = append(b, `,"updatedAt":`...)
	b = strconv.AppendInt(b, updated.UnixMilli(), 10)
	b = append(b, `},"currentState":`...)
	b = appendJSON(b, in.root)
	b = append(b, `,"event":{"eventId":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"eventType":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"data":`...)
	if e.Data != nil {
		b = append(b, e.Data...)
	} else {
		b = append(b, "{}"...)
	}
	if e.EncryptedData != "" {
		b = append(b, `,"encryptedData":`...)
		b = appendString(b, e.EncryptedData)
	}
	if !e.Metadata.IsZero() {
		b = append(b, `,"metadata":`...)
		b = storage.AppendMetadata(b, e.Metadata)
	}
	return append(b, "}}"...)
}
