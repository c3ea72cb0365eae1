package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/berth-project/berth/internal/httpserve"
	"github.com/berth-project/berth/internal/pycompat"
	"github.com/berth-project/berth/placement"
)

// acceptRange is one media range of an Accept header.
type acceptRange struct {
	typ, sub string
	q        float64
}

func parseAccept(h string) []acceptRange {
	var out []acceptRange
	for _, part := range strings.Split(h, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := strings.Split(part, ";")
		mt := strings.ToLower(strings.TrimSpace(fields[0]))
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok {
			continue
		}
		q := 1.0
		for _, p := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "q") {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
		}
		out = append(out, acceptRange{typ, sub, q})
	}
	return out
}

// quality is the q the Accept ranges give a media type: the most specific
// matching range decides.
func quality(ranges []acceptRange, mt string) float64 {
	typ, sub, _ := strings.Cut(mt, "/")
	best, spec := -1.0, -1
	for _, r := range ranges {
		s := -1
		switch {
		case r.typ == typ && r.sub == sub:
			s = 2
		case r.typ == typ && r.sub == "*":
			s = 1
		case r.typ == "*" && r.sub == "*":
			s = 0
		}
		if s > spec {
			spec, best = s, r.q
		}
	}
	if spec < 0 {
		return 0
	}
	return best
}

// bestErrorType is how webob picks an error body's format: the better of
// HTML and JSON that the Accept header takes, else plain text. Placement
// reads a missing or "*/*" Accept as application/json first.
func bestErrorType(accept string) string {
	a := strings.TrimSpace(accept)
	if a == "" || a == "*/*" {
		return "application/json"
	}
	ranges := parseAccept(a)
	best, bq := "text/plain", 0.0
	for _, t := range []string{"text/html", "application/json"} {
		if q := quality(ranges, t); q > bq {
			best, bq = t, q
		}
	}
	return best
}

// checkAccept is Placement's check_accept: 406 when an explicit Accept
// rules out JSON.
func (c *reqCtx) checkAccept() error {
	a := c.r.Header.Get("Accept")
	if strings.TrimSpace(a) == "" {
		return nil
	}
	if quality(parseAccept(a), "application/json") <= 0 {
		return &httpError{status: 406, detail: "Only application/json is provided"}
	}
	return nil
}

// requireContent is Placement's require_content("application/json"): a
// 415 unless the media type (parameters aside, case kept as webob keeps
// it) is application/json. It runs before policy and the handler.
func (c *reqCtx) requireContent() error {
	mt := strings.TrimSpace(strings.SplitN(c.r.Header.Get("Content-Type"), ";", 2)[0])
	if mt == "application/json" {
		return nil
	}
	if mt == "" {
		mt = "None"
	}
	return &httpError{status: 415, detail: fmt.Sprintf("The media type %s is not supported, use application/json", mt)}
}

// maxBodyBytes bounds a request body. The largest Placement takes is a
// reshape: every inventory and allocation of a provider tree, kilobytes
// to a few megabytes. A body over it was once cut short and answered as
// malformed JSON; it is now answered 413 and not read further.
const maxBodyBytes = 16 << 20

// readBody is readJSON then validateBody against sch: Placement's
// extract_json, which every handler taking a body calls.
func (c *reqCtx) readBody(sch *pycompat.Schema) (any, error) {
	v, err := c.readJSON()
	if err != nil {
		return nil, err
	}
	if err := c.validateBody(v, sch); err != nil {
		return nil, err
	}
	return v, nil
}

// readJSON is require_content("application/json") plus extract_json: it
// decodes the body into a generic value for validation.
func (c *reqCtx) readJSON() (any, error) {
	if err := c.requireContent(); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, maxBodyBytes))
	if limit, tooLarge := httpserve.BodyTooLarge(err); tooLarge {
		return nil, &httpError{status: http.StatusRequestEntityTooLarge,
			detail: fmt.Sprintf("The body of your request was too large for this server: at most %d bytes.", limit)}
	}
	if err != nil {
		return nil, errBadRequest("read body: %v", err)
	}
	// Placement decodes the body as UTF-8, then parses it with Python's
	// json; a refusal quotes Python's words, which pycompat.JSONError finds.
	malformed := func(goErr string) error {
		if msg := pycompat.JSONError(body); msg != "" {
			return errBadRequest("Malformed JSON: %s", msg)
		}
		// Python takes what Go does not (NaN, Infinity).
		return errBadRequest("Malformed JSON: %s", goErr)
	}
	if !utf8.Valid(body) {
		return nil, malformed("invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, malformed(err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("extra data")
	}
	c.bodyOrder = pycompat.JSONKeyOrder(body)
	return v, nil
}

// checkBodyContentType is what Placement's handler checks of every
// request before routing: a body (content-length > 0) needs a content
// type.
func (c *reqCtx) checkBodyContentType() error {
	if _, bad := c.r.Header[badContentLengthHeader]; bad {
		// Listener renamed a Content-Length net/http would refuse; the
		// body that followed was never framed, so the connection ends
		// with this answer.
		c.w.Header().Set("Connection", "close")
		return raisedErr(errBadRequest("content-length header must be an integer"))
	}
	if c.r.ContentLength > 0 && c.r.Header.Get("Content-Type") == "" {
		return raisedErr(errBadRequest("content-type header required when content-length > 0"))
	}
	return nil
}

// normalizeUUID spells a uuid-like string canonically.
func normalizeUUID(s string) string {
	s = strings.TrimPrefix(strings.TrimSuffix(s, "}"), "{")
	s = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(strings.ToLower(s), "urn:uuid:")), "-", "")
	if len(s) != 32 {
		return s
	}
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// query is the request's query string, with webob's getall semantics.
func (c *reqCtx) query() url.Values { return c.r.URL.Query() }

// setCacheHeaders adds 1.15's cache-control and last-modified.
func (c *reqCtx) setCacheHeaders(last time.Time) {
	if !c.atLeast(15) {
		return
	}
	if last.IsZero() {
		last = time.Now().UTC()
	}
	c.w.Header().Set("Cache-Control", "no-cache")
	c.w.Header().Set("Last-Modified", last.UTC().Format(http.TimeFormat))
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sortedStrings is a sorted copy, never nil (JSON [] rather than null).
func sortedStrings(in []string) []string {
	out := append([]string{}, in...)
	sort.Strings(out)
	return out
}

// jsonInt reads a JSON integer (not a float, not a bool).
func jsonInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	if err != nil {
		// 1.0 is an integer to jsonschema.
		f, ferr := n.Float64()
		if ferr != nil || f != float64(int64(f)) {
			return 0, false
		}
		return int64(f), true
	}
	return i, true
}

func jsonNumber(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// nonNil is in, or an empty list (JSON [] rather than null).
func nonNil(in []string) []string {
	if in == nil {
		return []string{}
	}
	return in
}

// setLocation sets Location as webob sends it: made absolute against the
// request's own scheme and host.
func (c *reqCtx) setLocation(path string) {
	scheme := "http"
	if c.r.TLS != nil {
		scheme = "https"
	}
	c.w.Header().Set("Location", scheme+"://"+c.r.Host+path)
}

// traitOrder lists a provider's traits as Placement's database returns
// them, by trait id: the standard traits (made at start-up) before the
// custom ones (made later); sorted within each, never nil.
func traitOrder(traits []string) []string {
	out := sortedStrings(traits)
	sort.SliceStable(out, func(i, j int) bool { return placement.IsStandardTrait(out[i]) && !placement.IsStandardTrait(out[j]) })
	return out
}

// sortedKeys lists a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// validateBody is util.extract_json's validation: a 400 with
// "JSON does not validate: <str(error)>". It walks objects in the order
// the body gave their keys (readJSON records it).
func (c *reqCtx) validateBody(v any, sch *pycompat.Schema) error {
	if e := pycompat.Validate(v, sch, c.bodyOrder); e != nil {
		return errBadRequest("JSON does not validate: %s", e.String())
	}
	return nil
}

// validateQuery is util.validate_query_params: the query string as a dict
// (the last value of a repeated key, keys in query order) against the
// schema.
func validateQuery(c *reqCtx, sch *pycompat.Schema) error {
	q := c.query()
	obj := make(map[string]any, len(q))
	for k, vs := range q {
		obj[k] = vs[len(vs)-1]
	}
	if e := pycompat.Validate(obj, sch, pycompat.TopKeyOrder(orderedQueryKeys(c.r.URL.RawQuery))); e != nil {
		return errBadRequest("Invalid query string parameters: %s", e.String())
	}
	return nil
}
