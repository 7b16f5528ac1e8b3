package typed

import "encoding/json"

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
type JSONCodec struct{}

// Marshal returns json.Marshal(v).
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal calls json.Unmarshal(data, v).
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
