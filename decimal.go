package eventstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/eventkit-go/eventstore/internal/decimal"
)

// Decimal is a number of a projection instance, for decoding one into a Go
// struct: it takes a JSON string such as "12.50" (as projections render
// numbers) or a JSON number and keeps its text; the zero Decimal is none.
//
//	var order struct{ Total eventstore.Decimal `json:"total"` }
//	err := json.Unmarshal(proj.Data, &order)
//	total, err := order.Total.Float64()
type Decimal string

// UnmarshalJSON implements json.Unmarshaler. JSON null leaves d as it is.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	s := string(b)
	switch {
	case s == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("eventstore: Decimal: %w", err)
		}
	}
	if _, err := decimal.Parse(s); err != nil {
		return fmt.Errorf("eventstore: Decimal: %q is not a decimal number", clip(s))
	}
	*d = Decimal(s)
	return nil
}

// MarshalJSON renders d as a JSON string, or null when zero.
func (d Decimal) MarshalJSON() ([]byte, error) {
	if d == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(d))
}

// Float64 returns d as the nearest float64.
func (d Decimal) Float64() (float64, error) {
	f, err := strconv.ParseFloat(string(d), 64)
	if err != nil {
		return 0, fmt.Errorf("eventstore: Decimal %q: %w", clip(string(d)), err)
	}
	return f, nil
}

// Int64 returns d as an int64, or an error when it has a fraction or is
// too large.
func (d Decimal) Int64() (int64, error) {
	n, err := strconv.ParseInt(string(d), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("eventstore: Decimal %q is not an int64: %w", clip(string(d)), err)
	}
	return n, nil
}

// Rat returns d exactly, as a big.Rat: "12.50" is 25/2, "1e-3" is
// 1/1000, whatever its digits (at most 1,000, as a projection's numbers).
// A zero Decimal (no value) or text that is not a decimal number is an
// error wrapping ErrInvalid.
func (d Decimal) Rat() (*big.Rat, error) {
	if d == "" {
		return nil, fmt.Errorf("eventstore: Decimal: no value: %w", ErrInvalid)
	}
	v, err := decimal.Parse(string(d))
	if err != nil {
		return nil, fmt.Errorf("eventstore: Decimal %q is not a decimal number: %w", clip(string(d)), ErrInvalid)
	}
	return v.Rat(), nil
}

// Cmp compares d and e as numbers, exactly: it returns -1 when d < e, 0
// when they are equal ("1.50" and "1.5" are) and +1 when d > e. When
// either is not a number (see Rat), it returns 0 and an error wrapping
// ErrInvalid.
func (d Decimal) Cmp(e Decimal) (int, error) {
	a, errA := d.Rat()
	b, errB := e.Rat()
	if err := errors.Join(errA, errB); err != nil {
		return 0, err
	}
	return a.Cmp(b), nil
}

// String returns the decimal's text.
func (d Decimal) String() string { return string(d) }
