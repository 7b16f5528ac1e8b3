package decimal

import (
	"errors"
	"strings"
	"testing"
)

// TestAddStaysParseable: a sum Add returns always parses back, so a
// projection target that add produced never becomes unreadable.
func TestAddStaysParseable(t *testing.T) {
	nines := strings.Repeat("9", MaxDigits)
	for _, c := range []struct{ a, b string }{
		{nines, "1"}, {nines, nines}, {"-" + nines, "-1"},
		{"0." + strings.Repeat("9", MaxDigits), "1"},
	} {
		a, err1 := Parse(c.a)
		b, err2 := Parse(c.b)
		if err1 != nil || err2 != nil {
			t.Fatalf("operands: %v %v", err1, err2)
		}
		sum, err := a.Add(b)
		if err == nil {
			if _, perr := Parse(sum.String()); perr != nil {
				t.Errorf("%.10s… + %.10s…: Add returned a sum of %d characters that does not parse back: %v", c.a, c.b, len(sum.String()), perr)
			}
			continue
		}
		if !errors.Is(err, ErrRange) {
			t.Errorf("Add: %v, want ErrRange", err)
		}
	}
	if _, err := Parse(strings.Repeat("9", MaxDigits+1)); err == nil || !strings.Contains(err.Error(), "1000") {
		t.Errorf("the range error must name the limit: %v", err)
	}
}
