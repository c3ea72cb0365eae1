package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// A small JSON-schema validator that answers as Placement does. Placement
// validates every body and query string with python-jsonschema
// (jsonschema.validate with a FormatChecker, Draft 2020-12 keywords) and
// puts str(error) into its 400: the message, the keyword that failed, the
// schema path, the failing sub-schema and the instance. Clients and
// Placement's own tests match on those words, so this validator keeps
// jsonschema's keyword order (the schema's own key order), its error
// selection (best_match) and its wording, for the keywords Placement's
// schemas use.

// schemaNode is a JSON-schema object with its keys in written order:
// jsonschema checks keywords, properties and required names in that order.
type schemaNode struct {
	keys []string
	vals map[string]any // *schemaNode, []any, string, json.Number, bool or nil
}

func (n *schemaNode) get(k string) (any, bool) {
	v, ok := n.vals[k]
	return v, ok
}

// mustSchema parses a schema written as JSON, keeping key order.
func mustSchema(src string) *schemaNode {
	dec := json.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		panic(fmt.Sprintf("placement: bad built-in schema: %v", err))
	}
	n, ok := v.(*schemaNode)
	if !ok {
		panic("placement: built-in schema is not an object")
	}
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
			n := &schemaNode{vals: map[string]any{}}
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

// schemaError is one jsonschema ValidationError.
type schemaError struct {
	msg        string
	validator  string
	path       []any // instance path: string keys and int indexes
	schemaPath []any
	schema     *schemaNode
	instance   any
	context    []*schemaError
}

// String is str(ValidationError).
func (e *schemaError) String() string {
	sp := e.schemaPath
	if len(sp) > 0 {
		sp = sp[:len(sp)-1]
	}
	return e.msg + "\n\nFailed validating " + pyRepr(e.validator) + " in " + formatIndex("schema", sp) +
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
		parts[i] = pyRepr(x)
	}
	return container + "[" + strings.Join(parts, "][") + "]"
}

var schemaRegexps = map[string]*regexp.Regexp{}

func schemaRegexp(p string) *regexp.Regexp {
	// Schemas are built-in and few; compile once, guarded by init-time
	// warm-up (warmSchemaRegexps) so no lock is needed at request time.
	if re, ok := schemaRegexps[p]; ok {
		return re
	}
	return regexp.MustCompile(p)
}

// warmSchemaRegexps compiles every pattern a schema holds.
func warmSchemaRegexps(n *schemaNode) {
	for _, k := range n.keys {
		v := n.vals[k]
		switch k {
		case "pattern":
			if p, ok := v.(string); ok {
				schemaRegexps[p] = regexp.MustCompile(p)
			}
		case "patternProperties":
			pp := v.(*schemaNode)
			joined := strings.Join(pp.keys, "|")
			schemaRegexps[joined] = regexp.MustCompile(joined)
			for _, p := range pp.keys {
				schemaRegexps[p] = regexp.MustCompile(p)
			}
		}
		switch x := v.(type) {
		case *schemaNode:
			warmSchemaRegexps(x)
		case []any:
			for _, e := range x {
				if sn, ok := e.(*schemaNode); ok {
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
	order map[string][]string
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

// iterErrors is Validator.iter_errors: every error of inst against sch.
func iterErrors(inst any, sch *schemaNode) []*schemaError {
	return (&validator{}).iter(inst, sch, nil)
}

func (vd *validator) iter(inst any, sch *schemaNode, path []any) []*schemaError {
	var out []*schemaError
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

func (vd *validator) descend(inst any, sch *schemaNode, at []any, path any, schemaPath any) []*schemaError {
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

func newErr(format string, args ...any) *schemaError {
	return &schemaError{msg: fmt.Sprintf(format, args...)}
}

func (vd *validator) keyword(k string, v any, inst any, sch *schemaNode, at []any) []*schemaError {
	switch k {
	case "type":
		var types []string
		switch t := v.(type) {
		case string:
			types = []string{t}
		case []any:
			for _, x := range t {
				types = append(types, x.(string))
			}
		}
		for _, t := range types {
			if isType(inst, t) {
				return nil
			}
		}
		reprs := make([]string, len(types))
		for i, t := range types {
			reprs[i] = pyRepr(t)
		}
		return []*schemaError{newErr("%s is not of type %s", pyRepr(inst), strings.Join(reprs, ", "))}
	case "properties":
		obj, ok := inst.(map[string]any)
		if !ok {
			return nil
		}
		props := v.(*schemaNode)
		var out []*schemaError
		for _, p := range props.keys {
			if iv, ok := obj[p]; ok {
				out = append(out, vd.descend(iv, props.vals[p].(*schemaNode), at, p, p)...)
			}
		}
		return out
	case "patternProperties":
		obj, ok := inst.(map[string]any)
		if !ok {
			return nil
		}
		pp := v.(*schemaNode)
		var out []*schemaError
		for _, p := range pp.keys {
			re := schemaRegexp(p)
			for _, ik := range vd.keys(obj, at) {
				if re.MatchString(ik) {
					out = append(out, vd.descend(obj[ik], pp.vals[p].(*schemaNode), at, ik, p)...)
				}
			}
		}
		return out
	case "additionalProperties":
		obj, ok := inst.(map[string]any)
		if !ok {
			return nil
		}
		var extras []string
		var props *schemaNode
		if pv, ok := sch.get("properties"); ok {
			props = pv.(*schemaNode)
		}
		var patterns *regexp.Regexp
		var patternNames []string
		if pv, ok := sch.get("patternProperties"); ok {
			pp := pv.(*schemaNode)
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
		if sub, ok := v.(*schemaNode); ok {
			var out []*schemaError
			for _, ex := range extras {
				out = append(out, vd.descend(obj[ex], sub, at, ex, nil)...)
			}
			return out
		}
		if b, ok := v.(bool); ok && !b && len(extras) > 0 {
			// jsonschema (4.10, Placement 8.0's) names the extras
			// sorted, not in the instance's order.
			sort.Strings(extras)
			_, hasPatterns := sch.get("patternProperties")
			reprs := make([]string, len(extras))
			for i, x := range extras {
				reprs[i] = pyRepr(x)
			}
			if hasPatterns {
				verb := "does"
				if len(extras) > 1 {
					verb = "do"
				}
				sort.Strings(patternNames)
				pr := make([]string, len(patternNames))
				for i, x := range patternNames {
					pr[i] = pyRepr(x)
				}
				return []*schemaError{newErr("%s %s not match any of the regexes: %s", strings.Join(reprs, ", "), verb, strings.Join(pr, ", "))}
			}
			verb := "was"
			if len(extras) > 1 {
				verb = "were"
			}
			return []*schemaError{newErr("Additional properties are not allowed (%s %s unexpected)", strings.Join(reprs, ", "), verb)}
		}
		return nil
	case "required":
		obj, ok := inst.(map[string]any)
		if !ok {
			return nil
		}
		var out []*schemaError
		for _, r := range v.([]any) {
			if _, ok := obj[r.(string)]; !ok {
				out = append(out, newErr("%s is a required property", pyRepr(r)))
			}
		}
		return out
	case "minProperties", "maxProperties":
		obj, ok := inst.(map[string]any)
		if !ok {
			return nil
		}
		lim, _ := v.(json.Number).Int64()
		if k == "minProperties" && int64(len(obj)) < lim {
			return []*schemaError{newErr("%s does not have enough properties", pyRepr(inst))}
		}
		if k == "maxProperties" && int64(len(obj)) > lim {
			return []*schemaError{newErr("%s has too many properties", pyRepr(inst))}
		}
	case "items":
		arr, ok := inst.([]any)
		if !ok {
			return nil
		}
		sub, ok := v.(*schemaNode)
		if !ok {
			return nil
		}
		var out []*schemaError
		for i, x := range arr {
			out = append(out, vd.descend(x, sub, at, i, nil)...)
		}
		return out
	case "minItems", "maxItems":
		arr, ok := inst.([]any)
		if !ok {
			return nil
		}
		lim, _ := v.(json.Number).Int64()
		if k == "minItems" && int64(len(arr)) < lim {
			return []*schemaError{newErr("%s is too short", pyRepr(inst))}
		}
		if k == "maxItems" && int64(len(arr)) > lim {
			return []*schemaError{newErr("%s is too long", pyRepr(inst))}
		}
	case "uniqueItems":
		arr, ok := inst.([]any)
		if !ok || v != true {
			return nil
		}
		for i := range arr {
			for j := i + 1; j < len(arr); j++ {
				if jsonEqual(arr[i], arr[j]) {
					return []*schemaError{newErr("%s has non-unique elements", pyRepr(inst))}
				}
			}
		}
	case "minLength", "maxLength":
		s, ok := inst.(string)
		if !ok {
			return nil
		}
		lim, _ := v.(json.Number).Int64()
		n := int64(utf8.RuneCountInString(s))
		if k == "minLength" && n < lim {
			return []*schemaError{newErr("%s is too short", pyRepr(inst))}
		}
		if k == "maxLength" && n > lim {
			return []*schemaError{newErr("%s is too long", pyRepr(inst))}
		}
	case "pattern":
		s, ok := inst.(string)
		if !ok {
			return nil
		}
		p := v.(string)
		if !schemaRegexp(p).MatchString(s) {
			return []*schemaError{newErr("%s does not match %s", pyRepr(inst), pyRepr(p))}
		}
	case "format":
		// Placement's FormatChecker knows "uuid" (oslo's is_uuid_like),
		// which fails every non-string too.
		if v == "uuid" {
			s, ok := inst.(string)
			if !ok || !isUUIDLike(s) {
				return []*schemaError{newErr("%s is not a %s", pyRepr(inst), pyRepr(v))}
			}
		}
	case "minimum", "maximum":
		n, ok := inst.(json.Number)
		if !ok {
			return nil
		}
		lim := v.(json.Number)
		c := compareNumbers(n, lim)
		if k == "minimum" && c < 0 {
			return []*schemaError{newErr("%s is less than the minimum of %s", pyRepr(inst), pyRepr(lim))}
		}
		if k == "maximum" && c > 0 {
			return []*schemaError{newErr("%s is greater than the maximum of %s", pyRepr(inst), pyRepr(lim))}
		}
	case "enum":
		for _, e := range v.([]any) {
			if jsonEqual(inst, e) {
				return nil
			}
		}
		return []*schemaError{newErr("%s is not one of %s", pyRepr(inst), pyRepr(v))}
	case "anyOf":
		var all []*schemaError
		for i, sub := range v.([]any) {
			errs := vd.descend(inst, sub.(*schemaNode), at, nil, i)
			if len(errs) == 0 {
				return nil
			}
			all = append(all, errs...)
		}
		return []*schemaError{{msg: fmt.Sprintf("%s is not valid under any of the given schemas", pyRepr(inst)), context: all}}
	}
	return nil
}

// relevance is jsonschema's by_relevance key: shallower errors first,
// anyOf/oneOf weakest, then errors whose instance is of the wrong type.
func relevance(e *schemaError) [3]int {
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
func bestMatch(errs []*schemaError) *schemaError {
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
		ctx := append([]*schemaError(nil), best.context...)
		sort.SliceStable(ctx, func(i, j int) bool { return lessRel(relevance(ctx[i]), relevance(ctx[j])) })
		if len(ctx) >= 2 && relevance(ctx[0]) == relevance(ctx[1]) {
			return best
		}
		best = ctx[0]
	}
	return best
}

// validateBody is util.extract_json's validation: a 400 with
// "JSON does not validate: <str(error)>". It walks objects in the order
// the body gave their keys (readJSON records it).
func (c *reqCtx) validateBody(v any, sch *schemaNode) error {
	vd := &validator{order: c.bodyOrder}
	if e := bestMatch(vd.iter(v, sch, nil)); e != nil {
		return errBadRequest("JSON does not validate: %s", e.String())
	}
	return nil
}

// validateQuery is util.validate_query_params: the query string as a dict
// (the last value of a repeated key, keys in query order) against the
// schema.
func validateQuery(c *reqCtx, sch *schemaNode) error {
	q := c.query()
	obj := make(map[string]any, len(q))
	for k, vs := range q {
		obj[k] = vs[len(vs)-1]
	}
	vd := &validator{order: map[string][]string{pathKey(nil): orderedQueryKeys(c.r.URL.RawQuery)}}
	if e := bestMatch(vd.iter(obj, sch, nil)); e != nil {
		return errBadRequest("Invalid query string parameters: %s", e.String())
	}
	return nil
}

// jsonKeyOrder records the key order of every object in a JSON text, by
// pathKey. It runs on text already decoded once, so errors cannot occur;
// on one it gives up (sorted order stands in).
func jsonKeyOrder(body []byte) map[string][]string {
	order := map[string][]string{}
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
func (n *schemaNode) MarshalJSON() ([]byte, error) {
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
