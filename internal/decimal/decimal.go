// Package decimal implements the exact decimal numbers that projections add
// and count with: arbitrary precision, never float64.
package decimal

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// MaxDigits bounds the digits of a number, before and after the point, so
// that a hostile input such as 1e999999999 cannot exhaust memory.
const MaxDigits = 1000

// ErrSyntax reports text that is not a decimal number.
var ErrSyntax = errors.New("not a decimal number")

// ErrRange reports a number with more than MaxDigits digits.
var ErrRange = errors.New("number has more than " + strconv.Itoa(MaxDigits) + " digits")

// Dec is an exact decimal: coef × 10^-scale with scale ≥ 0. When big is nil
// the coefficient is small. The zero value is 0.
type Dec struct {
	small int64
	big   *big.Int
	scale int32
}

// Int returns the integer n.
func Int(n int64) Dec { return Dec{small: n} }

// Parse reads a decimal in JSON number syntax, also accepting a leading '+'
// and leading zeros: [+-]digits[.digits][(e|E)[+-]digits]. The scale of the
// result is the number of fraction digits after applying the exponent, and
// never negative: 1.50 has scale 2, 1e3 is 1000.
func Parse(s string) (Dec, error) {
	orig := s
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
		if frac == "" {
			return Dec{}, syntaxErr(orig)
		}
	}
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return Dec{}, syntaxErr(orig)
	}
	e := int64(0)
	if exp != "" {
		x := exp
		if x[0] == '+' || x[0] == '-' {
			x = x[1:]
		}
		if x == "" || !allDigits(x) {
			return Dec{}, syntaxErr(orig)
		}
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || n > MaxDigits || n < -MaxDigits {
			return Dec{}, ErrRange
		}
		e = n
	} else if strings.ContainsAny(orig, "eE") {
		return Dec{}, syntaxErr(orig)
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	scale := int64(len(frac)) - e
	if len(digits) > MaxDigits || scale > MaxDigits || int64(len(digits))-scale > MaxDigits {
		return Dec{}, ErrRange
	}
	if digits == "" {
		digits = "0"
	}
	if scale < 0 {
		digits += strings.Repeat("0", int(-scale))
		scale = 0
	}
	var d Dec
	d.scale = int32(scale)
	if len(digits) <= 18 {
		n, _ := strconv.ParseInt(digits, 10, 64)
		if neg {
			n = -n
		}
		d.small = n
		return d, nil
	}
	b, _ := new(big.Int).SetString(digits, 10)
	if neg {
		b.Neg(b)
	}
	d.big = b
	return d, nil
}

func syntaxErr(s string) error {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return errors.Join(ErrSyntax, errors.New(strconv.Quote(s)))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

var pow10 = [...]int64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// Add returns d + e exactly, with the larger of the two scales.
func (d Dec) Add(e Dec) (Dec, error) {
	scale := max(d.scale, e.scale)
	if d.big == nil && e.big == nil {
		a, ok1 := rescaleSmall(d.small, scale-d.scale)
		b, ok2 := rescaleSmall(e.small, scale-e.scale)
		if ok1 && ok2 {
			if s, ok := addSmall(a, b); ok {
				return Dec{small: s, scale: scale}, nil
			}
		}
	}
	a, b := d.bigAt(scale), e.bigAt(scale)
	sum := a.Add(a, b)
	r := Dec{big: sum, scale: scale}
	// The digits of the coefficient are those Parse counts: a sum it would
	// refuse is refused here, so that a stored sum always parses back.
	if len(new(big.Int).Abs(sum).Text(10)) > MaxDigits {
		return Dec{}, ErrRange
	}
	if sum.IsInt64() && sum.Int64() > -1e18 && sum.Int64() < 1e18 {
		r = Dec{small: sum.Int64(), scale: scale}
	}
	return r, nil
}

func rescaleSmall(n int64, by int32) (int64, bool) {
	if by == 0 {
		return n, true
	}
	if by >= int32(len(pow10)) {
		return 0, false
	}
	p := pow10[by]
	if n > math.MaxInt64/p || n < math.MinInt64/p {
		return 0, false
	}
	return n * p, true
}

func addSmall(a, b int64) (int64, bool) {
	s := a + b
	if (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0) {
		return 0, false
	}
	return s, true
}

func (d Dec) bigAt(scale int32) *big.Int {
	b := new(big.Int)
	if d.big != nil {
		b.Set(d.big)
	} else {
		b.SetInt64(d.small)
	}
	if by := scale - d.scale; by > 0 {
		b.Mul(b, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(by)), nil))
	}
	return b
}

// Rat returns d as a big.Rat, for tests and comparisons.
func (d Dec) Rat() *big.Rat {
	r := new(big.Rat).SetInt(d.bigAt(d.scale))
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.scale)), nil)
	return r.Quo(r, new(big.Rat).SetInt(den))
}

// String renders d in plain notation with exactly its scale of fraction
// digits: "0.3", "-12.50", "1000".
func (d Dec) String() string {
	return string(d.Append(nil))
}

// Append appends the String form of d to b.
func (d Dec) Append(b []byte) []byte {
	var digits []byte
	neg := false
	if d.big != nil {
		neg = d.big.Sign() < 0
		digits = new(big.Int).Abs(d.big).Append(nil, 10)
	} else {
		n := d.small
		neg = n < 0
		var tmp [24]byte
		u := uint64(n)
		if neg {
			u = uint64(-n)
		}
		digits = strconv.AppendUint(tmp[:0], u, 10)
	}
	if neg {
		b = append(b, '-')
	}
	if d.scale == 0 {
		return append(b, digits...)
	}
	sc := int(d.scale)
	if len(digits) <= sc {
		b = append(b, '0', '.')
		for i := len(digits); i < sc; i++ {
			b = append(b, '0')
		}
		return append(b, digits...)
	}
	b = append(b, digits[:len(digits)-sc]...)
	b = append(b, '.')
	return append(b, digits[len(digits)-sc:]...)
}

// Neg returns -d.
func (d Dec) Neg() Dec {
	if d.big != nil {
		return Dec{big: new(big.Int).Neg(d.big), scale: d.scale}
	}
	return Dec{small: -d.small, scale: d.scale}
}

// Float returns d as the nearest float64 (for ordering, not arithmetic).
func (d Dec) Float() float64 {
	f, _ := d.Rat().Float64()
	return f
}
