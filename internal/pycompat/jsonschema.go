package pycompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Schema is a JSON-schema object with its keys in written order:
// jsonschema checks keywords, properties and required names in that order.
type Schema struct {
	keys []string
	vals map[string]any // *Schema, []any, string, json.Number, bool or nil
}

func (n *Schema) get(k string) (any, bool) {
	v, ok := n.vals[k]
	return v, ok
}

// MustSchema parses a schema written as JSON, keeping key order.
func MustSchema(src string) *Schema {
	dec := json.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		panic(fmt.Sprintf("placement: bad built-in schema: %v", err))
	}
	n, ok := v.(*Schema)
	if !ok {
		panic("placement: built-in schema is not an object")
	}
	warmSchemaRegexps(n)
	return n
}

func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &Schema{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := decodeOrdered(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := n.vals[k]; !dup {
					n.keys = append(n.keys, k)
				}
				n.vals[k] = v
			}
			_, err := dec.Token()
			return n, err
		case '[':
			out := []any{}
			for dec.More() {
				v, err := decodeOrdered(dec)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			_, err := dec.Token()
			return out, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil
	}
}

// ValidationError is one jsonschema ValidationError.
type ValidationError struct {
	msg        string
	validator  string
	path       []any // instance path: string keys and int indexes
	schemaPath []any
	schema     *Schema
	instance   any
	context    []*ValidationError
}

// String is str(ValidationError).
func (e *ValidationError) String() string {
	sp := e.schemaPath
	if len(sp) > 0 {
		sp = sp[:len(sp)-1]
	}
	return e.msg + "\n\nFailed validating " + Repr(e.validator) + " in " + formatIndex("schema", sp) +
		":\n    " + strings.ReplaceAll(pformat(e.schema), "\n", "\n    ") +
		"\n\nOn " + formatIndex("instance", e.path) + ":\n    " +
		strings.ReplaceAll(pformat(e.instance), "\n", "\n    ")
}

func formatIndex(container string, idx []any) string {
	if len(idx) == 0 {
		return container
	}
	parts := make([]string, len(idx))
	for i, x := range idx {
		parts[i] = Repr(x)
	}
	return container + "[" + strings.Join(parts, "][") + "]"
}

// schemaRegexps holds the compiled patterns of the schemas, by pattern
// text.
var schemaRegexps sync.Map

func schemaRegexp(p string) *regexp.Regexp {
	if re, ok := schemaRegexps.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	re := regexp.MustCompile(p)
	schemaRegexps.Store(p, re)
	return re
}

// warmSchemaRegexps compiles every pattern a schema holds, so a bad
// pattern fails when the schema is made.
func warmSchemaRegexps(n *Schema) {
	for _, k := range n.keys {
		v := n.vals[k]
		switch k {
		case "pattern":
			if p, ok := v.(string); ok {
				schemaRegexp(p)
			}
		case "patternProperties":
			pp := v.(*Schema)
			joined := strings.Join(pp.keys, "|")
			schemaRegexp(joined)
			for _, p := range pp.keys {
				schemaRegexp(p)
			}
		}
		switch x := v.(type) {
		case *Schema:
			warmSchemaRegexps(x)
		case []any:
			for _, e := range x {
				if sn, ok := e.(*Schema); ok {
					warmSchemaRegexps(sn)
				}
			}
		}
	}
}

func isType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		// Draft 6 on: a float with no fraction (1.0) is an integer.
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, ok := new(big.Float).SetString(n.String())
		return ok && f.IsInt()
	}
	return false
}

func compareNumbers(a, b json.Number) int {
	fa, ok1 := new(big.Float).SetString(a.String())
	fb, ok2 := new(big.Float).SetString(b.String())
	if !ok1 || !ok2 {
		return 0
	}
	return fa.Cmp(fb)
}

// jsonEqual is Python's == on decoded JSON (1 == 1.0).
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && compareNumbers(x, y) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// validator walks one instance. order holds the key order of each object
// of the instance as the client sent it (Python's json keeps it, and it
// decides which of two equal errors jsonschema reports), keyed by
// pathKey; objects it does not know are walked in sorted order.
type validator struct {
	order KeyOrder
}

// pathKey spells an instance path as a map key.
func pathKey(path []any) string {
	var b strings.Builder
	for _, p := range path {
		fmt.Fprintf(&b, "\x00%v", p)
	}
	return b.String()
}

// keys lists obj's keys in the client's order when known.
func (v *validator) keys(obj map[string]any, path []any) []string {
	if ks, ok := v.order[pathKey(path)]; ok && len(ks) == len(obj) {
		return ks
	}
	ks := make([]string, 0, len(obj))
	for k := range obj {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// iter is Validator.iter_errors: every error of inst against sch, at
// instance path path.
func (vd *validator) iter(inst any, sch *Schema, path []any) []*ValidationError {
	var out []*ValidationError
	for _, k := range sch.keys {
		v := sch.vals[k]
		for _, e := range vd.keyword(k, v, inst, sch, path) {
			if e.validator == "" {
				e.validator, e.schema, e.instance = k, sch, inst
			}
			e.schemaPath = append([]any{k}, e.schemaPath...)
			out = append(out, e)
		}
	}
	return out
}

func (vd *validator) descend(inst any, sch *Schema, at []any, path any, schemaPath any) []*ValidationError {
	sub := at
	if path != nil {
		sub = append(append([]any(nil), at...), path)
	}
	errs := vd.iter(inst, sch, sub)
	for _, e := range errs {
		if path != nil {
			e.path = append([]any{path}, e.path...)
		}
		if schemaPath != nil {
			e.schemaPath = append([]any{schemaPath}, e.schemaPath...)
		}
	}
	return errs
}

func newErr(format string, args ...any) *ValidationError {
	return &ValidationError{msg: fmt.Sprintf(format, args...)}
}

// keyword checks one keyword of sch against inst (keywords.go).
func (vd *validator) keyword(k string, v any, inst any, sch *Schema, at []any) []*ValidationError {
	check, ok := keywords[k]
	if !ok {
		return nil
	}
	return check(vd, v, inst, sch, at)
}

// relevance is jsonschema's by_relevance key: shallower errors first,
// anyOf/oneOf weakest, then errors whose instance is of the wrong type.
func relevance(e *ValidationError) [3]int {
	weak := 1
	if e.validator == "anyOf" || e.validator == "oneOf" {
		weak = 0
	}
	mismatch := 1
	if t, ok := e.schema.get("type"); ok {
		switch tt := t.(type) {
		case string:
			if isType(e.instance, tt) {
				mismatch = 0
			}
		case []any:
			for _, x := range tt {
				if isType(e.instance, x.(string)) {
					mismatch = 0
				}
			}
		}
	} else {
		mismatch = 0
	}
	return [3]int{-len(e.path), weak, mismatch}
}

func lessRel(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// bestMatch is jsonschema.exceptions.best_match.
func bestMatch(errs []*ValidationError) *ValidationError {
	if len(errs) == 0 {
		return nil
	}
	best := errs[0]
	for _, e := range errs[1:] {
		if lessRel(relevance(best), relevance(e)) {
			best = e
		}
	}
	for len(best.context) > 0 {
		ctx := append([]*ValidationError(nil), best.context...)
		sort.SliceStable(ctx, func(i, j int) bool { return lessRel(relevance(ctx[i]), relevance(ctx[j])) })
		if len(ctx) >= 2 && relevance(ctx[0]) == relevance(ctx[1]) {
			return best
		}
		best = ctx[0]
	}
	return best
}

// KeyOrder is the key order of each object of an instance as the client
// sent it, keyed by the object's path (see JSONKeyOrder). Python's json
// keeps that order, and it decides which of two equal errors jsonschema
// reports; objects it does not know are walked in sorted key order.
type KeyOrder map[string][]string

// Keys is the key order of the object at path (its keys and list
// indexes from the top), nil when it was not recorded.
func (o KeyOrder) Keys(path ...any) []string { return o[pathKey(path)] }

// TopKeyOrder is the order of the top-level object's keys alone (a query
// string's keys in the order they came).
func TopKeyOrder(keys []string) KeyOrder { return KeyOrder{pathKey(nil): keys} }

// Validate is jsonschema.validate: nil if inst is valid against sch,
// else the error python-jsonschema would raise (best_match of
// iter_errors), whose String is str(error). order may be nil.
func Validate(inst any, sch *Schema, order KeyOrder) *ValidationError {
	vd := &validator{order: order}
	return bestMatch(vd.iter(inst, sch, nil))
}

// JSONKeyOrder records the key order of every object in a JSON text, by
// pathKey. It runs on text already decoded once, so errors cannot occur;
// on one it gives up (sorted order stands in).
func JSONKeyOrder(body []byte) KeyOrder {
	order := KeyOrder{}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var walk func(path []any) error
	walk = func(path []any) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		switch d {
		case '{':
			var keys []string
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k := kt.(string)
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
				if err := walk(append(append([]any(nil), path...), k)); err != nil {
					return err
				}
			}
			order[pathKey(path)] = keys
		case '[':
			for i := 0; dec.More(); i++ {
				if err := walk(append(append([]any(nil), path...), i)); err != nil {
					return err
				}
			}
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	if walk(nil) != nil {
		return nil
	}
	return order
}

// schemaJSON renders a schema back (for tests and debugging).
func (n *Schema) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range n.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(n.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

// IsUUIDLike is oslo's is_uuid_like: any spelling that normalises to a
// canonical uuid (hyphens optional, any case, surrounding braces).
func IsUUIDLike(s string) bool {
	s = strings.TrimPrefix(strings.TrimSuffix(s, "}"), "{")
	s = strings.TrimPrefix(strings.ToLower(s), "urn:uuid:")
	return uuidRe.MatchString(s)
}
