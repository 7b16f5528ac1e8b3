// Package jsonscan validates JSON text and bounds how deeply it nests, in
// one pass and without recursion: a hostile input such as megabytes of '['
// costs a loop over at most maxDepth+1 brackets, not one stack frame per
// byte.
//
// The syntax accepted is that of RFC 8259, exactly what encoding/json.Valid
// accepts: one value with optional surrounding whitespace. As with
// encoding/json.Valid, bytes inside strings are not checked to be UTF-8;
// callers that need UTF-8 check it separately (utf8.Valid).
package jsonscan

import (
	"errors"
	"fmt"
)

// ErrSyntax reports input that is not JSON.
var ErrSyntax = errors.New("not valid JSON")

// ErrDepth reports JSON whose arrays and objects nest deeper than allowed.
// Scanning stops at the first bracket beyond the limit, so the rest of the
// input is not known to be valid.
var ErrDepth = errors.New("nested too deeply")

// Error is the error Check returns: Err is ErrSyntax or ErrDepth, Offset
// the byte offset at which the problem was found.
type Error struct {
	Err    error
	Offset int
	// Depth is the depth limit, for ErrDepth.
	Depth int
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Err == ErrDepth {
		return fmt.Sprintf("JSON nests deeper than %d levels (at byte %d)", e.Depth, e.Offset)
	}
	return fmt.Sprintf("%v (at byte %d)", e.Err, e.Offset)
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// stackWords is how many 64-bit words of container kinds live on the
// stack; deeper limits allocate one bit per level.
const stackWords = 4

// class of a byte inside a string: 0 for bytes copied as they are.
var strClass = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = 1 // control characters must be escaped
	}
	t['"'] = 2
	t['\\'] = 3
	return t
}()

// Check reports whether b is one JSON value nested at most maxDepth levels
// deep: an array or object counts one level, together with the arrays and
// objects it holds, so {"a":[1]} is 2 levels deep and a number 0. It
// returns nil or an *Error wrapping ErrSyntax or ErrDepth. A negative
// maxDepth counts as 0.
//
// Check takes time linear in len(b) and memory proportional to maxDepth/8
// bytes (none beyond its own frame for maxDepth up to 256); it allocates
// nothing unless it fails or maxDepth is larger.
func Check(b []byte, maxDepth int) error {
	var small [stackWords]uint64
	stack := small[:]
	if maxDepth > stackWords*64 {
		stack = make([]uint64, (maxDepth+63)/64)
	}
	maxDepth = max(maxDepth, 0)
	depth := 0 // open arrays and objects; bit depth-1 of stack is 1 for an object
	i := skipSpace(b, 0)
	for {
		// A value is expected at i.
		if i >= len(b) {
			return syntaxAt(i)
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth == maxDepth {
				return &Error{Err: ErrDepth, Offset: i, Depth: maxDepth}
			}
			w, bit := depth/64, uint64(1)<<(depth%64)
			if c == '{' {
				stack[w] |= bit
			} else {
				stack[w] &^= bit
			}
			depth++
			i = skipSpace(b, i+1)
			if i < len(b) && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
				depth--
				i++
				break // an empty container is a complete value
			}
			if c == '{' {
				var ok bool
				if i, ok = key(b, i); !ok {
					return syntaxAt(i)
				}
			}
			continue // its first value
		case '"':
			var ok bool
			if i, ok = str(b, i+1); !ok {
				return syntaxAt(i)
			}
		case 't':
			if !lit(b, i, "true") {
				return syntaxAt(i)
			}
			i += 4
		case 'f':
			if !lit(b, i, "false") {
				return syntaxAt(i)
			}
			i += 5
		case 'n':
			if !lit(b, i, "null") {
				return syntaxAt(i)
			}
			i += 4
		default:
			var ok bool
			if i, ok = number(b, i); !ok {
				return syntaxAt(i)
			}
		}
		// A value ended at i: close containers until one goes on with a
		// comma, or the input ends.
		for {
			i = skipSpace(b, i)
			if depth == 0 {
				if i != len(b) {
					return syntaxAt(i)
				}
				return nil
			}
			if i >= len(b) {
				return syntaxAt(i)
			}
			obj := stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			c := b[i]
			if c == ',' {
				i = skipSpace(b, i+1)
				if obj {
					var ok bool
					if i, ok = key(b, i); !ok {
						return syntaxAt(i)
					}
				}
				break
			}
			if obj && c != '}' || !obj && c != ']' {
				return syntaxAt(i)
			}
			depth--
			i++
		}
	}
}

func syntaxAt(i int) error { return &Error{Err: ErrSyntax, Offset: i} }

// skipSpace returns the index of the first non-whitespace byte at or after
// i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// key reads an object key and its colon at i (after whitespace) and
// returns the index after the colon and following whitespace.
func key(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := str(b, i+1)
	if !ok {
		return i, false
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return skipSpace(b, i+1), true
}

// str reads the rest of a string whose opening quote is before i and
// returns the index after the closing quote.
func str(b []byte, i int) (int, bool) {
	for i < len(b) {
		switch strClass[b[i]] {
		case 0:
			i++
		case 2:
			return i + 1, true
		case 3:
			if i+1 >= len(b) {
				return len(b), false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default:
			return i, false
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// lit reports whether b holds the literal s at i.
func lit(b []byte, i int, s string) bool {
	return len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

// number reads a number at i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// and returns the index after it.
func number(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
