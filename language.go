package eventstore

import (
	"encoding/json"
)

// The projection functions, for Function.Name; the table of
// docs/projections.md says what each takes.
const (
	FuncSet      = "set"      // assign the input to the target
	FuncUnset    = "unset"    // remove the target field
	FuncMerge    = "merge"    // merge an object into the target
	FuncClear    = "clear"    // reset the target to its type's empty value (the instance to {})
	FuncDelete   = "delete"   // delete the instance
	FuncAppend   = "append"   // append the input to the target array
	FuncPush     = "push"     // the same as append
	FuncPrepend  = "prepend"  // insert the input at the front of the target array
	FuncRemove   = "remove"   // remove the elements TargetFilter selects, or the target key
	FuncAdd      = "add"      // add the input number to the target, which starts at 0
	FuncSubtract = "subtract" // subtract the input number from the target
	FuncInc      = "inc"      // add one to the target
	FuncDec      = "dec"      // subtract one from the target
	FuncSetRef   = "setref"   // mark the target's value as the instance's Reference
	FuncClearRef = "clearref" // clear the instance's Reference
)

// Literal returns v as JSON, for Function.RawData: Literal("placed") is
// the JSON string "placed", quotes included. A value encoding/json cannot
// encode gives text that Put and Create refuse, naming the field.
func Literal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("Literal: " + err.Error())
	}
	return b
}
