package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/jsonscan"
)

var saveSeeds = []string{
	``, ` `, `{`, `[]`, `null`, `{}`, `{"events":null}`, `{"events":[]}`, `{"events":{}}`,
	`{"events":[{"eventId":"11111111-1111-4111-8111-111111111111","eventType":"A","data":{"n":1.50}}]}`,
	`{"events":[{"eventId":1,"eventType":[],"data":"x"}],"expectedVersion":1e3,"aggregateId":7}`,
	`{"events":[1,null,{}],"expectedVersion":99999999999999999999}`,
	`{"events":[],"events":[]}`, `{"a":1}{"b":2}`, `{"events":[{"data":{"x":"\ud800"}}]}`,
	"{\"events\":[{\"eventType\":\"\xff\"}]}", `{"expectedVersion":-0}`, `{"events":[{"eventId":"a"` + "\t" + `}]}`,
	strings.Repeat("[", 300), `{"events":[{"data":` + strings.Repeat(`{"a":`, 300) + strings.Repeat("}", 301) + `]}`,
	`{"events":[` + strings.Repeat(`{},`, 10000) + `{}]}`,
}

// FuzzDecodeSave checks that the save decoder never panics, answers 400
// exactly for what encoding/json.Valid rejects (422 for a body nested
// deeper than maxBodyDepth), and otherwise returns either a request or a
// 422 naming at least one field.
func FuzzDecodeSave(f *testing.F) {
	for _, s := range saveSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeSave(body)
		code, _ := status(err)
		valid := json.Valid(body)
		switch {
		case errors.Is(jsonscan.Check(body, maxBodyDepth), jsonscan.ErrDepth):
			if code != http.StatusUnprocessableEntity {
				t.Fatalf("%q nests deeper than %d: got %v (status %d), want 422", body, maxBodyDepth, err, code)
			}
		case !valid && (err == nil || code != http.StatusBadRequest):
			t.Fatalf("invalid JSON %q: got %v (status %d), want 400", body, err, code)
		case valid && code == http.StatusBadRequest:
			t.Fatalf("valid JSON %q answered 400: %v", body, err)
		case err != nil && valid:
			var ve *eventstore.ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) == 0 || code != http.StatusUnprocessableEntity {
				t.Fatalf("%q: error %v is not a 422 with fields", body, err)
			}
		case err == nil:
			for i, e := range req.Events {
				if e.Data != nil && !json.Valid(e.Data) {
					t.Fatalf("%q: event %d data %q is not JSON", body, i, e.Data)
				}
			}
		}
	})
}

var definitionSeeds = []string{
	``, `{}`, `[]`, `{"handlers":null}`, `{"handlers":[]}`, `{"handlers":[{}]}`,
	`{"projectionName":"p","feedName":"f","aggregated":true,"handlers":[{"eventType":"E","functions":[
	  {"function":"add","targetSelector":"$.projection.a","eventSelector":"$.event.b"},
	  {"function":"set","targetSelector":"$.projection.c","rawData":"<x>&\u0000"},{"function":"inc"}]}]}`,
	`{"projectionName":1,"aggregated":"no","handlers":[1,{"functions":{}}]}`,
	`{"handlers":[{"eventType":"E","functions":[null,{"rawData":2}]}]}`,
	`{"projectionName":"\ud83d\ude00","feedName":"\ud800"}`, `{"aggregated":null,"handlers":[{"functions":[]}]}`,
}

// FuzzDecodeDefinition checks that the definition decoder never panics and
// that whatever it accepts survives json.Marshal and decoding again.
func FuzzDecodeDefinition(f *testing.F) {
	for _, s := range definitionSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := decodeDefinition(body)
		if err != nil {
			if code, _ := status(err); code != http.StatusBadRequest && code != http.StatusUnprocessableEntity {
				t.Fatalf("%q: error %v maps to %d", body, err, code)
			}
			return
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := decodeDefinition(again)
		if err != nil {
			t.Fatalf("%q: re-encoded as %s, which is refused: %v", body, again, err)
		}
		if again2, _ := json.Marshal(d2); string(again2) != string(again) {
			t.Fatalf("%q: round trip changed the definition:\n%s\n%s", body, again, again2)
		}
	})
}
