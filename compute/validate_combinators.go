package compute

import (
	"strings"

	"github.com/berth-project/berth/internal/pycompat"
)

// Keywords the aggregates and server group schemas need beyond the
// flavors': oneOf, anyOf, array lengths and tuples, and the az_name and
// name_with_leading_trailing_spaces formats, each worded as
// python-jsonschema 4.10 words it.

// kOneOf is "oneOf": exactly one branch must pass. Failing every branch
// is the keyword's own error, not a branch's (so a bad az_name inside it
// is not an InvalidName answer).
type kOneOf []schema

func (k kOneOf) check(inst any, path []any) *vErr {
	passed := 0
	for _, s := range k {
		if s.check(inst, path) == nil {
			passed++
		}
	}
	switch {
	case passed == 0:
		return failRepr(inst, path, " is not valid under any of the given schemas")
	case passed > 1:
		return failRepr(inst, path, " is valid under each of "+strings.Repeat("<schema>, ", passed-1)+"<schema>")
	}
	return nil
}

// kAnyOf is "anyOf": one branch must pass.
type kAnyOf []schema

func (k kAnyOf) check(inst any, path []any) *vErr {
	for _, s := range k {
		if s.check(inst, path) == nil {
			return nil
		}
	}
	return failRepr(inst, path, " is not valid under any of the given schemas")
}

// kMinItems and kMaxItems are "minItems" and "maxItems".
type (
	kMinItems int
	kMaxItems int
)

func (k kMinItems) check(inst any, path []any) *vErr {
	if a, ok := inst.([]any); ok && len(a) < int(k) {
		return failRepr(inst, path, " is too short")
	}
	return nil
}

func (k kMaxItems) check(inst any, path []any) *vErr {
	if a, ok := inst.([]any); ok && len(a) > int(k) {
		return failRepr(inst, path, " is too long")
	}
	return nil
}

// kUniqueItems is "uniqueItems": true.
type kUniqueItems struct{}

func (kUniqueItems) check(inst any, path []any) *vErr {
	a, ok := inst.([]any)
	if !ok {
		return nil
	}
	for i := range a {
		for j := i + 1; j < len(a); j++ {
			if pyEqual(a[i], a[j]) {
				return failRepr(inst, path, " has non-unique elements")
			}
		}
	}
	return nil
}

// kTupleItems is "items" as a list: item i checked by schema i.
type kTupleItems []schema

func (k kTupleItems) check(inst any, path []any) *vErr {
	a, ok := inst.([]any)
	if !ok {
		return nil
	}
	for i, v := range a {
		if i >= len(k) {
			break
		}
		if e := k[i].check(v, appendPath(path, i)); e != nil {
			return e
		}
	}
	return nil
}

// kNoAdditionalItems is "additionalItems": false beside a tuple of n.
type kNoAdditionalItems int

func (k kNoAdditionalItems) check(inst any, path []any) *vErr {
	a, ok := inst.([]any)
	if !ok || len(a) <= int(k) {
		return nil
	}
	extras := make([]string, 0, len(a)-int(k))
	for _, v := range a[k:] {
		extras = append(extras, pyRepr(v))
	}
	verb := "was"
	if len(extras) > 1 {
		verb = "were"
	}
	return fail(inst, path, "Additional items are not allowed ("+strings.Join(extras, ", ")+" "+verb+" unexpected)")
}

// kFormatAZName is "format": "az_name", Nova's _validate_az_name: a name
// (valid_name_regex) whose characters are not ':' (the "az:host" syntax
// uses it).
type kFormatAZName struct{}

const azNameReason = "printable characters except :.Can not start or end with whitespace."

func (kFormatAZName) check(inst any, path []any) *vErr {
	s, ok := inst.(string)
	if ok && validName(s) && !strings.Contains(strings.TrimSuffix(s, "\n"), ":") {
		return nil
	}
	return &vErr{msg: "is not a 'az_name'", path: keptPath(path), instance: inst, nameReason: azNameReason}
}

// kFormatNameSpaces is "format": "name_with_leading_trailing_spaces":
// printable characters, at least one of them not a space (Python's "$"
// lets one final newline through).
type kFormatNameSpaces struct{}

const nameSpacesReason = "printable characters with at least one non space character"

func (kFormatNameSpaces) check(inst any, path []any) *vErr {
	if s, ok := inst.(string); ok {
		printable, nonSpace := true, false
		for _, r := range strings.TrimSuffix(s, "\n") {
			printable = printable && inRanges(r, novaPrintableRanges)
			nonSpace = nonSpace || inRanges(r, novaPrintableNoWSRanges)
		}
		if printable && nonSpace {
			return nil
		}
	}
	return &vErr{msg: "is not a 'name_with_leading_trailing_spaces'", path: keptPath(path), instance: inst, nameReason: nameSpacesReason}
}

// strReprs is Python's repr of a list of strings: ['a', 'b'].
func strReprs(list []string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = pycompat.StrRepr(s)
	}
	return "[" + strings.Join(out, ", ") + "]"
}
