// Package param names every parameter of the schema (results/schema.go) as
// a constant of type ID, so a misspelt name fails the build instead of
// panicking when the lookup runs: Values.Int, Str and Bool take an ID, and
// a string literal does not convert to one.
//
// names.go is generated from the schema by go generate ./results, and a
// test fails while it is stale. An ID lives only inside one build: it is
// never written to a file, a flag or the wire, where parameters go by
// name.
package param

import (
	"fmt"
	"slices"
)

// ID is one parameter of the schema.
type ID int

// String is the parameter's name as plans, --set and --only write it.
func (id ID) String() string {
	if id < 0 || int(id) >= len(names) {
		return fmt.Sprintf("param.ID(%d)", int(id))
	}
	return names[id]
}

// ByName returns the ID of the parameter a plan or a flag names.
func ByName(name string) (ID, bool) {
	i := slices.Index(names[:], name)
	return ID(i), i >= 0
}

// All lists every parameter, in the schema's order.
func All() []ID {
	ids := make([]ID, len(names))
	for i := range ids {
		ids[i] = ID(i)
	}
	return ids
}
