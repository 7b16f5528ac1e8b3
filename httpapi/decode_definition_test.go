package httpapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// validationFields returns the fields of err, a *eventstore.ValidationError.
func validationFields(t *testing.T, err error) []eventstore.FieldError {
	t.Helper()
	var ve *eventstore.ValidationError
	require.True(t, errors.As(err, &ve), "want a *ValidationError, got %v", err)
	return ve.Fields
}

// TestDecodeDefinitionDescription: decodeDefinitionBody reads description as a
// string and refuses any other type, naming the field.
func TestDecodeDefinitionDescription(t *testing.T) {
	body := `{"projectionName":"n","description":"Orders per customer.\nOne line more.","feedName":"order",
		"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`
	d, err := decodeDefinitionBody([]byte(body))
	require.NoError(t, err)
	assert.Equal(t, "Orders per customer.\nOne line more.", d.Description)

	d, err = decodeDefinitionBody([]byte(strings.Replace(body, `"Orders per customer.\nOne line more."`, `null`, 1)))
	require.NoError(t, err, "null is no description")
	assert.Empty(t, d.Description)

	for _, bad := range []string{`12`, `true`, `["a"]`, `{"text":"a"}`} {
		_, err := decodeDefinitionBody([]byte(strings.Replace(body, `"Orders per customer.\nOne line more."`, bad, 1)))
		f := validationFields(t, err)
		if assert.Len(t, f, 1, "description %s", bad) {
			assert.Equal(t, "description", f[0].Field)
			assert.Equal(t, "must be a string", f[0].Message)
		}
	}
}

// TestDecodeDefinitionIndexedFields: decodeDefinitionBody reads
// indexedFields as an array of strings, naming a bad element.
func TestDecodeDefinitionIndexedFields(t *testing.T) {
	body := `{"projectionName":"n","feedName":"f","indexedFields":["name","$.projection.city"],
		"handlers":[{"eventType":"E","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`
	d, err := decodeDefinitionBody([]byte(body))
	require.NoError(t, err)
	assert.Equal(t, []string{"name", "$.projection.city"}, d.IndexedFields)
	for bad, field := range map[string]string{`"name"`: "indexedFields", `[1]`: "indexedFields[0]", `["a",{}]`: "indexedFields[1]"} {
		_, err := decodeDefinitionBody([]byte(strings.Replace(body, `["name","$.projection.city"]`, bad, 1)))
		f := validationFields(t, err)
		if assert.Len(t, f, 1, bad) {
			assert.Equal(t, field, f[0].Field, bad)
		}
	}
}
