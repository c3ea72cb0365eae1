package pycompat

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// The keywords Placement's schemas use, one function each, named as in
// python-jsonschema's _keywords.py (_validators.py in 4.10, the version
// Placement 8.0 runs), so a diff against upstream reads one keyword at a
// time. (Upstream's minimum/maximum, minItems/maxItems, minLength/
// maxLength and minProperties/maxProperties are separate functions too.) Each takes the validator, the keyword's value in the
// schema, the instance, the schema holding the keyword and the instance's
// path (for the client's key order), and returns the errors upstream
// yields. Keywords not in the table are ignored, as jsonschema ignores
// unknown ones.

// keywordFunc checks one keyword; see above.
type keywordFunc func(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError

// keywords is the validator's table, keyword name to check. It is filled
// in init: the checks that descend call back into the validator, which
// reads the table.
var keywords map[string]keywordFunc

func init() {
	keywords = map[string]keywordFunc{
		"patternProperties":    patternProperties,
		"additionalProperties": additionalProperties,
		"items":                items,
		"minimum":              minimum,
		"maximum":              maximum,
		"minItems":             minItems,
		"uniqueItems":          uniqueItems,
		"pattern":              pattern,
		"format":               format,
		"minLength":            minLength,
		"enum":                 enum,
		"type":                 typeKeyword,
		"properties":           properties,
		"required":             required,
		"minProperties":        minProperties,
		"maxProperties":        maxProperties,
		"anyOf":                anyOf,
		"maxItems":             maxItems,
		"maxLength":            maxLength,
	}
}

func patternProperties(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	obj, ok := instance.(map[string]any)
	if !ok {
		return nil
	}
	pp := value.(*Schema)
	var out []*ValidationError
	for _, p := range pp.keys {
		re := schemaRegexp(p)
		for _, ik := range vd.keys(obj, at) {
			if re.MatchString(ik) {
				out = append(out, vd.descend(obj[ik], pp.vals[p].(*Schema), at, ik, p)...)
			}
		}
	}
	return out
}

func additionalProperties(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	obj, ok := instance.(map[string]any)
	if !ok {
		return nil
	}
	var extras []string
	var props *Schema
	if pv, ok := schema.get("properties"); ok {
		props = pv.(*Schema)
	}
	var patterns *regexp.Regexp
	var patternNames []string
	if pv, ok := schema.get("patternProperties"); ok {
		pp := pv.(*Schema)
		patternNames = append(patternNames, pp.keys...)
		if len(pp.keys) > 0 {
			patterns = schemaRegexp(strings.Join(pp.keys, "|"))
		}
	}
	for _, ik := range vd.keys(obj, at) {
		if props != nil {
			if _, ok := props.vals[ik]; ok {
				continue
			}
		}
		if patterns != nil && patterns.MatchString(ik) {
			continue
		}
		extras = append(extras, ik)
	}
	if sub, ok := value.(*Schema); ok {
		var out []*ValidationError
		for _, ex := range extras {
			out = append(out, vd.descend(obj[ex], sub, at, ex, nil)...)
		}
		return out
	}
	if b, ok := value.(bool); ok && !b && len(extras) > 0 {
		// jsonschema (4.10, Placement 8.0's) names the extras
		// sorted, not in the instance's order.
		sort.Strings(extras)
		_, hasPatterns := schema.get("patternProperties")
		reprs := make([]string, len(extras))
		for i, x := range extras {
			reprs[i] = Repr(x)
		}
		if hasPatterns {
			verb := "does"
			if len(extras) > 1 {
				verb = "do"
			}
			sort.Strings(patternNames)
			pr := make([]string, len(patternNames))
			for i, x := range patternNames {
				pr[i] = Repr(x)
			}
			return []*ValidationError{newErr("%s %s not match any of the regexes: %s", strings.Join(reprs, ", "), verb, strings.Join(pr, ", "))}
		}
		verb := "was"
		if len(extras) > 1 {
			verb = "were"
		}
		return []*ValidationError{newErr("Additional properties are not allowed (%s %s unexpected)", strings.Join(reprs, ", "), verb)}
	}
	return nil
}

func items(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	arr, ok := instance.([]any)
	if !ok {
		return nil
	}
	sub, ok := value.(*Schema)
	if !ok {
		return nil
	}
	var out []*ValidationError
	for i, x := range arr {
		out = append(out, vd.descend(x, sub, at, i, nil)...)
	}
	return out
}

func minimum(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	n, ok := instance.(json.Number)
	if !ok {
		return nil
	}
	lim := value.(json.Number)
	if compareNumbers(n, lim) < 0 {
		return []*ValidationError{newErr("%s is less than the minimum of %s", Repr(instance), Repr(lim))}
	}
	return nil
}

func maximum(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	n, ok := instance.(json.Number)
	if !ok {
		return nil
	}
	lim := value.(json.Number)
	if compareNumbers(n, lim) > 0 {
		return []*ValidationError{newErr("%s is greater than the maximum of %s", Repr(instance), Repr(lim))}
	}
	return nil
}

func minItems(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	arr, ok := instance.([]any)
	if !ok {
		return nil
	}
	if lim, _ := value.(json.Number).Int64(); int64(len(arr)) < lim {
		return []*ValidationError{newErr("%s is too short", Repr(instance))}
	}
	return nil
}

func maxItems(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	arr, ok := instance.([]any)
	if !ok {
		return nil
	}
	if lim, _ := value.(json.Number).Int64(); int64(len(arr)) > lim {
		return []*ValidationError{newErr("%s is too long", Repr(instance))}
	}
	return nil
}

func uniqueItems(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	arr, ok := instance.([]any)
	if !ok || value != true {
		return nil
	}
	for i := range arr {
		for j := i + 1; j < len(arr); j++ {
			if jsonEqual(arr[i], arr[j]) {
				return []*ValidationError{newErr("%s has non-unique elements", Repr(instance))}
			}
		}
	}
	return nil
}

func pattern(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	s, ok := instance.(string)
	if !ok {
		return nil
	}
	p := value.(string)
	if !schemaRegexp(p).MatchString(s) {
		return []*ValidationError{newErr("%s does not match %s", Repr(instance), Repr(p))}
	}
	return nil
}

// format: Placement's FormatChecker knows "uuid" (oslo's is_uuid_like),
// which fails every non-string too.
func format(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	if value == "uuid" {
		s, ok := instance.(string)
		if !ok || !IsUUIDLike(s) {
			return []*ValidationError{newErr("%s is not a %s", Repr(instance), Repr(value))}
		}
	}
	return nil
}

func minLength(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	s, ok := instance.(string)
	if !ok {
		return nil
	}
	if lim, _ := value.(json.Number).Int64(); int64(utf8.RuneCountInString(s)) < lim {
		return []*ValidationError{newErr("%s is too short", Repr(instance))}
	}
	return nil
}

func maxLength(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	s, ok := instance.(string)
	if !ok {
		return nil
	}
	if lim, _ := value.(json.Number).Int64(); int64(utf8.RuneCountInString(s)) > lim {
		return []*ValidationError{newErr("%s is too long", Repr(instance))}
	}
	return nil
}

func enum(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	for _, e := range value.([]any) {
		if jsonEqual(instance, e) {
			return nil
		}
	}
	return []*ValidationError{newErr("%s is not one of %s", Repr(instance), Repr(value))}
}

// typeKeyword is upstream's type (a Go keyword here).
func typeKeyword(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	var types []string
	switch t := value.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			types = append(types, x.(string))
		}
	}
	for _, t := range types {
		if isType(instance, t) {
			return nil
		}
	}
	reprs := make([]string, len(types))
	for i, t := range types {
		reprs[i] = Repr(t)
	}
	return []*ValidationError{newErr("%s is not of type %s", Repr(instance), strings.Join(reprs, ", "))}
}

func properties(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	obj, ok := instance.(map[string]any)
	if !ok {
		return nil
	}
	props := value.(*Schema)
	var out []*ValidationError
	for _, p := range props.keys {
		if iv, ok := obj[p]; ok {
			out = append(out, vd.descend(iv, props.vals[p].(*Schema), at, p, p)...)
		}
	}
	return out
}

func required(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	obj, ok := instance.(map[string]any)
	if !ok {
		return nil
	}
	var out []*ValidationError
	for _, r := range value.([]any) {
		if _, ok := obj[r.(string)]; !ok {
			out = append(out, newErr("%s is a required property", Repr(r)))
		}
	}
	return out
}

func minProperties(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	obj, ok := instance.(map[string]any)
	if !ok {
		return nil
	}
	if lim, _ := value.(json.Number).Int64(); int64(len(obj)) < lim {
		return []*ValidationError{newErr("%s does not have enough properties", Repr(instance))}
	}
	return nil
}

func maxProperties(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	obj, ok := instance.(map[string]any)
	if !ok {
		return nil
	}
	if lim, _ := value.(json.Number).Int64(); int64(len(obj)) > lim {
		return []*ValidationError{newErr("%s has too many properties", Repr(instance))}
	}
	return nil
}

func anyOf(vd *validator, value, instance any, schema *Schema, at []any) []*ValidationError {
	var all []*ValidationError
	for i, sub := range value.([]any) {
		errs := vd.descend(instance, sub.(*Schema), at, nil, i)
		if len(errs) == 0 {
			return nil
		}
		all = append(all, errs...)
	}
	return []*ValidationError{{msg: fmt.Sprintf("%s is not valid under any of the given schemas", Repr(instance)), context: all}}
}
