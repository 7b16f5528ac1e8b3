package typed_test

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/typed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type placed struct {
	Total float64 `json:"total"`
	Items int     `json:"items"`
}

type shipped struct {
	Carrier string `json:"carrier"`
}

type amount float64

func newRegistry(t *testing.T) *typed.Registry {
	t.Helper()
	reg := typed.NewRegistry(nil)
	require.NoError(t, errors.Join(
		typed.Register[placed](reg, "OrderPlaced"),
		typed.Register[shipped](reg, "OrderShipped"),
	))
	return reg
}

func TestRegisterRefuses(t *testing.T) {
	reg := newRegistry(t)
	for name, err := range map[string]error{
		"a name registered already":    typed.Register[amount](reg, "OrderPlaced"),
		"a Go type registered already": typed.Register[placed](reg, "Placed2"),
		"an invalid name":              typed.Register[amount](reg, "a/b"),
		"an empty name":                typed.Register[amount](reg, ""),
		"an interface type":            typed.Register[fmt.Stringer](reg, "Stringer"),
		"NewEvent":                     typed.Register[typed.NewEvent](reg, "NewEvent"),
		"a nil Registry":               typed.Register[amount](nil, "Amount"),
	} {
		assert.ErrorIs(t, err, eventstore.ErrInvalid, name)
	}
	err := typed.Register[placed](reg, "Placed2")
	assert.ErrorContains(t, err, `as "OrderPlaced"`, "the message names the earlier registration")
	assert.Equal(t, []string{"OrderPlaced", "OrderShipped"}, reg.EventTypes(), "refused registrations change nothing")
}

func TestEncodeDecode(t *testing.T) {
	reg := newRegistry(t)
	ne, err := reg.Encode(placed{Total: 12.5, Items: 2})
	require.NoError(t, err)
	assert.Equal(t, "OrderPlaced", ne.Type)
	assert.JSONEq(t, `{"total":12.5,"items":2}`, string(ne.Data))
	assert.Len(t, ne.ID, 36, "a new UUID")

	ptr, err := reg.Encode(&shipped{Carrier: "DHL"})
	require.NoError(t, err)
	assert.Equal(t, "OrderShipped", ptr.Type, "a *T encodes as its T")

	md := eventstore.Metadata{CorrelationID: "c-1", Values: map[string]string{"user": "u-1"}}
	given, err := reg.Encode(typed.NewEvent{ID: "9d7e0c52-1b0a-4d38-a3a4-0d6a3f0e0001", Value: shipped{}, Metadata: md})
	require.NoError(t, err)
	assert.Equal(t, "9d7e0c52-1b0a-4d38-a3a4-0d6a3f0e0001", given.ID)
	assert.Equal(t, md, given.Metadata)

	ev, err := reg.Decode(eventstore.Event{ID: ne.ID, Type: ne.Type, Data: ne.Data, Version: 3})
	require.NoError(t, err)
	assert.Equal(t, placed{Total: 12.5, Items: 2}, ev.Value, "a T, not a *T")
	assert.Equal(t, int64(3), ev.Version, "the stored event stays reachable")
	assert.Equal(t, ne.Data, ev.Data)

	empty, err := reg.Decode(eventstore.Event{Type: "OrderShipped"})
	require.NoError(t, err)
	assert.Equal(t, shipped{}, empty.Value, "no data decodes to the zero value")

	p, err := typed.DecodeAs[placed](reg, eventstore.Event{Type: "OrderPlaced", Data: []byte(`{"items":4}`)})
	require.NoError(t, err)
	assert.Equal(t, 4, p.Items)

	name, err := typed.EventType[shipped](reg)
	require.NoError(t, err)
	assert.Equal(t, "OrderShipped", name)
}

func TestCodecErrors(t *testing.T) {
	reg := newRegistry(t)
	require.NoError(t, typed.Register[amount](reg, "Amount"))
	stored := eventstore.Event{ID: "e-1", Type: "OrderCancelled", Data: []byte(`{}`)}
	for _, c := range []struct {
		name   string
		err    error
		cause  error
		phrase string
	}{
		{"an unregistered Go type", second(reg.Encode(struct{ A int }{1})), typed.ErrUnregistered, "struct { A int }: Go type not registered"},
		{"nil", second(reg.Encode(nil)), typed.ErrWrongType, "nil"},
		{"a nil *T", second(reg.Encode((*placed)(nil))), typed.ErrWrongType, `*typed_test.placed as "OrderPlaced": wrong Go type: nil pointer`},
		{"a NewEvent of nothing", second(reg.Encode(typed.NewEvent{})), typed.ErrWrongType, "nil"},
		{"data that is not an object", second(reg.Encode(amount(3))), nil, `typed_test.amount as "Amount": the codec's data is not a JSON object`},
		{"a value that does not encode", second(reg.Encode(placed{Total: inf()})), nil, "unsupported value"},
		{"an unregistered event type", second(reg.Decode(stored)), typed.ErrUnregistered, `decode event e-1 of type "OrderCancelled": event type not registered`},
		{"data that does not decode", second(reg.Decode(eventstore.Event{ID: "e-2", Type: "OrderPlaced", Data: []byte(`{"total":"x"}`)})),
			nil, `decode event e-2 of type "OrderPlaced" into typed_test.placed: json: cannot unmarshal string`},
		{"the wrong Go type", second(typed.DecodeAs[shipped](reg, eventstore.Event{ID: "e-3", Type: "OrderPlaced"})),
			typed.ErrWrongType, `into typed_test.shipped: wrong Go type: the event type is registered for typed_test.placed`},
		{"an unregistered T", second(typed.EventType[int](reg)), typed.ErrUnregistered, "int: Go type not registered"},
	} {
		var ce *typed.CodecError
		if assert.ErrorAs(t, c.err, &ce, c.name) {
			assert.ErrorIs(t, c.err, eventstore.ErrInvalid, c.name)
			if c.cause != nil {
				assert.ErrorIs(t, c.err, c.cause, c.name)
			}
			assert.Contains(t, c.err.Error(), c.phrase, c.name)
		}
	}
	ev, err := reg.Decode(stored)
	require.Error(t, err)
	assert.Equal(t, stored, ev.Event, "a failed decode keeps the stored event")
	assert.Nil(t, ev.Value)

	var syntax *json.UnmarshalTypeError
	assert.ErrorAs(t, second(reg.Decode(eventstore.Event{Type: "OrderPlaced", Data: []byte(`{"items":"x"}`)})), &syntax, "the codec's error stays reachable")
}

func second[T any](_ T, err error) error { return err }

func inf() float64 {
	var zero float64
	return 1 / zero
}

// gobCodec is a codec of another format than JSON: it wraps its bytes in
// a JSON object, as Codec says it must.
type gobCodec struct{}

func (gobCodec) Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	return json.Marshal(map[string][]byte{"gob": b.Bytes()})
}

func (gobCodec) Unmarshal(data []byte, v any) error {
	var w map[string][]byte
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	return gob.NewDecoder(bytes.NewReader(w["gob"])).Decode(v)
}

func TestOtherCodec(t *testing.T) {
	reg := typed.NewRegistry(&typed.RegistryOptions{Codec: gobCodec{}})
	require.NoError(t, typed.Register[placed](reg, "OrderPlaced"))
	require.NoError(t, typed.RegisterCodec[shipped](reg, "OrderShipped", typed.JSONCodec{}))

	ne, err := reg.Encode(placed{Total: 1.5, Items: 1})
	require.NoError(t, err)
	var w map[string]string
	require.NoError(t, json.Unmarshal(ne.Data, &w))
	_, err = base64.StdEncoding.DecodeString(w["gob"])
	assert.NoError(t, err, "the Registry's codec wrote %s", ne.Data)
	ev, err := reg.Decode(eventstore.Event{Type: ne.Type, Data: ne.Data})
	require.NoError(t, err)
	assert.Equal(t, placed{Total: 1.5, Items: 1}, ev.Value)

	js, err := reg.Encode(shipped{Carrier: "UPS"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"carrier":"UPS"}`, string(js.Data), "a type's own codec wins")
}

// TestRegisterWhileDecoding: registering is safe while other goroutines
// encode and decode (run with -race).
func TestRegisterWhileDecoding(t *testing.T) {
	reg := newRegistry(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			for range 200 {
				ne, err := reg.Encode(placed{Items: 1})
				if err == nil {
					_, err = reg.Decode(eventstore.Event{Type: ne.Type, Data: ne.Data})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	type t1 struct{ A int }
	type t2 struct{ B int }
	type t3 struct{ C int }
	wg.Go(func() {
		for _, err := range []error{typed.Register[t1](reg, "T1"), typed.Register[t2](reg, "T2"), typed.Register[t3](reg, "T3")} {
			if err != nil {
				errs <- err
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, []string{"OrderPlaced", "OrderShipped", "T1", "T2", "T3"}, reg.EventTypes())
}
