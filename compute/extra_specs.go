package compute

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// mvExtraSpecValidation is the microversion from which Nova checks
// extra specs it knows (nova/api/validation/extra_specs/validators.py).
const mvExtraSpecValidation = 86

// extraSpecValidator is one of Nova's ExtraSpecValidator dataclasses, as
// extra_specs_gen.go lists them: the name (with {param} placeholders),
// the regex the placeholders expand to, and the value's rule.
type extraSpecValidator struct {
	name, nameRegex string
	kind            specKind
	valueRegex      string
	enum            []string
	min, max        *int

	nameRE, valueRE *regexp.Regexp
}

type specKind int

const (
	specStr specKind = iota
	specInt
	specBool
)

func intPtr(i int) *int { return &i }

// fullmatch is re.fullmatch's pattern in Go's syntax. Python's \d and \s
// also take non-ASCII digits and spaces, Go's only ASCII ones.
func fullmatch(p string) *regexp.Regexp { return regexp.MustCompile(`^(?:` + p + `)\z`) }

// specRegistry compiles the generated tables once, on first use.
var specRegistry = sync.OnceValues(func() (map[string]*extraSpecValidator, []*regexp.Regexp) {
	byName := make(map[string]*extraSpecValidator, len(extraSpecValidators))
	for _, v := range extraSpecValidators {
		v.nameRE = fullmatch(v.nameRegex)
		if v.valueRegex != "" {
			v.valueRE = fullmatch(v.valueRegex)
		}
		byName[v.name] = v
	}
	ns := make([]*regexp.Regexp, len(extraSpecNamespaces))
	for i, n := range extraSpecNamespaces {
		ns[i] = fullmatch(n)
	}
	return byName, ns
})

// validateExtraSpec is validators.validate: a spec Nova knows must have a
// valid value; an unknown name is refused only in a namespace Nova
// claims. The error is Nova's ValidationError message (a 400).
func validateExtraSpec(name, value string) *fault {
	byName, namespaces := specRegistry()
	if v, ok := byName[name]; ok {
		return v.validate(name, value)
	}
	for _, v := range extraSpecValidators {
		if v.nameRE.MatchString(name) {
			return v.validate(name, value)
		}
	}
	ns, _, ok := strings.Cut(name, ":")
	if !ok {
		return nil
	}
	for _, re := range namespaces {
		if re.MatchString(ns) {
			return errBadRequest("Validation failed; extra spec '" + name + "' does not appear to be a valid extra spec.")
		}
	}
	return nil
}

// validate is ExtraSpecValidator.validate.
func (v *extraSpecValidator) validate(name, value string) *fault {
	if !v.nameRE.MatchString(name) {
		return errBadRequest("Validation failed; expected a name of format '" + v.name + "' but got '" + name + "'.")
	}
	switch v.kind {
	case specInt:
		n, ok := pyInt(value)
		if !ok {
			return errBadRequest("Validation failed; '" + value + "' is not a valid integer value.")
		}
		if v.max != nil && n.Cmp(bigInt(*v.max)) > 0 {
			return errBadRequest("Validation failed; '" + n.String() + "' is greater than the max value of '" + strconv.Itoa(*v.max) + "'.")
		}
		if v.min != nil && n.Cmp(bigInt(*v.min)) < 0 {
			return errBadRequest("Validation failed; '" + n.String() + "' is less than the min value of '" + strconv.Itoa(*v.min) + "'.")
		}
	case specBool:
		if _, ok := boolFromString(value); !ok {
			return errBadRequest("Validation failed; '" + value + "' is not a valid boolean-like value.")
		}
	default:
		switch {
		case v.valueRE != nil:
			if !v.valueRE.MatchString(value) {
				return errBadRequest("Validation failed; '" + value + "' is not of the format '" + v.valueRegex + "'.")
			}
		case v.enum != nil:
			for _, e := range v.enum {
				if e == value {
					return nil
				}
			}
			return errBadRequest("Validation failed; '" + value + "' is not one of: " + strings.Join(v.enum, ", ") + ".")
		}
	}
	return nil
}
