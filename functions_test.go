package eventstore

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/eventkit-go/eventstore/internal/lang"
)

// The functions' effects are tested in package lang; these tests check
// what this package adds: the fields compile names, and the Func
// constants.

func TestCompileRefusesBadFunctions(t *testing.T) {
	cases := map[string]Function{
		"handlers[0].functions[0].function":       {Name: "frobnicate", TargetSelector: "$.projection.a"},
		"handlers[0].functions[0].targetSelector": {Name: "inc"},
		"handlers[0].functions[0]":                {Name: "inc", TargetSelector: "$.projection.a", RawData: json.RawMessage(`1`)},
		"handlers[0].functions[0].targetFilter":   {Name: "set", TargetSelector: "$.projection.l[?]", RawData: json.RawMessage(`1`)},
		"handlers[0].functions[0].rawData":        {Name: "add", TargetSelector: "$.projection.a", RawData: json.RawMessage(`"abc"`)},
		"handlers[0].functions[0].eventSelector":  {Name: "set", TargetSelector: "$.projection.a", EventSelector: "$.metadata['no such key']"},
		"handlers[0].functions[0].eventFilter":    {Name: "inc", TargetSelector: "$.projection.a", EventFilter: "@.a == "},
	}
	for field, fn := range cases {
		_, err := compile(Definition{Name: "p", Feed: "f", Handlers: []Handler{{EventType: "E", Functions: []Function{fn}}}})
		ve, ok := err.(*ValidationError)
		if !ok {
			t.Errorf("%+v: got %v, want a ValidationError", fn, err)
			continue
		}
		found := false
		for _, fe := range ve.Fields {
			found = found || fe.Field == field
		}
		if !found {
			t.Errorf("%+v: fields %+v do not name %s", fn, ve.Fields, field)
		}
	}
}

func TestFuncConstantsNameEveryFunction(t *testing.T) {
	consts := []string{FuncSet, FuncUnset, FuncMerge, FuncClear,
		FuncDelete, FuncAppend, FuncPush, FuncPrepend,
		FuncRemove, FuncAdd, FuncSubtract, FuncInc,
		FuncDec, FuncSetRef, FuncClearRef}
	names := lang.FunctionNames()
	slices.Sort(consts)
	slices.Sort(names)
	if !slices.Equal(names, consts) {
		t.Errorf("Func constants %v, functions %v: want one Func constant per function of the language", consts, names)
	}
}
