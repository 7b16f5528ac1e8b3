package eventstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecimal(t *testing.T) {
	var v struct {
		A, B, C, D eventstore.Decimal
	}
	require.NoError(t, json.Unmarshal([]byte(`{"A":"12.50","B":3,"C":null,"D":"-1e3"}`), &v))
	assert.Equal(t, eventstore.Decimal("12.50"), v.A, "the exact text is kept")
	assert.Equal(t, eventstore.Decimal("3"), v.B, "a JSON number is taken too")
	assert.Equal(t, eventstore.Decimal(""), v.C)
	f, err := v.A.Float64()
	require.NoError(t, err)
	assert.Equal(t, 12.5, f)
	n, err := v.B.Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	_, err = v.A.Int64()
	assert.Error(t, err, "12.50 is not an int64")
	f, err = v.D.Float64()
	require.NoError(t, err)
	assert.Equal(t, -1000.0, f)

	for _, bad := range []string{`{"A":"cheap"}`, `{"A":true}`, `{"A":"1.2.3"}`, `{"A":""}`} {
		assert.Error(t, json.Unmarshal([]byte(bad), &v), bad)
	}
	out, err := json.Marshal(struct{ A, Z eventstore.Decimal }{A: "0.30"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"A":"0.30","Z":null}`, string(out))
}

// ExampleDecimal decodes a projection instance, whose numbers are JSON
// strings, into a struct.
func ExampleDecimal() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	_ = p.Create(ctx, eventstore.Definition{Name: "orders", Feed: "order", Handlers: []eventstore.Handler{{
		EventType: "Placed",
		Functions: []eventstore.Function{
			{Name: eventstore.FuncAdd, TargetSelector: "$.projection.total", EventSelector: "$.event.total"},
			{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"},
		},
	}}})
	for _, total := range []string{`{"total":12.50}`, `{"total":0.25}`} {
		_, _ = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Placed", Data: []byte(total)}}, nil)
	}
	pj, _ := p.Single(ctx, "orders", "o-1")
	var order struct {
		Total eventstore.Decimal `json:"total"`
		Count eventstore.Decimal `json:"count"`
	}
	if err := json.Unmarshal(pj.Data, &order); err != nil {
		fmt.Println(err)
		return
	}
	total, _ := order.Total.Float64()
	count, _ := order.Count.Int64()
	fmt.Println(string(pj.Data))
	fmt.Println(order.Total, total, count)
	// Output:
	// {"total":"12.75","count":"2"}
	// 12.75 12.75 2
}
