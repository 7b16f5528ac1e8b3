package decimal

import (
	"errors"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseString(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "12.50": "12.50", "1e3": "1000", "1E+3": "1000", "1.5e-3": "0.0015",
		"-7": "-7", "+7": "7", "007.10": "7.10", "0.000": "0.000",
		"123456789012345678901234567890": "123456789012345678901234567890",
		"9007199254740993":               "9007199254740993",
	} {
		d, err := Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, d.String(), "Parse(%q).String()", in)
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{"", "-", "1.", ".5", "1e", "e5", "1.2.3", "abc", "1e+", "0x10", "1_000", " 1", "NaN", "Infinity"} {
		_, err := Parse(in)
		assert.ErrorIs(t, err, ErrSyntax, "Parse(%q)", in)
	}
	for _, in := range []string{"1e999999999", "1e-5000", "1e1001"} {
		_, err := Parse(in)
		assert.True(t, errors.Is(err, ErrRange), "Parse(%q) = %v, want ErrRange", in, err)
	}
}

func TestAddExact(t *testing.T) {
	cases := []struct{ a, b, want string }{
		{"0.1", "0.2", "0.3"},
		{"9007199254740992", "1", "9007199254740993"}, // 2^53 + 1 stays exact
		{"9223372036854775807", "1", "9223372036854775808"},
		{"-9223372036854775808", "-1", "-9223372036854775809"},
		{"1.50", "1", "2.50"},
		{"-0.5", "0.25", "-0.25"},
		{"999999999999999999", "1", "1000000000000000000"},
		{"0.000000000000000000001", "1", "1.000000000000000000001"},
	}
	for _, c := range cases {
		a, err := Parse(c.a)
		require.NoError(t, err)
		b, err := Parse(c.b)
		require.NoError(t, err)
		sum, err := a.Add(b)
		require.NoError(t, err)
		assert.Equal(t, c.want, sum.String(), "%s + %s", c.a, c.b)
	}
}

// FuzzAdd checks Add against math/big.Rat, and that String parses back to
// the same value.
func FuzzAdd(f *testing.F) {
	f.Add("0.1", "0.2")
	f.Add("9007199254740992", "1")
	f.Add("-1e3", "12.5e-2")
	f.Add("999999999999999999", "999999999999999999")
	f.Fuzz(func(t *testing.T, x, y string) {
		a, err1 := Parse(x)
		b, err2 := Parse(y)
		if err1 != nil || err2 != nil {
			return
		}
		sum, err := a.Add(b)
		if err != nil {
			return
		}
		want := new(big.Rat).Add(a.Rat(), b.Rat())
		if sum.Rat().Cmp(want) != 0 {
			t.Fatalf("%s + %s = %s, want %s", x, y, sum, want.FloatString(40))
		}
		back, err := Parse(sum.String())
		if err != nil || back.Rat().Cmp(want) != 0 || back.String() != sum.String() {
			t.Fatalf("String %q does not parse back: %v", sum.String(), err)
		}
	})
}
