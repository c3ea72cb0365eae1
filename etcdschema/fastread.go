package etcdschema

import (
	"strconv"
	"time"
)

// jsonReader reads the nested JSON of the placement records (objects,
// arrays of strings, integers, floats, times) for fastDecoder. Every
// method skips the whitespace before what it reads and reports false for
// anything it does not read exactly as encoding/json would into the
// field's type (escapes, null, a number JSON or strconv would read
// differently, invalid UTF-8, a syntax error), so its caller declines and
// Decode leaves the whole value to encoding/json.
type jsonReader struct {
	data []byte
	i    int
}

// next skips whitespace and reports whether c follows, consuming it.
func (r *jsonReader) next(c byte) bool {
	r.i = skipWS(r.data, r.i)
	if r.i < len(r.data) && r.data[r.i] == c {
		r.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left (encoding/json rejects
// anything after the value).
func (r *jsonReader) end() bool {
	return skipWS(r.data, r.i) == len(r.data)
}

// str reads a string without escapes (its bytes are then what
// encoding/json returns).
func (r *jsonReader) str() ([]byte, bool) {
	r.i = skipWS(r.data, r.i)
	s, i, ok := plainString(r.data, r.i)
	r.i = i
	return s, ok
}

// null reports whether the literal null is next, consuming it. Only map
// and slice fields accept it, where encoding/json sets them to nil (and
// json.Marshal writes a nil map or slice as null); elsewhere its meaning
// depends on the type, so it is declined.
func (r *jsonReader) null() bool {
	i := skipWS(r.data, r.i)
	if len(r.data)-i >= 4 && string(r.data[i:i+4]) == "null" {
		r.i = i + 4
		return true
	}
	return false
}

// bool reads true or false for a bool field.
func (r *jsonReader) bool() (bool, bool) {
	i := skipWS(r.data, r.i)
	switch {
	case len(r.data)-i >= 4 && string(r.data[i:i+4]) == "true":
		r.i = i + 4
		return true, true
	case len(r.data)-i >= 5 && string(r.data[i:i+5]) == "false":
		r.i = i + 5
		return false, true
	}
	return false, false
}

// string reads a string for a string field.
func (r *jsonReader) string() (string, bool) {
	s, ok := r.str()
	if !ok {
		return "", false
	}
	return string(s), true
}

// object reads an object, calling member with each name once the name and
// its colon are read; member reads the value. It stops and reports false
// when member does.
func (r *jsonReader) object(member func(name []byte) bool) bool {
	if !r.next('{') {
		return false
	}
	if r.next('}') {
		return true
	}
	for {
		name, ok := r.str()
		if !ok || !r.next(':') || !member(name) {
			return false
		}
		if r.next(',') {
			continue
		}
		return r.next('}')
	}
}

// strings reads an array of strings. An empty array gives an empty,
// non-nil slice, as encoding/json does; null a nil one.
func (r *jsonReader) strings() ([]string, bool) { return r.stringsFrom(nil) }

// stringsFrom is strings taking each element from str (nil: a copy of
// its bytes), which must not keep the bytes.
func (r *jsonReader) stringsFrom(str func(b []byte) string) ([]string, bool) {
	// Gathered on the stack and copied once into a slice of their
	// number: a host's sync lists its instances (ten or so), and growing
	// the slice by appends left four smaller ones to the GC per sync.
	var buf [16]string
	out, ok := r.appendStrings(buf[:0], str)
	if !ok || out == nil {
		return nil, ok
	}
	return append(make([]string, 0, len(out)), out...), true
}

// stringsInto is stringsFrom into dst's array (from its start, grown
// if short) when dst is not nil: a reader that keeps none of the
// decoded slices reuses one array for every record.
func (r *jsonReader) stringsInto(dst []string, str func(b []byte) string) ([]string, bool) {
	if dst == nil {
		return r.stringsFrom(str)
	}
	return r.appendStrings(dst[:0], str)
}

// appendStrings reads an array of strings onto out (not nil, so that an
// empty array gives an empty, non-nil slice), each element taken from
// str (nil: a copy of its bytes); null gives nil.
func (r *jsonReader) appendStrings(out []string, str func(b []byte) string) ([]string, bool) {
	if str == nil {
		str = func(b []byte) string { return string(b) }
	}
	if r.null() {
		return nil, true
	}
	if !r.next('[') {
		return nil, false
	}
	if r.next(']') {
		return out, true
	}
	for {
		s, ok := r.str()
		if !ok {
			return nil, false
		}
		out = append(out, str(s))
		if r.next(',') {
			continue
		}
		return out, r.next(']')
	}
}

// number reads a JSON number literal, checking its grammar (strconv
// alone accepts more: "inf", "0x1p3", "1_0", "+1", ".5"), and reports
// whether it is a plain integer (no fraction, no exponent).
func (r *jsonReader) number() (lit []byte, integer bool, ok bool) {
	d := r.data
	i := skipWS(d, r.i)
	start := i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return nil, false, false
	}
	integer = true
	if i < len(d) && d[i] == '.' {
		integer = false
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return nil, false, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		integer = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return nil, false, false
		}
	}
	r.i = i
	return d[start:i], integer, true
}

// int64 reads an integer for an int64 (or int) field. A fraction or an
// exponent is encoding/json's error to report ("1.0" does not fit an
// int64 there), and so is an integer that overflows. Past 18 digits (an
// etcd lease id has 19) it is read with the function encoding/json uses,
// strconv.ParseInt of the literal, declining what that rejects.
func (r *jsonReader) int64() (int64, bool) {
	lit, integer, ok := r.number()
	if !ok || !integer {
		return 0, false
	}
	if len(lit) > 18 {
		n, err := strconv.ParseInt(string(lit), 10, 64)
		return n, err == nil
	}
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	var n int64
	for _, c := range lit {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// float64 reads a number for a float64 field with the function
// encoding/json uses (strconv.ParseFloat of the literal), declining what
// it rejects (out of range).
func (r *jsonReader) float64() (float64, bool) {
	lit, _, ok := r.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	return f, err == nil
}

// time reads a time.Time as its UnmarshalJSON does (strict RFC 3339 of
// the string's raw bytes). null, which UnmarshalJSON ignores, is left to
// encoding/json like every null.
func (r *jsonReader) time() (time.Time, bool) {
	s, ok := r.str()
	if !ok {
		return time.Time{}, false
	}
	t, err := parseTime(s)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// int64Map reads an object of integers into a new map (non-nil even when
// empty, as encoding/json makes it; nil for null). A repeated name is
// declined.
func (r *jsonReader) int64Map() (map[string]int64, bool) {
	if r.null() {
		return nil, true
	}
	m := make(map[string]int64, 4)
	ok := r.object(func(name []byte) bool {
		n, ok := r.int64()
		if !ok {
			return false
		}
		if _, dup := m[string(name)]; dup {
			return false
		}
		m[internName(name)] = n
		return true
	})
	return m, ok
}

// internName returns name as a string, shared for the standard resource
// classes that are nearly every map key of the placement records, so a
// load of a million consumers does not allocate a million copies of
// "VCPU" and "MEMORY_MB". The switch compares without allocating.
func internName(name []byte) string {
	switch string(name) {
	case "VCPU":
		return "VCPU"
	case "MEMORY_MB":
		return "MEMORY_MB"
	case "DISK_GB":
		return "DISK_GB"
	case "PCPU":
		return "PCPU"
	case "VGPU":
		return "VGPU"
	case "SRIOV_NET_VF":
		return "SRIOV_NET_VF"
	case "NET_BW_EGR_KILOBIT_PER_SEC":
		return "NET_BW_EGR_KILOBIT_PER_SEC"
	case "NET_BW_IGR_KILOBIT_PER_SEC":
		return "NET_BW_IGR_KILOBIT_PER_SEC"
	}
	return string(name)
}
