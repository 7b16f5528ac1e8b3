package eventstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
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

// TestDecimalRatAndCmp: Rat is exact, beyond float64's precision too, and
// Cmp compares numbers, not texts; neither takes a non-number.
func TestDecimalRatAndCmp(t *testing.T) {
	for _, c := range []struct {
		d    eventstore.Decimal
		want string // the big.Rat's text
	}{
		{"12.50", "25/2"}, {"-1e3", "-1000/1"}, {"0.1", "1/10"}, {"1e-3", "1/1000"}, {"0", "0/1"},
		{"9007199254740993.3", "90071992547409933/10"}, {"+007", "7/1"},
	} {
		r, err := c.d.Rat()
		require.NoError(t, err, c.d)
		assert.Equal(t, c.want, r.String(), c.d)
	}
	// 0.1 + 0.2 is 0.3 exactly, as add computes it (in float64 it is not).
	a, _ := eventstore.Decimal("0.1").Rat()
	b, _ := eventstore.Decimal("0.2").Rat()
	sum, _ := eventstore.Decimal("0.3").Rat()
	assert.Zero(t, new(big.Rat).Add(a, b).Cmp(sum))

	for _, c := range []struct {
		a, b eventstore.Decimal
		want int
	}{
		{"1.50", "1.5", 0}, {"2", "10", -1}, {"10", "9.99", 1}, {"-3", "-2.5", -1}, {"1e2", "100.000", 0},
		{"9007199254740993", "9007199254740992", 1}, // equal as float64
	} {
		got, err := c.a.Cmp(c.b)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "%s vs %s", c.a, c.b)
		back, err := c.b.Cmp(c.a)
		require.NoError(t, err)
		assert.Equal(t, -c.want, back, "%s vs %s", c.b, c.a)
	}
	for _, bad := range []eventstore.Decimal{"", "cheap", "1.2.3", "NaN", "Inf", "0x10", "1e5000"} {
		_, err := bad.Rat()
		assert.ErrorIs(t, err, eventstore.ErrInvalid, "%q", bad)
		_, err = eventstore.Decimal("1").Cmp(bad)
		assert.ErrorIs(t, err, eventstore.ErrInvalid, "%q", bad)
	}
}

// ExampleDecimal_Cmp compares amounts of a projection exactly, whatever
// their digits.
func ExampleDecimal_Cmp() {
	var order struct {
		Total, Limit eventstore.Decimal
	}
	_ = json.Unmarshal([]byte(`{"Total":"9007199254740993.10","Limit":9007199254740993.1}`), &order)
	c, err := order.Total.Cmp(order.Limit)
	fmt.Println(c, err)
	total, _ := order.Total.Rat()
	fmt.Println(total.FloatString(2))
	// Output:
	// 0 <nil>
	// 9007199254740993.10
}
