package compute

import (
	"encoding/json"
	"math"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/berth-project/berth/internal/pycompat"
)

// Nova validates bodies and queries with python-jsonschema's
// Draft4Validator, extended (nova/api/validation/validators.py) so that
// minimum and maximum also read numbers in strings, with a format
// checker for names. Validator.validate raises the FIRST error
// iter_errors finds, which walks each schema's keywords in the order the
// schema's dict lists them, and properties in the order "properties"
// lists them. Nova then words it:
//
//	Invalid input for field/attribute <last path element>. Value: <str(instance)>. <message>
//
// ("query parameters <first path element>" for a query), the bare message
// when the path is empty, or the InvalidName reason for a bad name. So a
// schema here is a list of keywords in Nova's order, and each keyword
// words its error as python-jsonschema 4.10 does.

// schema is one JSON-schema object: its keywords in written order.
type schema []keyword

// keyword checks one keyword against an instance; a failure is returned,
// the first one found.
type keyword interface {
	check(inst any, path []any) *vErr
}

// vErr is one jsonschema ValidationError: message, the instance's path
// and the instance.
type vErr struct {
	msg      string
	path     []any
	instance any
	// reprFirst: the message is the instance's repr, then msg. Spelled
	// only when an answer needs it: most errors are a oneOf or anyOf
	// branch's, dropped (a create's networks "none" fails the list
	// branch), and the repr was most of a valid body's check.
	reprFirst bool
	// nameReason is set for a failed "name" format: Nova answers with
	// its InvalidName message instead.
	nameReason string
}

func (s schema) check(inst any, path []any) *vErr {
	for _, k := range s {
		if e := k.check(inst, path); e != nil {
			return e
		}
	}
	return nil
}

// bodyError is Nova's detail for an invalid body.
func (e *vErr) bodyError() string {
	switch {
	case e.nameReason != "":
		return "An invalid 'name' value was provided. The name must be: " + e.nameReason
	case len(e.path) > 0:
		return "Invalid input for field/attribute " + pyStr(e.path[len(e.path)-1]) + ". Value: " + pyStr(e.instance) + ". " + e.message()
	}
	return e.message()
}

// queryError is Nova's detail for an invalid query.
func (e *vErr) queryError() string {
	if len(e.path) > 0 {
		return "Invalid input for query parameters " + pyStr(e.path[0]) + ". Value: " + pyStr(e.instance) + ". " + e.message()
	}
	return e.message()
}

// message is the ValidationError's message.
func (e *vErr) message() string {
	if e.reprFirst {
		return pyRepr(e.instance) + e.msg
	}
	return e.msg
}

func fail(inst any, path []any, msg string) *vErr {
	return &vErr{msg: msg, path: keptPath(path), instance: inst}
}

// failRepr is fail with the message pyRepr(inst)+rest, spelled when read.
func failRepr(inst any, path []any, rest string) *vErr {
	return &vErr{msg: rest, path: keptPath(path), instance: inst, reprFirst: true}
}

// isType is Draft 4's type check: an integer has no fraction or exponent
// in its literal (1.0 is a number, not an integer), and a boolean is
// neither.
func isType(inst any, t string) bool {
	switch t {
	case "object":
		_, ok := inst.(obj)
		return ok
	case "array":
		_, ok := inst.([]any)
		return ok
	case "string":
		_, ok := inst.(string)
		return ok
	case "boolean":
		_, ok := inst.(bool)
		return ok
	case "null":
		return inst == nil
	case "number":
		_, ok := inst.(json.Number)
		return ok
	case "integer":
		n, ok := inst.(json.Number)
		return ok && isIntLiteral(n)
	}
	return false
}

type kType []string

func (k kType) check(inst any, path []any) *vErr {
	for _, t := range k {
		if isType(inst, t) {
			return nil
		}
	}
	reprs := make([]string, len(k))
	for i, t := range k {
		reprs[i] = pycompat.StrRepr(t)
	}
	return failRepr(inst, path, " is not of type "+strings.Join(reprs, ", "))
}

type kMinLength int

func (k kMinLength) check(inst any, path []any) *vErr {
	if s, ok := inst.(string); ok && utf8.RuneCountInString(s) < int(k) {
		return failRepr(inst, path, " is too short")
	}
	return nil
}

type kMaxLength int

func (k kMaxLength) check(inst any, path []any) *vErr {
	if s, ok := inst.(string); ok && utf8.RuneCountInString(s) > int(k) {
		return failRepr(inst, path, " is too long")
	}
	return nil
}

// kPattern is "pattern" (re.search). src is the Python pattern, for the
// message; match is its Go equivalent, written by hand where Python's
// syntax has no RE2 form (lookarounds) and with Python's "$", which also
// matches before a final newline.
type kPattern struct {
	src   string
	match func(string) bool
	// repr, when set, is repr(src) as Python writes it (for a pattern
	// whose text is generated, not written here).
	repr string
}

func (k kPattern) srcRepr() string {
	if k.repr != "" {
		return k.repr
	}
	return pycompat.StrRepr(k.src)
}

func (k kPattern) check(inst any, path []any) *vErr {
	if s, ok := inst.(string); ok && !k.match(s) {
		return failRepr(inst, path, " does not match "+k.srcRepr())
	}
	return nil
}

// rePattern is a kPattern whose Go regexp matches as Python's does.
func rePattern(src, goRE string) kPattern {
	re := regexp.MustCompile(goRE)
	return kPattern{src: src, match: re.MatchString}
}

// kEnum is "enum"; its values are decoded-JSON values.
type kEnum []any

func (k kEnum) check(inst any, path []any) *vErr {
	for _, v := range k {
		if pyEqual(inst, v) {
			return nil
		}
	}
	return failRepr(inst, path, " is not one of "+pyRepr([]any(k)))
}

// pyEqual is == for the scalars enums hold (True == 1 in Python, but
// Nova's enums put no numbers beside booleans).
func pyEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}

// kMinimum and kMaximum are Nova's _validate_minimum/_validate_maximum:
// the instance goes through _number_from_str (int(), else float(), else
// no check), then Draft 4's check, whose message shows the converted
// number.
type kMinimum struct {
	limit     float64
	text      string // repr of the limit
	exclusive bool
}

func (k kMinimum) check(inst any, path []any) *vErr {
	n, ok := numberFromStr(inst)
	if !ok {
		return nil
	}
	if k.exclusive && n.cmp(k.limit) <= 0 {
		return fail(inst, path, n.repr+" is less than or equal to the minimum of "+k.text)
	}
	if !k.exclusive && n.cmp(k.limit) < 0 {
		return fail(inst, path, n.repr+" is less than the minimum of "+k.text)
	}
	return nil
}

type kMaximum struct {
	limit float64
	text  string
}

func (k kMaximum) check(inst any, path []any) *vErr {
	if n, ok := numberFromStr(inst); ok && n.cmp(k.limit) > 0 {
		return fail(inst, path, n.repr+" is greater than the maximum of "+k.text)
	}
	return nil
}

// pyNum is a Python int or float: its value and its repr.
type pyNum struct {
	i    *big.Int // an int
	f    float64  // a float, when i is nil
	repr string
}

func (n pyNum) cmp(limit float64) int {
	if n.i != nil {
		return new(big.Float).SetInt(n.i).Cmp(big.NewFloat(limit))
	}
	switch {
	case n.f < limit:
		return -1
	case n.f > limit:
		return 1
	}
	return 0
}

// numberFromStr is Nova's _number_from_str: int(instance), else
// float(instance), else nothing. int() of a float truncates it (0.5
// becomes 0, which Nova then compares), and a boolean is 0 or 1.
func numberFromStr(inst any) (pyNum, bool) {
	switch t := inst.(type) {
	case bool:
		if t {
			return pyNum{i: big.NewInt(1), repr: "1"}, true
		}
		return pyNum{i: big.NewInt(0), repr: "0"}, true
	case json.Number:
		if isIntLiteral(t) {
			i, ok := new(big.Int).SetString(string(t), 10)
			return pyNum{i: i, repr: i.String()}, ok
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return pyNum{}, false // int(inf) raises OverflowError; Nova's except misses it
		}
		i, _ := big.NewFloat(math.Trunc(f)).Int(nil)
		return pyNum{i: i, repr: i.String()}, true
	case string:
		if i, ok := pyInt(t); ok {
			return pyNum{i: i, repr: i.String()}, true
		}
		if f, ok := pyFloatOf(t); ok {
			return pyNum{f: f, repr: pycompat.FloatRepr(f)}, true
		}
	}
	return pyNum{}, false
}

func bigInt(i int) *big.Int { return big.NewInt(int64(i)) }

// pyInt is int(s) for a str: surrounding whitespace, a sign, ASCII digits
// with single underscores between them.
func pyInt(s string) (*big.Int, bool) {
	s = strings.TrimFunc(s, unicode.IsSpace)
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 || body == "" || body[0] == '_' || body[len(body)-1] == '_' || strings.Contains(body, "__") {
		return nil, false
	}
	for _, r := range body {
		if (r < '0' || r > '9') && r != '_' {
			return nil, false
		}
	}
	i, ok := new(big.Int).SetString(strings.ReplaceAll(s, "_", ""), 10)
	return i, ok
}

// pyFloatOf is float(s) for a str, closely enough: whitespace around a
// decimal or exponent literal, or inf/nan words.
func pyFloatOf(s string) (float64, bool) {
	s = strings.TrimFunc(s, unicode.IsSpace)
	if strings.Contains(s, "_") || strings.HasPrefix(strings.TrimLeft(s, "+-"), "0x") {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return 0, false
	}
	return f, true
}

// kFormatName is "format": "name", Nova's _validate_name: printable
// characters, not starting or ending with whitespace.
type kFormatName struct{}

const nameReason = "printable characters. Can not start or end with whitespace."

func (kFormatName) check(inst any, path []any) *vErr {
	s, ok := inst.(string)
	if ok && validName(s) {
		return nil
	}
	return &vErr{msg: "is not a 'name'", path: keptPath(path), instance: inst, nameReason: nameReason}
}

// validName is parameter_types.valid_name_regex,
// '^(?![<not printable-or-space>])[<printable>]*(?<![<not printable-or-space>])$'
// with Python's "$", which also matches before a final newline: the
// text up to that newline must be printable in Nova's sense, its last
// character not a space, and the very first character (the newline
// itself, for "\n") not a space or unprintable. The negated classes are
// built over U+0000..U+FFFE only, so a character above never fails the
// lookarounds (only the printable class, which has none of them).
func validName(s string) bool {
	rs := []rune(strings.TrimSuffix(s, "\n"))
	for _, r := range rs {
		if !inRanges(r, novaPrintableRanges) {
			return false
		}
	}
	edge := func(r rune) bool { return r >= 0xFFFF || inRanges(r, novaPrintableNoWSRanges) }
	if s != "" && !edge([]rune(s)[0]) {
		return false
	}
	return len(rs) == 0 || edge(rs[len(rs)-1])
}

// runeRange is an inclusive range of code points.
type runeRange struct{ lo, hi rune }

// inRanges reports whether r is in one of the sorted ranges. The ranges
// (charsets_gen.go) are the ones Nova builds its patterns from, with
// Python's Unicode tables, over U+0000..U+FFFE only.
func inRanges(r rune, ranges []runeRange) bool {
	i := sort.Search(len(ranges), func(i int) bool { return ranges[i].hi >= r })
	return i < len(ranges) && ranges[i].lo <= r
}

// prop is one member of "properties".
type prop struct {
	name string
	s    schema
}

type kProperties []prop

func (k kProperties) check(inst any, path []any) *vErr {
	o, ok := inst.(obj)
	if !ok {
		return nil
	}
	for _, p := range k {
		if v, ok := o.get(p.name); ok {
			if e := p.s.check(v, appendPath(path, p.name)); e != nil {
				return e
			}
		}
	}
	return nil
}

// kPatternProperties is "patternProperties" with one pattern, all Nova's
// schemas here have.
type kPatternProperties struct {
	pattern kPattern
	s       schema
}

func (k kPatternProperties) check(inst any, path []any) *vErr {
	o, ok := inst.(obj)
	if !ok {
		return nil
	}
	for _, m := range o {
		if k.pattern.match(m.k) {
			if e := k.s.check(m.v, appendPath(path, m.k)); e != nil {
				return e
			}
		}
	}
	return nil
}

type kRequired []string

func (k kRequired) check(inst any, path []any) *vErr {
	o, ok := inst.(obj)
	if !ok {
		return nil
	}
	for _, name := range k {
		if _, ok := o.get(name); !ok {
			return fail(inst, path, pycompat.StrRepr(name)+" is a required property")
		}
	}
	return nil
}

// kNoAdditional is "additionalProperties": false. The extras are sorted
// (jsonschema makes a set of them); with patternProperties the message
// names the patterns instead.
type kNoAdditional struct {
	props   []string
	pattern *kPattern
}

func (k kNoAdditional) check(inst any, path []any) *vErr {
	o, ok := inst.(obj)
	if !ok {
		return nil
	}
	var extras []string
	for _, m := range o {
		known := false
		for _, p := range k.props {
			known = known || p == m.k
		}
		if !known && (k.pattern == nil || !k.pattern.match(m.k)) {
			extras = append(extras, m.k)
		}
	}
	if len(extras) == 0 {
		return nil
	}
	sort.Strings(extras)
	reprs := make([]string, len(extras))
	for i, x := range extras {
		reprs[i] = pycompat.StrRepr(x)
	}
	if k.pattern != nil {
		verb := "does"
		if len(extras) > 1 {
			verb = "do"
		}
		return fail(inst, path, strings.Join(reprs, ", ")+" "+verb+" not match any of the regexes: "+k.pattern.srcRepr())
	}
	verb := "was"
	if len(extras) > 1 {
		verb = "were"
	}
	return fail(inst, path, "Additional properties are not allowed ("+strings.Join(reprs, ", ")+" "+verb+" unexpected)")
}

type kMinProperties int

func (k kMinProperties) check(inst any, path []any) *vErr {
	if o, ok := inst.(obj); ok && len(o) < int(k) {
		return failRepr(inst, path, " does not have enough properties")
	}
	return nil
}

type kMaxProperties int

func (k kMaxProperties) check(inst any, path []any) *vErr {
	if o, ok := inst.(obj); ok && len(o) > int(k) {
		return failRepr(inst, path, " has too many properties")
	}
	return nil
}

// kItems is "items" with one schema for every item.
type kItems struct{ s schema }

func (k kItems) check(inst any, path []any) *vErr {
	a, ok := inst.([]any)
	if !ok {
		return nil
	}
	for i, v := range a {
		if e := k.s.check(v, appendPath(path, i)); e != nil {
			return e
		}
	}
	return nil
}

// appendPath is the path of a member or item of the instance at path.
// Siblings share one backing array, each writing the slot after their
// parent's path in turn, so a body's check allocates a path per depth,
// not per member and item: a path is kept only by an error (failAt
// copies it), and the check returns as soon as one is found (a
// combinator's branches, checked one after another, keep none).
func appendPath(path []any, el any) []any {
	if len(path) == cap(path) {
		grown := make([]any, len(path), 2*len(path)+4)
		copy(grown, path)
		path = grown
	}
	return append(path, el)
}

// keptPath is path as an error keeps it: its own copy, as appendPath's
// backing array is written again by the next sibling.
func keptPath(path []any) []any { return slices.Clip(slices.Clone(path)) }
