package lang

import (
	"fmt"
	"strings"

	"github.com/eventkit-go/eventstore/internal/decimal"
)

// Limits of a filter expression.
const (
	maxFilterLen   = 1024
	maxFilterNodes = 64
)

// filter is a compiled filter expression such as
// @.todoId == $.event.todoId && @.done != true.
type filter struct {
	root *fnode
	text string
}

type fkind uint8

const (
	fOr fkind = iota
	fAnd
	fNot
	fCmp   // left op right
	fTruth // a lone operand: true when it exists and is not false or null
)

// fnode is a node of a filter's syntax tree.
type fnode struct {
	kind        fkind
	op          string
	left, right *fnode
	a, b        operand
}

// operand is a literal or a path read at evaluation time.
type operand struct {
	path    *Selector // nil for a literal
	literal any
}

// filterScope is what a filter reads: @ (the element being tested, or
// the event data), $.event and $.metadata.
type filterScope struct {
	at   any
	ev   *eventScope
	inst *Instance
}

// parseFilter compiles a filter expression. It accepts the bare form
// "@.a == 1" and the wrapped form "[?(@.a == 1)]".
func parseFilter(s string) (filter, error) {
	if len(s) > maxFilterLen {
		return filter{}, fmt.Errorf("is longer than %d bytes", maxFilterLen)
	}
	text := strings.TrimSpace(s)
	if inner, ok := strings.CutPrefix(text, "[?("); ok {
		inner, ok = strings.CutSuffix(inner, ")]")
		if !ok {
			return filter{}, fmt.Errorf("a filter starting with [?( must end with )]")
		}
		text = inner
	}
	p := &fparser{src: text}
	p.lex()
	if p.err != nil {
		return filter{}, p.err
	}
	if len(p.toks) == 0 {
		return filter{}, fmt.Errorf("is empty")
	}
	n := p.or()
	if p.err == nil && p.pos < len(p.toks) {
		p.fail("unexpected %q", p.toks[p.pos].text)
	}
	if p.err != nil {
		return filter{}, p.err
	}
	return filter{root: n, text: s}, nil
}

type ftoken struct {
	kind byte // 'o' operator, '(' ')', 'v' operand text, 's' string literal
	text string
}

type fparser struct {
	src   string
	toks  []ftoken
	pos   int
	nodes int
	err   error
}

func (p *fparser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
}

func (p *fparser) lex() {
	s := p.src
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')':
			p.toks = append(p.toks, ftoken{kind: c, text: s[i : i+1]})
			i++
		case strings.HasPrefix(s[i:], "&&") || strings.HasPrefix(s[i:], "||") ||
			strings.HasPrefix(s[i:], "==") || strings.HasPrefix(s[i:], "!=") ||
			strings.HasPrefix(s[i:], "<=") || strings.HasPrefix(s[i:], ">="):
			p.toks = append(p.toks, ftoken{kind: 'o', text: s[i : i+2]})
			i += 2
		case c == '<' || c == '>' || c == '!':
			p.toks = append(p.toks, ftoken{kind: 'o', text: s[i : i+1]})
			i++
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				p.fail("has an unterminated string")
				return
			}
			p.toks = append(p.toks, ftoken{kind: 's', text: s[i+1 : i+1+end]})
			i += end + 2
		default:
			j := i
			depth := 0
			for j < len(s) {
				d := s[j]
				if d == '[' {
					depth++
				} else if d == ']' {
					depth--
				} else if depth == 0 && strings.IndexByte(" \t\r\n()&|=!<>", d) >= 0 {
					break
				} else if depth > 0 && (d == '\'' || d == '"') {
					if end := strings.IndexByte(s[j+1:], d); end >= 0 {
						j += end + 1
					}
				}
				j++
			}
			if j == i {
				p.fail("unexpected %q", s[i:i+1])
				return
			}
			p.toks = append(p.toks, ftoken{kind: 'v', text: s[i:j]})
			i = j
		}
		if len(p.toks) > 4*maxFilterNodes {
			p.fail("has more than %d parts", maxFilterNodes)
			return
		}
	}
}

func (p *fparser) peek() ftoken {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ftoken{}
}

func (p *fparser) node(n fnode) *fnode {
	p.nodes++
	if p.nodes > maxFilterNodes {
		p.fail("has more than %d parts", maxFilterNodes)
	}
	return &n
}

func (p *fparser) or() *fnode {
	n := p.and()
	for p.err == nil && p.peek().kind == 'o' && p.peek().text == "||" {
		p.pos++
		n = p.node(fnode{kind: fOr, left: n, right: p.and()})
	}
	return n
}

func (p *fparser) and() *fnode {
	n := p.unary()
	for p.err == nil && p.peek().kind == 'o' && p.peek().text == "&&" {
		p.pos++
		n = p.node(fnode{kind: fAnd, left: n, right: p.unary()})
	}
	return n
}

func (p *fparser) unary() *fnode {
	if p.err != nil {
		return nil
	}
	t := p.peek()
	switch {
	case t.kind == 'o' && t.text == "!":
		p.pos++
		return p.node(fnode{kind: fNot, left: p.unary()})
	case t.kind == '(':
		p.pos++
		n := p.or()
		if p.peek().kind != ')' {
			p.fail("a '(' is not closed")
			return nil
		}
		p.pos++
		return n
	}
	a := p.operand()
	if p.err != nil {
		return nil
	}
	if t := p.peek(); t.kind == 'o' && t.text != "&&" && t.text != "||" && t.text != "!" {
		p.pos++
		b := p.operand()
		return p.node(fnode{kind: fCmp, op: t.text, a: a, b: b})
	}
	return p.node(fnode{kind: fTruth, a: a})
}

func (p *fparser) operand() operand {
	if p.pos >= len(p.toks) {
		p.fail("ends where a value is expected")
		return operand{}
	}
	t := p.toks[p.pos]
	p.pos++
	switch t.kind {
	case 's':
		return operand{literal: t.text}
	case 'v':
	default:
		p.fail("unexpected %q where a value is expected", t.text)
		return operand{}
	}
	switch t.text {
	case "true":
		return operand{literal: true}
	case "false":
		return operand{literal: false}
	case "null":
		return operand{literal: nil}
	}
	if c := t.text[0]; c == '-' || (c >= '0' && c <= '9') {
		if _, err := decimal.Parse(t.text); err != nil {
			p.fail("%q is not a number", clip(t.text))
			return operand{}
		}
		return operand{literal: number(t.text)}
	}
	sel, err := parseSelector(t.text, "@", eventRoot, metadataRoot)
	if err != nil {
		p.fail("%q: %v", clip(t.text), err)
		return operand{}
	}
	if sel.filterAt >= 0 {
		p.fail("%q: a path in a filter cannot hold [?]", clip(t.text))
		return operand{}
	}
	if err := checkMetadata(sel); err != nil {
		p.fail("%v", err)
		return operand{}
	}
	return operand{path: &sel}
}

// match evaluates the filter in scope.
func (f filter) match(sc *filterScope) bool {
	return f.root.eval(sc)
}

func (n *fnode) eval(sc *filterScope) bool {
	switch n.kind {
	case fOr:
		return n.left.eval(sc) || n.right.eval(sc)
	case fAnd:
		return n.left.eval(sc) && n.right.eval(sc)
	case fNot:
		return !n.left.eval(sc)
	case fTruth:
		v, ok := n.a.value(sc)
		return ok && v != nil && v != false
	}
	a, aok := n.a.value(sc)
	b, bok := n.b.value(sc)
	if !aok || !bok {
		// A missing field equals nothing and differs from everything.
		return n.op == "!=" && aok != bok
	}
	return compare(n.op, a, b)
}

func (o operand) value(sc *filterScope) (any, bool) {
	if o.path == nil {
		return o.literal, true
	}
	switch o.path.root {
	case "@":
		return walk(sc.at, o.path.steps)
	case eventRoot:
		return sc.ev.read(o.path)
	}
	return sc.ev.metadata(o.path, sc.inst)
}

// walk follows steps from v in a tree value.
func walk(v any, steps []step) (any, bool) {
	for _, st := range steps {
		switch st.kind {
		case stepKey:
			o, ok := v.(*object)
			if !ok {
				return nil, false
			}
			if v, ok = o.get(st.key); !ok {
				return nil, false
			}
		case stepIndex:
			a, ok := v.(*array)
			if !ok || st.index >= len(a.items) {
				return nil, false
			}
			v = a.items[st.index]
		default:
			return nil, false
		}
	}
	return v, true
}

// compare applies a comparison operator. Numbers, and strings holding
// numbers, compare as exact decimals when either side is a number;
// strings compare by their bytes; booleans and null only for equality.
func compare(op string, a, b any) bool {
	if c, ok := compareNumbers(a, b); ok {
		return cmpResult(op, c)
	}
	as, aok := a.(string)
	bs, bok := b.(string)
	if aok && bok {
		return cmpResult(op, strings.Compare(as, bs))
	}
	switch op {
	case "==":
		return scalarEqual(a, b)
	case "!=":
		return !scalarEqual(a, b)
	}
	return false
}

func scalarEqual(a, b any) bool {
	switch a.(type) {
	case *object, *array:
		return false
	}
	switch b.(type) {
	case *object, *array:
		return false
	}
	return a == b
}

func compareNumbers(a, b any) (int, bool) {
	_, an := a.(number)
	_, bn := b.(number)
	if !an && !bn {
		return 0, false
	}
	x, ok1 := toDecimal(a)
	y, ok2 := toDecimal(b)
	if !ok1 || !ok2 {
		return 0, false
	}
	return x.Rat().Cmp(y.Rat()), true
}

func toDecimal(v any) (decimal.Dec, bool) {
	var s string
	switch t := v.(type) {
	case number:
		s = string(t)
	case string:
		s = t
	default:
		return decimal.Dec{}, false
	}
	d, err := decimal.Parse(s)
	return d, err == nil
}

func cmpResult(op string, c int) bool {
	switch op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return false
}
