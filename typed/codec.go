package typed

import (
	"encoding/json"

	"github.com/eventkit-go/eventstore/internal/jsondec"
)

// Codec encodes event values (and aggregate states, for snapshots) into
// bytes and back, as encoding/json's Marshal and Unmarshal do. It must be
// safe for concurrent use.
//
// The store keeps an event's data only as a JSON object (or no data): the
// function language of projections and the HTTP API read it. A Codec of
// another format (protobuf, gob, ...) must therefore wrap its bytes in a
// JSON object, such as {"proto":"<base64>"}, and accept that wrapper back;
// Registry.Encode refuses data that is not a JSON object. Snapshot data
// has no such rule.
type Codec interface {
	// Marshal encodes v, a value of a registered type (or a pointer to
	// one), or an aggregate's state.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into v, a pointer to a new value of the
	// registered type (or to a zero state).
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the default Codec: encoding/json. A type's own
// MarshalJSON and UnmarshalJSON methods apply, so a type decides its own
// encoding without the registry knowing.
//
// A Projection whose events or state use JSONCodec decodes them with the
// results of encoding/json (values and errors alike) but, for a struct of
// strings, numbers and booleans, without its reflection per call: a
// rebuild decodes every event, and encoding/json was most of the cost of
// a Go handler. Fields of other kinds are still decoded by encoding/json.
type JSONCodec struct{}

// Marshal returns json.Marshal(v).
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal calls json.Unmarshal(data, v).
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// decoder returns codec.Unmarshal for new values of T; for JSONCodec, and
// a T that package jsondec maps, a decoder with the same results that
// skips encoding/json's reflection on each call (a projection decodes
// every event it folds).
func decoder[T any](codec Codec) func(data []byte, v *T) error {
	switch codec.(type) {
	case JSONCodec, *JSONCodec:
		if d := jsondec.For[T](); d != nil {
			return d.Unmarshal
		}
	}
	return func(data []byte, v *T) error { return codec.Unmarshal(data, v) }
}
