// Package pycompat speaks Python's words for Placement's HTTP API, and
// lends its repr leaves (FloatRepr, FloatJSON, NumberRepr, NumberJSON,
// StrRepr) to the Nova API (compute), which walks its own ordered JSON
// objects but must spell floats, numbers and strings as CPython does too.
//
// OpenStack Placement is a Python service, and its error answers quote
// Python: a malformed body is reported in CPython json's words (line,
// column and character of the first fault), an invalid one with
// python-jsonschema's str(ValidationError) (message, keyword, schema path,
// the pprint'ed sub-schema and instance), and values are spelled as
// repr() spells them. Clients and Placement's own tests match on those
// words, and so does the conformance suite Berth runs (575 gabbits from
// Placement's tree). No Go library says them: a Go JSON-schema validator
// words its errors its own way, checks keywords in another order and
// picks another "best" error, and encoding/json's syntax errors are not
// CPython's. So this package emulates them by hand, byte for byte:
//
//   - jsonschema.go: a validator for the Draft 2020-12 keywords
//     Placement's schemas use, keeping the schema's key order,
//     python-jsonschema's error selection (best_match) and its str();
//     keywords.go has one function per keyword, in the shape of
//     python-jsonschema's _keywords.py, so a diff against upstream reads
//     one keyword at a time.
//   - pyjson.go: the message CPython's json scanner (Modules/_json.c)
//     gives for text it refuses.
//   - pyrepr.go: repr(), pprint.pformat(width=72), float repr and int(),
//     and json.dumps's spelling of a float (Infinity where repr says inf).
//
// Everything here is checked against answers recorded from Placement 8.0
// (python-jsonschema 4.10); change it only with such a recording. The
// fuzz targets (fuzz_test.go, and FuzzValidateSchemas beside the API's
// schemas in httpapi) hold it to encoding/json where the two must agree.
package pycompat
